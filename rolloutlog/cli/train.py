"""`rolloutlog train`: a real GRPO run on the digit task, recorded as a log that verifies.

This module parses the options and prints; the run itself is `runs.train` (the live
driver writes the log, replay reports on it), checked first by `runs.train_inputs`.
torch is imported only when a run starts, so the rest of the CLI stays light.
`--json` prints every key of `replay --json` (its `error` as `replay_error`) plus
`reward_curve` (mean reward of each shipped batch), `wall_seconds` and the driver's own.
Exit status: 0 when the run shipped its steps, 1 when a fault ended it (the log is still
valid up to the fault) or replaying the log found a broken property, 2 for bad input.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

import click
from click.core import ParameterSource

from rolloutlog.cli.bad_input import command, fail, os_problem, sole_writer
from rolloutlog.cli.options import (
    missing_extra,
    not_a_log,
)
from rolloutlog.cli.output import emit_json, say_next
from rolloutlog.cli.policies import one_policy
from rolloutlog.cli.progress import phase, progress
from rolloutlog.cli.train_options import (
    NOT_WITH_RESUME,
    NOT_WITH_SAVE_INITIAL,
    refuse_beside,
    train_options,
)
from rolloutlog.cli.train_report import print_report
from rolloutlog.core.config import ConfigError, parse_overrides
from rolloutlog.core.presets import preset_overrides
from rolloutlog.events.errors import LogError
from rolloutlog.runs.train_inputs import (
    RunRefused,
    check_folder,
    check_new_run,
    check_urls,
    read_crashed_run,
    weights_beside,
)
from rolloutlog.runtime.live.settings import build_settings

if TYPE_CHECKING:  # the driver needs torch: imported when a run starts, not with the CLI
    from rolloutlog.runtime.live.reports import StepStats

FAULT = 1  # a run that broke; bad input exits 2 (cli.bad_input)
TRAIN_EXTRA = ("torch", "safetensors", "httpx", "h11")  # pyproject's `train` extra


def default_log_path() -> Path:
    """`runs/train-YYYYmmdd-HHMMSS.arrow`: every run keeps its own log."""
    return Path("runs") / time.strftime("train-%Y%m%d-%H%M%S.arrow")


def _live() -> ModuleType:
    """`runs.train`, imported (with torch: seconds) only once the input is checked."""
    with phase("starting: importing torch"):
        from rolloutlog.runs import train

    return train


@contextmanager
def _progress(steps: int) -> Iterator[Callable[[StepStats], None]]:
    """Step, mean reward, trained ages, stale cancels and drops, on stderr (cli.progress),
    with `--json` too (it prints to stdout)."""
    with progress("step", steps, first="starting inference ...") as update:
        yield lambda stats: update(stats.step, describe_step(stats))


def describe_step(stats: StepStats) -> str:
    """One progress line: `reward 0.534  ages 0:12 1:244  v41  cancelled 12  dropped 30 ...`.

    Ages are the rollout ages of the batch's trained episodes; cancelled (stale, in
    flight), dropped (stale, arrived) and failed are totals so far.
    """
    reward = "-" if stats.mean_reward is None else f"{stats.mean_reward:.3f}"
    ages = " ".join(f"{age}:{count}" for age, count in stats.ages.items()) or "-"
    return (
        f"reward {reward}  ages {ages}  v{stats.version_live}  "
        f"cancelled {stats.cancelled_stale}  dropped {stats.dropped_stale}  "
        f"failed {stats.failed}"
    )


@command("train")
@train_options
def train_command(
    steps: int,
    seed: int,
    policy: str | None,
    overrides: tuple[str, ...],
    log_path: Path | None,
    backend: str,
    urls: tuple[str, ...],
    weights_dir: Path | None,
    initial_dir: Path | None,
    resume_log: Path | None,
    as_json: bool,
) -> None:
    """Train a small Llama to sort digits with GRPO, inference and training concurrent.

    Writes a log that `rolloutlog verify` re-derives; see docs/runtime.md.
    """
    problem = missing_extra("rolloutlog train", "train", TRAIN_EXTRA)
    if problem is not None:
        fail(problem)
    try:
        if resume_log is not None:
            resume_command(resume_log, steps, urls, weights_dir, as_json)
            return
        check_urls(urls)
        try:
            preset = {} if policy is None else preset_overrides(one_policy(policy))
        except ConfigError as error:
            fail(f"--policy: {error}")
        try:
            explicit = parse_overrides(overrides)
            named = {key.removeprefix("run.") for key in explicit}  # a --set wins
            preset = {key: value for key, value in preset.items() if key not in named}
            config, settings = build_settings({**preset, **explicit}, seed=seed)
        except ConfigError as error:
            fail(str(error))
        if initial_dir is not None:
            refuse_beside("--save-initial", NOT_WITH_SAVE_INITIAL)
            check_folder(initial_dir, "--save-initial")
            try:
                written = _live().save_initial(settings, seed, initial_dir)
            except OSError as error:
                fail(f"--save-initial {initial_dir}: {os_problem(error)}")
            click.echo(f"wrote the v0 checkpoint to {written}")
            return
        if backend == "vllm" and (not urls or weights_dir is None):
            fail("--backend vllm needs --url (one per server) and --weights-dir")
        problem = None if log_path is None else not_a_log(log_path)
        if problem is not None:
            fail(f"--log {problem}")
        default_log = log_path is None
        log_path = log_path or default_log_path()
        with sole_writer(log_path):  # a second `train` on this log is one line
            check_new_run(log_path, weights_dir, default_log=default_log)
            live = _live()
            if weights_dir is not None:
                live.check_weights_dir(weights_dir)
            run = dict(config=config, settings=settings, steps=steps, seed=seed, urls=urls)
            weights = weights_dir or weights_beside(log_path)
            _run(live, "--log", as_json, log_path=log_path, weights_dir=weights, **run)
    except RunRefused as error:
        fail(str(error))


def resume_command(
    log_path: Path,
    steps: int,
    urls: tuple[str, ...],
    weights_dir: Path | None,
    as_json: bool,
) -> None:
    """`train --resume LOG`: the run as it was started, continued (docs/runtime.md);
    everything is checked and the log folded before anything is opened for writing."""
    refuse_beside("--resume", NOT_WITH_RESUME)
    explicit = click.get_current_context().get_parameter_source("steps")
    check_urls(urls)
    with sole_writer(log_path):  # a run still writing it is refused, not misread
        _resume(
            log_path,
            steps if explicit is ParameterSource.COMMANDLINE else None,
            urls,
            weights_dir,
            as_json,
        )


def _resume(
    log_path: Path,
    chosen: int | None,
    urls: tuple[str, ...],
    weights_dir: Path | None,
    as_json: bool,
) -> None:
    run = read_crashed_run(log_path)
    live = _live()
    resumed = live.resumable(log_path, run, weights_dir=weights_dir, steps=chosen)
    _run(
        live,
        "--resume",
        as_json,
        config=run.config,
        settings=run.settings,
        steps=resumed.steps,
        seed=run.seed,
        log_path=log_path,
        urls=urls or run.urls,
        weights_dir=resumed.weights_dir,
        resume=resumed.point,
    )


def _run(live: ModuleType, option: str, as_json: bool, **run: Any) -> None:
    """Run (`runs.train.run_training`) with progress on stderr, then print the report."""
    log_path = run["log_path"]
    try:
        with _progress(run["steps"]) as on_step:
            report = live.run_training(**run, on_step=on_step, on_resumed=_say)
    except LogError as error:
        fail(f"{option} {log_path}: {error}")
    except OSError as error:  # the message names the file
        fail(
            os_problem(error) if option == "--log" else f"{option} {log_path}: {os_problem(error)}"
        )
    except live.NothingRecorded as error:
        if error.stopped_by is not None:  # the user stopped it: the shell's status
            _say(str(error))
            raise SystemExit(128 + error.stopped_by) from error
        fault(str(error))
    except live.ServerStartError as error:
        fault(str(error))
    finish(report, as_json)


def _say(line: str) -> None:
    click.echo(f"rolloutlog: {line}", err=True)


def fault(message: str) -> NoReturn:
    """Stop on a fault that is not bad input (a server that would not start): exit 1."""
    click.echo(f"rolloutlog: error: {message}", err=True)
    raise SystemExit(FAULT)


def finish(report: dict[str, Any], as_json: bool) -> None:
    """Print the report; exit 1 on a fault or a log that breaks a property, 130 or 143
    when Ctrl-C or SIGTERM stopped the run (resumable: no `run_finished`)."""
    if as_json:
        emit_json(report)
    else:
        print_report(report)
    if report["stopped_by"] is not None:
        number = signal.Signals[report["stopped_by"]]
        _say(
            f"stopped by {number.name} after {report['steps_shipped']} steps; "
            f"next: rolloutlog train --resume {report['log']}"
        )
        raise SystemExit(128 + number)
    if report["error"] is not None:
        resumable = report["run_finished"] is None and report["events"] > 0
        then = f"; continue it with: rolloutlog train --resume {report['log']}" if resumable else ""
        fault(f"{report['finished_reason']}: {report['error']}{then}")
    broken = report["invariant_violations"] or report["replay_error"]
    if broken:  # the deciders never break a property; if the log does, say so loudly
        fault(f"the log breaks a property: {broken}")
    log = Path(report["log"])
    say_next(f"rolloutlog verify {log}", f"rolloutlog timeline {log} -o {log.with_suffix('.html')}")
