"""A live recorder for prime-rl's orchestrator: its dispatcher's and sink's calls, as they happen.

prime-rl (github.com/PrimeIntellect-ai/prime-rl, read at 559b447) decides in two objects,
`Dispatcher` (src/prime_rl/orchestrator/dispatcher.py) and `TrainSink`
(src/prime_rl/orchestrator/train_sink.py). `instrument` wraps the methods where their
decisions and the world facts they see happen, and records each through a `Recorder` in
prime-rl's own ids, at the moment it happens (seconds since the first call):

- `Dispatcher.schedule_group_episode(group_id, group)`: the group's opening (at its first
  member) and the dispatch;
- `Dispatcher.handle_completed_episode(task)`: the completion or failure (a cancelled
  task's is not an arrival);
- `Dispatcher.drop_group(group_id, reason=...)`: the cancellation of its in-flight and
  unscheduled members, recorded before prime-rl's first await there (its claim);
- `Dispatcher.cancel_inflight(n)`: the overload cut; `on_version_pending(step)`: version
  `step` pending; `on_new_version(step)`: version `step` live; `set_limit(max_inflight)`:
  the permit limit (prime-rl's limits are floats: the whole permits they allow);
- `TrainSink.process_group(group_id)`: the score (each member's advantage: the sum over its
  traces of prime-rl's own scalar reading of a trace, `trace_advantage`, taken as GRPO's
  value where it is that to float32's precision; admitted when any of its traces was
  queued), after a stale cancellation the drops of its arrived members and an empty score;
- `TrainSink._drop_stale(trace_ids)`: a drop of each episode whose queued traces it voided
  (the insertion sweep inside `process_group` runs after the group was queued: its score
  is recorded first);
- `TrainSink.process_batch()`: the cut; `Orchestrator.update_dispatch_gate()`, right after
  `finalize_train_batch` moved its step: the ship (a batch whose every sample was
  pruned moves no step, and its cut rides the next ship, untrained);
- `Orchestrator.start_draining` (at `max_steps`): the run's end, before prime-rl cancels
  what is in flight; `Orchestrator.start` returning: the log closed.

Recording never harms the run: each wrapper calls prime-rl's method as it was called and
returns or raises what it does; the recording's own errors are logged once and stop it
(`prime_rl_recording.Recording.safely`), the log is committed every few seconds on
prime-rl's event loop and closed at its end or the process's exit. The log then goes to
`rolloutlog verify LOG --policy prime-rl`. `Instrumented.restore` puts prime-rl's methods
back. `enable()` does all of it for the classes prime-rl defines when the environment
variable `ROLLOUTLOG_PRIME_RL_LOG` names the log to write, and nothing otherwise.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from rolloutlog.integrations.prime_rl_recording import (
    COMMIT_EVERY_S,
    LOGGER,
    Clock,
    Recording,
    as_computed,
    trace_advantage,
)
from rolloutlog.record import Recorder

LOG_VARIABLE: Final = "ROLLOUTLOG_PRIME_RL_LOG"
# prime-rl's gate (`orchestrator.py` TARGET_LAG), where its module does not say otherwise
TARGET_LAG: Final = 1


class Instrumented:
    """The wrapped classes; `restore` puts prime-rl's own methods back."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.originals: list[tuple[type, str, Any]] = []

    def wrap(self, cls: type, name: str, make: Callable[[Any], Any]) -> None:
        original = cls.__dict__[name]
        self.originals.append((cls, name, original))
        setattr(cls, name, functools.wraps(original)(make(original)))

    def restore(self) -> None:
        for cls, name, original in reversed(self.originals):
            setattr(cls, name, original)
        self.originals.clear()


def instrument(
    dispatcher_cls: type,
    sink_cls: type,
    recording: Recording,
    orchestrator_cls: type | None = None,
    *,
    target_lag: int = TARGET_LAG,
) -> Instrumented:
    """Wrap the methods of the module docstring's table. Each wrapper calls prime-rl's own
    method exactly as it was called and returns or raises what it does; what is recorded
    goes through `Recording.safely`, which never raises."""
    done = Instrumented(recording)
    for cls, hooks in (
        (dispatcher_cls, _dispatcher_hooks(recording, target_lag)),
        (sink_cls, _sink_hooks(recording)),
        (orchestrator_cls, _orchestrator_hooks(recording)),
    ):
        if cls is None:
            continue
        for name, make in hooks.items():
            if name in cls.__dict__:
                done.wrap(cls, name, make)
    return done


