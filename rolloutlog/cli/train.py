"""`rolloutlog train`: a real GRPO run on the digit task, recorded as a log that verifies.

Here the live driver (`rolloutlog.runtime.live`) meets replay's run summary: the driver
trains while it writes the log, then the log is replayed (the columnar fold, every
property checked on every event) for the report, so the report says what the log says.
torch is imported only when a run starts, so the rest of the CLI stays light.
`--json` prints every key of `replay --json` (its `error` as `replay_error`) plus
`reward_curve` (mean reward of each shipped batch), `wall_seconds` and the driver's own.
Exit status: 0 when the run shipped its steps, 1 when a fault ended it (the log is still
valid up to the fault) or replaying the log found a broken property, 2 for bad input.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import warnings
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar
from urllib.parse import urlsplit

import attrs
import click
from click.core import ParameterSource
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rolloutlog.cli.bad_input import fail
from rolloutlog.cli.options import (
    file_option,
    folder_option,
    json_option,
    seed_option,
    set_option,
)
from rolloutlog.cli.output import emit_json, key_values, run_age_split
from rolloutlog.core.account import Account
from rolloutlog.core.config import ConfigError, RunConfig, parse_overrides
from rolloutlog.events.errors import LogError, TornTailWarning
from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.log_writer import BATCH_EVENTS_MAX, LogWriter
from rolloutlog.events.types import Event, RunResumed, RunStarted
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import open_log
from rolloutlog.runtime.live.settings import LiveSettings, build_settings

if TYPE_CHECKING:  # the driver needs torch: imported when a run starts, not with the CLI
    from rolloutlog.runtime.live.reports import StepStats
    from rolloutlog.runtime.live.resume import ResumePoint
    from rolloutlog.runtime.live.rollout_store import StoredRun

DEFAULT_STEPS = 300
T = TypeVar("T")
FAULT = 1  # a run that broke; bad input exits 2 (cli.bad_input)


def default_log_path() -> Path:
    """`runs/train-YYYYmmdd-HHMMSS.arrow`: every run keeps its own log."""
    return Path("runs") / time.strftime("train-%Y%m%d-%H%M%S.arrow")


def run_training(
    config: RunConfig,
    settings: LiveSettings,
    *,
    steps: int,
    seed: int,
    log_path: Path,
    urls: tuple[str, ...] = (),
    weights_dir: Path | None = None,
    on_step: Callable[[StepStats], None] | None = None,
    resume: ResumePoint | None = None,
) -> dict[str, Any]:
    """Train, write the log, replay it: the `--json` report (with `error` on a fault).

    With `resume` (the crashed run folded by `prepare_resume`, which checked everything
    the resume needs), the log and its rollout store are continued instead.
    """
    from rolloutlog.runtime.live.broadcast import new_run_id
    from rolloutlog.runtime.live.driver import RunOutputs
    from rolloutlog.runtime.live.rollout_store import RolloutStore, store_path
    from rolloutlog.runtime.live.session import train_live

    log_path.parent.mkdir(parents=True, exist_ok=True)
    started, resumed_after_s = time.monotonic(), []

    def on_events(events: list[Event]) -> None:  # time to resume: fold, servers, publish
        restart = events[0]
        if isinstance(restart, RunResumed):
            resumed_after_s.append(round(time.monotonic() - started, 3))
            click.echo(
                f"rolloutlog: resumed {log_path} at seq {restart.seq} in "
                f"{resumed_after_s[0]:.2f} s: {restart.reason}",
                err=True,
            )

    # Commits happen where the driver says (settled points), never mid-reaction; lz4 keeps
    # a commit of a few hundred events cheap. Appending cuts a torn tail first.
    weights = None if weights_dir is None else str(weights_dir.resolve())
    run_id = new_run_id() if resume is None else resume.run_id
    with (
        _open_log(log_path, append=resume is not None) as log,
        contextlib.closing(RolloutStore(store_path(log_path), append=resume is not None)) as store,
    ):
        if resume is None:
            store.note(
                seed=seed,
                steps=steps,
                settings=attrs.asdict(settings),
                weights_dir=weights,
                urls=list(urls),
                run_id=run_id,
            )
        else:  # the next resume looks where this one publishes (an override, maybe)
            store.note(weights_dir=weights, run_id=run_id)
        store.sync()  # the run's id is durable before any checkpoint names it
        result = asyncio.run(
            _until_terminated(
                train_live(
                    config,
                    settings,
                    steps=steps,
                    seed=seed,
                    urls=urls,
                    weights_dir=weights_dir,
                    outputs=RunOutputs(log=log, on_events=on_events, on_step=on_step, store=store),
                    resume=resume,
                    run_id=run_id,
                )
            )
        )
    source = open_log(log_path)
    replay = replay_log(source)
    return {
        "log": str(log_path),
        **replay.summary,
        **run_age_split(source),
        "digest": replay.digest.hex(),
        "replay_error": None if replay.error is None else str(replay.error),
        "reward_curve": list(result.reward_curve),
        "wall_seconds": round(result.wall_seconds, 3),
        "resume_seconds": resumed_after_s[0] if resumed_after_s else None,
        "finished_reason": result.finished_reason,
        "error": result.error,
        "version_live": result.version_live,
        "versions_trained": result.versions_trained,
        "aborts_sent": result.counts.get("aborts_sent", 0),
        "late_arrivals": result.counts.get("late", 0),
        "endpoints": list(result.endpoints),
        "seed": seed,
        "settings": attrs.asdict(settings),
    }


def _open_log(path: Path, *, append: bool) -> LogWriter:
    """The run's log; appending cuts a torn tail, which the restart event records."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornTailWarning)
        return LogWriter(
            path,
            mode="append" if append else "create",
            batch_events=BATCH_EVENTS_MAX,
            compression="lz4",
        )


