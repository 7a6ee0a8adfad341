"""One live training run, new or resumed: the driver writes the log, replay reports on it.

The live driver (`rolloutlog.runtime.live`) trains while it writes the log; then the log
is replayed (the columnar fold, every property checked on every event) for the report, so
the report says what the log says: every key of `replay --json` (its `error` as
`replay_error`) plus `reward_curve` (mean reward of each shipped batch), `wall_seconds`
and the driver's own. This module imports torch; `runs.train_inputs` checks a run's input
without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import time
import warnings
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import attrs

from rolloutlog.core.account import Account
from rolloutlog.core.config import RunConfig
from rolloutlog.events.errors import LogError, TornTailWarning
from rolloutlog.events.log_writer import BATCH_EVENTS_MAX, LogWriter
from rolloutlog.events.types import Event, RunResumed
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import open_log
from rolloutlog.replay.step_metrics import run_age_split
from rolloutlog.runs.train_inputs import CrashedRun, RunRefused, weights_beside
from rolloutlog.runtime.live.broadcast import WeightBroadcast, new_run_id
from rolloutlog.runtime.live.deferred_log import DeferredLog
from rolloutlog.runtime.live.driver import RunOutputs, new_request_prefix
from rolloutlog.runtime.live.model import CONFIG_FILE, WEIGHTS_FILE
from rolloutlog.runtime.live.reports import LiveResult, StepStats
from rolloutlog.runtime.live.resume import ResumeError, ResumePoint, prepare
from rolloutlog.runtime.live.rollout_store import RolloutStore, store_path
from rolloutlog.runtime.live.session import save_initial as _save_initial
from rolloutlog.runtime.live.session import train_live
from rolloutlog.runtime.live.settings import LiveSettings
from rolloutlog.runtime.live.twin.launch import ServerStartError

T = TypeVar("T")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
__all__ = [  # what `rolloutlog train` uses (`save_initial`, `ServerStartError` included)
    "NothingRecorded",
    "ServerStartError",
    "check_weights_dir",
    "prepare_resume",
    "resumable",
    "run_training",
    "save_initial",
]


class NothingRecorded(RuntimeError):
    """A new run stopped before it recorded `run_started`; what it made is removed.
    `stopped_by`: the signal that stopped it (Ctrl-C, SIGTERM), if one did."""

    def __init__(self, message: str, stopped_by: int | None = None) -> None:
        super().__init__(message)
        self.stopped_by = stopped_by


def save_initial(settings: LiveSettings, seed: int, directory: Path) -> Path:
    """`train --save-initial DIR`: the v0 checkpoint for an external server; a write that
    fails (a full disk) takes back what it wrote, so that the same command can be retried."""
    made = not directory.exists()
    try:
        return _save_initial(settings, seed, directory)
    except BaseException:
        for name in (WEIGHTS_FILE, CONFIG_FILE):
            (directory / name).unlink(missing_ok=True)
        if made:
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise


def check_weights_dir(weights_dir: Path) -> None:
    """A `--weights-dir` that holds checkpoints is refused (publishing would overwrite and
    prune another run's, which its resume needs); then the directory is made (a folder
    `mkdir` cannot make is only found by trying)."""
    held = WeightBroadcast(weights_dir).versions()
    if held:
        raise RunRefused(
            f"--weights-dir {weights_dir}: holds checkpoints v{held[0]}..v{held[-1]}, maybe of "
            "another run (whose --resume needs them); choose an empty directory"
        )
    try:
        weights_dir.mkdir(exist_ok=True)
    except OSError as error:
        raise RunRefused(f"--weights-dir {weights_dir}: {error.strerror or error}") from error


@attrs.frozen(kw_only=True)
class Resumption:
    """A crashed run, folded and checked: what `run_training(resume=...)` continues."""

    run: CrashedRun
    point: ResumePoint
    weights_dir: Path
    steps: int


def resumable(
    log_path: Path, run: CrashedRun, *, weights_dir: Path | None, steps: int | None
) -> Resumption:
    """`train --resume LOG` up to the start, for the run read back (`read_crashed_run`):
    everything checked and the log folded before anything is opened for writing, so a
    refusal (`RunRefused`) leaves the log, the store and the weights directory as they
    were. `weights_dir` and `steps` override the run's."""
    weights = weights_dir or run.weights_dir
    if weights is None:
        raise RunRefused(
            f"--resume {log_path}: the run kept its weights in a temporary directory "
            "(it had no --weights-dir), so there is no checkpoint to restart from"
        )
    point = prepare_resume(log_path, run, weights)
    if steps is not None and steps <= point.shipped:
        raise RunRefused(
            f"--steps {steps}: the run already shipped {point.shipped} batches; "
            f"a resume needs more (or leave --steps out: the run's own is {run.steps})"
        )
    return Resumption(run=run, point=point, weights_dir=weights, steps=steps or run.steps)