Hooks = dict[str, Callable[[Any], Any]]


def _dispatcher_hooks(r: Recording, target_lag: int) -> Hooks:
    """The dispatcher's construction, scheduling, completions and group drops, and its
    control methods (`_control_hooks`)."""

    def init(original: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            known = {
                "max_inflight": math.floor(self.max_inflight),  # prime-rl's limits are floats
                "max_off_policy_steps": self.max_off_policy_steps,
                "target_lag": target_lag,
                "staleness": "per-group",
            }
            r.safely("config", lambda: r.config.update(known))

        return __init__

    def schedule(original: Any) -> Any:
        async def schedule_group_episode(self: Any, group_id: Any, group: Any) -> Any:
            before = r.safely("dispatch", lambda: {id(task) for task in self.inflight})
            scheduled = await original(self, group_id, group)
            if scheduled and before is not None:
                r.safely("dispatch", lambda: r.dispatched(self, group_id, group, before))
            return scheduled

        return schedule_group_episode

    def completed(original: Any) -> Any:
        async def handle_completed_episode(self: Any, task: Any) -> Any:
            if task in self.inflight and not task.cancelled():
                r.safely("arrival", lambda: r.arrived(task))
            return await original(self, task)

        return handle_completed_episode

    def drop(original: Any) -> Any:
        async def drop_group(self: Any, group_id: Any, *, reason: str) -> Any:
            # what prime-rl claims before its first await, recorded before it: its main
            # loop may finalize the group while drop_group awaits
            r.safely("cancel", lambda: _cancel(r, self, group_id, reason))
            return await original(self, group_id, reason=reason)

        return drop_group

    return {
        "__init__": init,
        "schedule_group_episode": schedule,
        "handle_completed_episode": completed,
        "drop_group": drop,
        **_control_hooks(r),
    }


def _control_hooks(r: Recording) -> Hooks:
    """The dispatcher's overload cuts, version announcements and limit changes."""

    def overload(original: Any) -> Any:
        def cancel_inflight(self: Any, n: int) -> Any:
            r.safely("overload_cut", lambda: r.log().overload_cut(r.t(), math.ceil(n)))
            return original(self, n)

        return cancel_inflight

    def pending(original: Any) -> Any:
        async def on_version_pending(self: Any, step: int) -> Any:
            r.safely("version_pending", lambda: r.log().version_pending(r.t(), step))
            return await original(self, step)

        return on_version_pending

    def live(original: Any) -> Any:
        async def on_new_version(self: Any, step: int) -> Any:
            result = await original(self, step)
            r.safely("version_live", lambda: r.log().version_live(r.t(), step))
            return result

        return on_new_version

    def limit(original: Any) -> Any:
        def set_limit(self: Any, max_inflight: float) -> Any:
            result = original(self, max_inflight)
            permits = math.floor(max_inflight)  # a dispatch takes a whole free permit
            r.safely("set_limit", lambda: r.log().set_limit(r.t(), permits))
            return result

        return set_limit

    return {
        "cancel_inflight": overload,
        "on_version_pending": pending,
        "on_new_version": live,
        "set_limit": limit,
    }


def _cancel(r: Recording, dispatcher: Any, group_id: Any, reason: str) -> None:
    group = dispatcher.groups.get(group_id)
    tasks = [task for task, meta in dispatcher.inflight.items() if meta.group_id == group_id]
    unscheduled = group.episodes_to_schedule if group is not None else 0
    r.cancelled(group_id, tasks, unscheduled, reason)


def _sink_hooks(r: Recording) -> Hooks:
    def init(original: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            sizes = {"batch_size": self.batch_size, "token_batch_size": self.token_batch_size}
            known = {k: v for k, v in sizes.items() if v is not None}
            r.safely("config", lambda: r.config.update(known))

        return __init__

    def process(original: Any) -> Any:
        async def process_group(self: Any, group_id: str) -> Any:
            seen = r.safely("score", lambda: _arrived_members(r, self, group_id))
            try:
                result = await original(self, group_id)
            finally:
                r.scoring = None
            if seen is not None:
                members, voided = seen
                r.safely("score", lambda: r.scored_group(self, group_id, members, voided))
            return result

        return process_group

    def sweep(original: Any) -> Any:
        def _drop_stale(self: Any, trace_ids: Iterable[str] | None = None) -> Any:
            before = r.safely(
                "drop", lambda: (dict(self.episode_by_trace), set(self.pending_batch))
            )
            result = original(self, trace_ids)
            if before is not None:
                queued, queue = before
                voided = [e for trace, e in queued.items() if trace not in self.pending_batch]
                r.safely("drop", lambda: r.swept(voided, queue))
            return result

        return _drop_stale

    def batch(original: Any) -> Any:
        def process_batch(self: Any) -> Any:
            before = r.safely(
                "cut", lambda: (list(self.pending_batch), dict(self.episode_by_trace))
            )
            shipped = original(self)
            if before is not None:
                queued, episodes = before
                cut = [(episodes[t], t) for t in queued if t not in self.pending_batch]
                r.safely("cut", lambda: r.cut(shipped, cut))
            return shipped

        return process_batch

    return {
        "__init__": init,
        "process_group": process,
        "_drop_stale": sweep,
        "process_batch": batch,
    }


def _arrived_members(r: Recording, sink: Any, group_id: str) -> tuple[list[Any], bool]:
    """The group's arrivals, and whether a stale cancellation voids them; while prime-rl
    processes the group, its insertion sweep scores it first (`Recording.swept`)."""
    members = list(sink.pending_groups.get(group_id, ()))
    cancellation = sink.pending_group_cancellations.get(group_id)
    r.scoring = (sink, group_id, members)
    return members, cancellation is not None and cancellation.reason == "stale"


def _orchestrator_hooks(r: Recording) -> Hooks:
    def start(original: Any) -> Any:
        async def start(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                result = await original(self, *args, **kwargs)
            except BaseException:
                r.end(None)  # committed and closed, unfinished: the run did not end well
                raise
            r.end("closed")  # a run that ended without the drain (no max_steps)
            return result

        return start

    def finalize(original: Any) -> Any:
        async def finalize_train_batch(self: Any, batch: Any) -> Any:
            r.safely("ship", lambda: setattr(r, "shipping", (batch, self.progress.step)))
            try:
                return await original(self, batch)
            finally:
                r.safely("ship", lambda: r.finalized(batch))

        return finalize_train_batch

    def gate(original: Any) -> Any:
        def update_dispatch_gate(self: Any) -> Any:
            # called right after `progress.step += 1`, before any await: the ship's moment
            r.safely("ship", lambda: r.stepped(self.progress.step))
            return original(self)

        return update_dispatch_gate

    def drain(original: Any) -> Any:
        async def start_draining(self: Any, reason: str) -> Any:
            r.finish("steps")  # before prime-rl cancels what is in flight
            return await original(self, reason)

        return start_draining

    return {
        "start": start,
        "finalize_train_batch": finalize,
        "update_dispatch_gate": gate,
        "start_draining": drain,
    }


def monotonic_clock() -> Clock:
    """Seconds since the first reading (a run's `t` starts at 0)."""
    start: list[float] = []

    def clock() -> float:
        now = time.monotonic()
        if not start:
            start.append(now)
        return now - start[0]

    return clock


def enable(environ: Mapping[str, str] = os.environ) -> Instrumented | None:
    """Record prime-rl's orchestrator into the log `ROLLOUTLOG_PRIME_RL_LOG` names; without
    the variable, nothing is wrapped (None). Nothing here raises into prime-rl: where its
    classes cannot be imported, that is logged and nothing is wrapped."""
    path = environ.get(LOG_VARIABLE)
    if not path:
        return None
    try:  # prime-rl is the caller's, not a dependency of ours: found where it runs
        dispatcher = importlib.import_module("prime_rl.orchestrator.dispatcher").Dispatcher
        sink = importlib.import_module("prime_rl.orchestrator.train_sink").TrainSink
        module = importlib.import_module("prime_rl.orchestrator.orchestrator")
    except Exception:
        LOGGER.exception("rolloutlog cannot record prime-rl: its orchestrator does not import")
        return None

    def open_log(config: Mapping[str, Any]) -> Recorder:
        return Recorder(path, config=config, code_version="prime-rl")

    recording = Recording(open_log, monotonic_clock())
    atexit.register(recording.end, None)  # a process that exits mid-run: committed, unfinished
    lag = getattr(module, "TARGET_LAG", TARGET_LAG)
    return instrument(dispatcher, sink, recording, module.Orchestrator, target_lag=lag)


__all__ = [
    "COMMIT_EVERY_S",
    "LOG_VARIABLE",
    "Instrumented",
    "Recording",
    "as_computed",
    "enable",
    "instrument",
    "monotonic_clock",
    "trace_advantage",
]