async def _until_terminated(run: Coroutine[Any, Any, T]) -> T:
    """Run `run`; SIGTERM cancels it as Ctrl-C does, so the driver records
    `run_finished(interrupted)` and the log closes cleanly instead of just stopping."""
    task = asyncio.ensure_future(run)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await task
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


@contextmanager
def _progress(steps: int, quiet: bool) -> Iterator[Callable[[StepStats], None]]:
    """A live line on stderr: step, mean reward, trained ages, stale cancels and drops."""
    if quiet:
        yield lambda stats: None
        return
    progress = Progress(
        TextColumn("step"),
        MofNCompleteColumn(),
        BarColumn(bar_width=10),
        TextColumn("{task.fields[line]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with progress:
        task = progress.add_task("train", total=steps, line="starting inference ...")

        def on_step(stats: StepStats) -> None:
            progress.update(task, completed=stats.step, line=describe_step(stats))

        yield on_step


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


@click.command("train")
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=DEFAULT_STEPS,
    show_default=True,
    help="Batches to ship; the run then stops.",
)
@seed_option("Seeds the task source, the model's initialisation and every episode's sampling.", 0)
@set_option(
    "overrides",
    "KEY=VALUE",
    "A RunConfig key (batch_size, max_off_policy_steps, ...) or a live key "
    "(learning_rate, servers, ...); run.KEY / live.KEY name the section. Repeatable.",
)
@file_option(
    "--log",
    "log_path",
    help="The Arrow log to write (must not exist). Default: runs/train-<time>.arrow.",
)
@click.option(
    "--backend",
    type=click.Choice(["cpu", "vllm"]),
    default="cpu",
    show_default=True,
    help="cpu: start local CPU servers (or use --url); vllm: `vllm serve` at --url.",
)
@click.option("--url", "urls", multiple=True, help="An inference endpoint; repeatable.")
@folder_option(
    "--weights-dir",
    help="The weight broadcast directory; the servers must read it (required for vllm).",
)
@folder_option(
    "--save-initial",
    "initial_dir",
    help="Only write the v0 checkpoint (for `vllm serve DIR`) and exit.",
)
@file_option(
    "--resume",
    "resume_log",
    help="Continue the run whose process died, appending to its log; seed, settings and "
    "weights dir come from the run (LOG.rollouts). --steps, --url, --weights-dir override.",
)
@json_option("Print the report as JSON.")
def train_command(
    steps: int,
    seed: int,
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
    if resume_log is not None:
        resume_command(resume_log, steps, urls, weights_dir, as_json)
        return
    check_urls(urls)
    try:
        config, settings = build_settings(parse_overrides(overrides), seed=seed)
    except ConfigError as error:
        fail(str(error))
    if initial_dir is not None:
        from rolloutlog.runtime.live.session import save_initial

        refuse_beside("--save-initial", NOT_WITH_SAVE_INITIAL)
        check_folder(initial_dir, "--save-initial")
        try:
            click.echo(f"wrote the v0 checkpoint to {save_initial(settings, seed, initial_dir)}")
        except OSError as error:
            fail(f"--save-initial {initial_dir}: {error.strerror or error}")
        return
    if backend == "vllm" and (not urls or weights_dir is None):
        fail("--backend vllm needs --url (one per server) and --weights-dir")
    log_path = log_path or default_log_path()
    check_new_outputs(log_path, weights_dir)
    from rolloutlog.runtime.live.twin.launch import ServerStartError  # torch: a run starts

    try:
        with _progress(steps, quiet=as_json) as on_step:
            report = run_training(
                config,
                settings,
                steps=steps,
                seed=seed,
                log_path=log_path,
                urls=urls,
                weights_dir=weights_dir,
                on_step=on_step,
            )
    except LogError as error:
        fail(f"--log {log_path}: {error}")
    except OSError as error:  # the message names the file
        fail(str(error))
    except ServerStartError as error:
        fault(str(error))
    finish(report, as_json)


def check_urls(urls: tuple[str, ...]) -> None:
    """Refuse a `--url` that is not `http(s)://HOST[:PORT]` before anything starts (an
    out-of-range port raised deep in the client, a bare word was retried)."""
    for url in urls:
        parts = urlsplit(url)
        try:
            parts.port  # noqa: B018 (raises on a port out of range)
        except ValueError as error:
            fail(f"--url {url}: {error}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            fail(f"--url {url}: expected http://HOST[:PORT] or https://HOST[:PORT]")


def check_folder(path: Path, option: str) -> None:
    """Refuse a folder that cannot be created or written (a file on its way, no write
    permission), before the command creates anything."""
    existing = path.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        fail(f"{option} {path}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        fail(f"{option} {path}: {existing} is not writable")


def check_new_outputs(log_path: Path, weights_dir: Path | None) -> None:
    """Everything a new run creates, checked before it creates any of it; the weights
    directory is made last (a folder `mkdir` cannot make is only found by trying)."""
    from rolloutlog.runtime.live.broadcast import WeightBroadcast
    from rolloutlog.runtime.live.rollout_store import store_path

    if log_path.exists():
        fail(f"--log {log_path}: exists; name a new file")
    store = store_path(log_path)
    if store.exists():
        fail(f"--log {log_path}: {store} exists (another run's rollout store?); name a new log")
    check_folder(log_path.parent, "--log")
    if weights_dir is None:
        return
    check_folder(weights_dir, "--weights-dir")
    held = WeightBroadcast(weights_dir).versions()
    if held:  # publishing would overwrite and prune them
        fail(
            f"--weights-dir {weights_dir}: holds checkpoints v{held[0]}..v{held[-1]}, maybe of "
            "another run (whose --resume needs them); choose an empty directory"
        )
    try:
        weights_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        fail(f"--weights-dir {weights_dir}: {error.strerror or error}")


# Options a resume takes from the run, and why each is refused beside --resume.
NOT_WITH_RESUME = {
    "overrides": ("--set", "the run's own settings are used"),
    "log_path": ("--log", "the run's own log is continued"),
    "initial_dir": ("--save-initial", "it writes a new run's v0 checkpoint"),
    "seed": ("--seed", "the run's own is used"),
    "backend": ("--backend", "the run's --url servers, or local CPU ones, are used"),
}
# Options `--save-initial` would ignore: it only writes the v0 checkpoint.
NOT_WITH_SAVE_INITIAL = {
    name: (option, "it only writes the v0 checkpoint")
    for name, option in [
        ("steps", "--steps"),
        ("log_path", "--log"),
        ("backend", "--backend"),
        ("urls", "--url"),
        ("weights_dir", "--weights-dir"),
        ("as_json", "--json"),
    ]
}


def refuse_beside(option: str, refused: dict[str, tuple[str, str]]) -> None:
    """Refuse options given on the command line that `option` would silently ignore."""
    context = click.get_current_context()
    for name, (other, why) in refused.items():
        if context.get_parameter_source(name) is ParameterSource.COMMANDLINE:
            fail(f"{other}: not with {option} ({why})")


@attrs.frozen(kw_only=True)
class CrashedRun:
    """What `--resume` takes from the run itself: its `run_started` and its store's notes."""

    config: RunConfig
    settings: LiveSettings
    stored: StoredRun
    seed: int
    steps: int
    weights_dir: Path | None
    urls: tuple[str, ...]


def resume_command(
    log_path: Path,
    steps: int,
    urls: tuple[str, ...],
    weights_dir: Path | None,
    as_json: bool,
) -> None:
    """`train --resume LOG`: the run as it was started, continued (docs/runtime.md).

    Everything is checked and the log folded before anything is opened for writing, so a
    refused resume leaves the log, the store and the weights directory as they were.
    """
    refuse_beside("--resume", NOT_WITH_RESUME)
    context = click.get_current_context()
    check_urls(urls)
    run = read_crashed_run(log_path)
    weights = weights_dir or run.weights_dir
    if weights is None:
        fail(
            f"--resume {log_path}: the run kept its weights in a temporary directory "
            "(it had no --weights-dir), so there is no checkpoint to restart from"
        )
    point = prepare_resume(log_path, run, weights)
    explicit = context.get_parameter_source("steps") is ParameterSource.COMMANDLINE
    if explicit and steps <= point.shipped:
        fail(
            f"--steps {steps}: the run already shipped {point.shipped} batches; "
            f"a resume needs more (or leave --steps out: the run's own is {run.steps})"
        )
    from rolloutlog.runtime.live.twin.launch import ServerStartError  # torch: a run starts

    try:
        with _progress(steps, quiet=as_json) as on_step:
            report = run_training(
                run.config,
                run.settings,
                steps=steps if explicit else run.steps,
                seed=run.seed,
                log_path=log_path,
                urls=urls or run.urls,
                weights_dir=weights,
                on_step=on_step,
                resume=point,
            )
    except (OSError, LogError) as error:
        fail(f"--resume {log_path}: {error}")
    except ServerStartError as error:
        fault(str(error))
    finish(report, as_json)


def read_crashed_run(log_path: Path) -> CrashedRun:
    """The run to resume, read (never written) from its log and its rollout store."""
    from rolloutlog.runtime.live.rollout_store import StoreError, read_store, store_path

    if not log_path.is_file():
        fail(f"--resume {log_path}: no such log")
    store = store_path(log_path)
    try:  # a process killed as it created the log leaves it empty
        first = (
            next(iter(LogReader(log_path, warn=False)), None) if log_path.stat().st_size else None
        )
    except (OSError, LogError) as error:
        fail(f"--resume {log_path}: {error}")
    if not isinstance(first, RunStarted):
        fail(
            f"--resume {log_path}: the run never started (its process died before it "
            f"recorded run_started), so there is nothing to resume; start it anew (remove "
            f"{log_path} and {store}, or name a new --log)"
        )
    try:
        stored = read_store(store)
    except (OSError, StoreError) as error:
        fail(f"--resume {log_path}: {error}")
    meta = stored.meta
    try:
        return CrashedRun(
            config=RunConfig.from_mapping(first.config, where="run_started.config"),
            settings=LiveSettings(**meta["settings"]),
            stored=stored,
            seed=int(meta["seed"]),
            steps=int(meta["steps"]),
            weights_dir=None if meta.get("weights_dir") is None else Path(meta["weights_dir"]),
            urls=tuple(meta.get("urls", ())),
        )
    except (ConfigError, KeyError, TypeError, ValueError) as error:
        fail(f"--resume {log_path}: {store}: the run's notes are unusable ({error!r})")


def prepare_resume(log_path: Path, run: CrashedRun, weights_dir: Path) -> ResumePoint:
    """Fold the crashed run against its weights directory (`resume.prepare`); it only
    reads, so a refusal here changes nothing."""
    from rolloutlog.runtime.live.broadcast import WeightBroadcast
    from rolloutlog.runtime.live.driver import new_request_prefix
    from rolloutlog.runtime.live.resume import ResumeError, prepare

    try:
        return prepare(
            log_path,
            stored=run.stored,
            broadcast=WeightBroadcast(weights_dir),
            request_prefix=new_request_prefix(),
            seed=run.seed,
            temperature=run.settings.temperature,
            hard_task_share=run.settings.hard_task_share,
            observers=(Account(run.config),) if run.settings.check_invariants else (),
        )
    except (OSError, LogError, ResumeError) as error:
        fail(f"--resume {log_path}: {error}")


def fault(message: str) -> NoReturn:
    """Stop on a fault that is not bad input (a server that would not start): exit 1."""
    click.echo(f"rolloutlog: error: {message}", err=True)
    raise SystemExit(FAULT)


def finish(report: dict[str, Any], as_json: bool) -> None:
    """Print the report; exit 1 on a fault or a log that breaks a property."""
    if as_json:
        emit_json(report)
    else:
        print_report(report)
    if report["error"] is not None:
        fault(f"{report['finished_reason']}: {report['error']}")
    broken = report["invariant_violations"] or report["replay_error"]
    if broken:  # the deciders never break a property; if the log does, say so loudly
        fault(f"the log breaks a property: {broken}")


def print_report(report: dict[str, Any]) -> None:
    """The run as a table; the reward curve in tenths of the run."""
    curve = [r for r in report["reward_curve"] if r is not None]
    rows = [
        ("finished", report["finished_reason"]),
        ("steps shipped", report["steps_shipped"]),
        ("wall seconds", f"{report['wall_seconds']:.1f}"),
        ("reward first → last 5", _first_last(curve)),
        ("reward curve", _sparkline(curve)),
        ("episodes dispatched", report["episodes_dispatched"]),
        ("episodes trained", report["episodes_trained"]),
        ("cancelled in flight", json.dumps(report["episodes_cancelled"])),
        ("aborts sent / late arrivals", f"{report['aborts_sent']} / {report['late_arrivals']}"),
        ("dropped stale", report["episodes_dropped_stale"]),
        ("failed", report["episodes_failed"]),
        ("trained ages", json.dumps(report["trained_age_histogram"])),
        ("invariant violations", len(report["invariant_violations"])),
        ("endpoints", _endpoints(report["endpoints"])),
        ("log", f"{report['log']}  (check it: rolloutlog verify {report['log']})"),
    ]
    Console().print(key_values("rolloutlog train", [(key, str(value)) for key, value in rows]))


def _endpoints(endpoints: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"{e['url']}  {e['generations']} generations"
        + ("" if e["alive"] else f"  (lost: {e['lost_reason']})")
        for e in endpoints
    )


def _first_last(curve: list[float]) -> str:
    if not curve:
        return "-"
    tail = curve[-5:]
    return f"{curve[0]:.3f} → {sum(tail) / len(tail):.3f}"


def _sparkline(curve: list[float]) -> str:
    if not curve:
        return "-"
    size = max(1, len(curve) // 10)
    points = [curve[i : i + size] for i in range(0, len(curve), size)]
    return " ".join(f"{sum(p) / len(p):.2f}" for p in points)