def prepare_resume(log_path: Path, run: CrashedRun, weights_dir: Path) -> ResumePoint:
    """Fold the crashed run against its weights directory (`resume.prepare`); it only
    reads, so a refusal here changes nothing."""
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
        raise RunRefused(f"--resume {log_path}: {error}") from error


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
    on_resumed: Callable[[str], None] | None = None,
    resume: ResumePoint | None = None,
) -> dict[str, Any]:
    """Train, write the log, replay it: the `--json` report (with `error` on a fault).

    With `resume` (the crashed run folded by `resumable`), the log and its rollout store
    are continued instead; `on_resumed` is told how the restart went. `NothingRecorded`
    when a new run stopped before its first event.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    resumed_after_s: list[float] = []
    on_events = _resume_timer(log_path, resumed_after_s, on_resumed)
    # Commits happen where the driver says (settled points), never mid-reaction; lz4 keeps
    # a commit of a few hundred events cheap. The log is opened by the run's first event,
    # so a start or resume that fails before it (inference unreachable) leaves no empty
    # log behind and no torn tail cut; appending cuts a torn tail first.
    weights = None if weights_dir is None else str(weights_dir.resolve())
    run_id = new_run_id() if resume is None else resume.run_id
    log = DeferredLog(log_path, lambda: _open_log(log_path, append=resume is not None))
    store = RolloutStore(store_path(log_path), append=resume is not None)
    with contextlib.closing(log), contextlib.closing(store):
        if resume is None:
            store.note(seed=seed, steps=steps, settings=attrs.asdict(settings), urls=list(urls))
        # the next resume looks where this one publishes (an override, maybe)
        store.note(weights_dir=weights, run_id=run_id)
        store.sync()  # the run's id is durable before any checkpoint names it
        stopped_by: list[int] = []
        try:
            result = asyncio.run(
                _until_terminated(
                    train_live(
                        config,
                        settings,
                        steps=steps,
                        seed=seed,
                        urls=urls,
                        weights_dir=weights_dir,
                        outputs=RunOutputs(
                            log=log, on_events=on_events, on_step=on_step, store=store
                        ),
                        resume=resume,
                        run_id=run_id,
                    ),
                    stopped_by,
                )
            )
        except BaseException:  # a full disk before the first event: the retry must work
            if not log.opened and resume is None:
                _remove_unstarted(log_path, weights_dir)
            raise
    if not log.opened and resume is None:  # nothing recorded: take back what the start made
        _remove_unstarted(log_path, weights_dir)
        raise NothingRecorded(
            f"{result.finished_reason}: {result.error}; nothing was recorded",
            stopped_by[0] if stopped_by else None,
        )
    return _report(log_path, result, resumed_after_s, seed, settings, stopped_by)


def _resume_timer(
    log_path: Path, resumed_after_s: list[float], on_resumed: Callable[[str], None] | None
) -> Callable[[list[Event]], None]:
    """The run's event callback: the time to resume (fold, servers, publish), noted once."""
    started = time.monotonic()

    def on_events(events: list[Event]) -> None:
        restart = events[0]
        if isinstance(restart, RunResumed):
            resumed_after_s.append(round(time.monotonic() - started, 3))
            if on_resumed is not None:
                on_resumed(
                    f"resumed {log_path} at seq {restart.seq} in "
                    f"{resumed_after_s[0]:.2f} s: {restart.reason}"
                )

    return on_events


def _report(
    log_path: Path,
    result: LiveResult,
    resumed_after_s: list[float],
    seed: int,
    settings: LiveSettings,
    stopped_by: list[int],
) -> dict[str, Any]:
    """The `--json` report: the written log replayed, and what the run itself counted."""
    source = open_log(log_path)
    replay = replay_log(source)
    return {
        "log": str(log_path),
        **replay.summary,
        **run_age_split(source),
        "digest": replay.digest.hex(),
        "replay_error": None if replay.error is None else str(replay.error),
        "reward_curve": list(result.reward_curve),
        "train_steps": list(result.train_steps),
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
        "stopped_by": signal.Signals(stopped_by[0]).name if stopped_by else None,
    }


def _remove_unstarted(log_path: Path, weights_dir: Path | None) -> None:
    """A new run that never recorded `run_started`: remove its rollout store and the
    checkpoints it wrote (the weights directory held none when it started), so the same
    command can simply be run again."""
    store_path(log_path).unlink(missing_ok=True)
    if weights_dir is None:
        return
    broadcast = WeightBroadcast(weights_dir)
    for folder in [*map(broadcast.path, broadcast.versions()), weights_dir / "initial"]:
        shutil.rmtree(folder, ignore_errors=True)
    if weights_dir == weights_beside(log_path):
        with contextlib.suppress(OSError):
            weights_dir.rmdir()


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


async def _until_terminated(run: Coroutine[Any, Any, T], stopped_by: list[int]) -> T:
    """Run `run`; Ctrl-C and SIGTERM cancel it, so the driver stops at its next settled
    point and closes the log without `run_finished` (resumable); the signal is appended to
    `stopped_by`, for the command's exit status."""
    task = asyncio.ensure_future(run)
    loop = asyncio.get_running_loop()

    def stop(number: int) -> None:
        if not stopped_by:  # a second Ctrl-C while stopping does not start over
            stopped_by.append(number)
            task.cancel()

    for number in STOP_SIGNALS:
        loop.add_signal_handler(number, stop, number)
    try:
        return await task
    finally:
        for number in STOP_SIGNALS:
            loop.remove_signal_handler(number)
