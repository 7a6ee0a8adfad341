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
  unscheduled members;
- `Dispatcher.cancel_inflight(n)`: the overload cut; `on_version_pending(step)`: version
  `step` pending; `on_new_version(step)`: version `step` live; `set_limit(max_inflight)`:
  the permit limit;
- `TrainSink.process_group(group_id)`: the score (each member's advantage: the sum over its
  traces of prime-rl's own scalar reading of a trace, `trace_advantage`; admitted when any
  of its traces was queued), after a stale cancellation the drops of its arrived members
  and an empty score;
- `TrainSink._drop_stale(trace_ids)`: a drop of each episode whose queued traces it voided;
- `TrainSink.process_batch()`: the batch, its cut and its trained episodes.

The log then goes to `rolloutlog verify LOG --policy prime-rl`. Nothing of prime-rl is
changed but these methods, and `Instrumented.restore` puts them back. `enable()` does all
of it for the classes prime-rl defines when the environment variable
`ROLLOUTLOG_PRIME_RL_LOG` names the log to write, and nothing otherwise.
"""

from __future__ import annotations

import functools
import importlib
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from rolloutlog.record import Recorder

LOG_VARIABLE: Final = "ROLLOUTLOG_PRIME_RL_LOG"
Clock = Callable[[], float]


class Recording:
    """The recorder behind the wrapped methods: prime-rl's objects in, foreign ids out.

    An episode is known by its asyncio task while in flight and by its verifiers
    `Episode.id` once it arrived (the sink sees only the episode).
    """

    def __init__(self, open_log: Callable[[Mapping[str, Any]], Recorder], clock: Clock) -> None:
        self.open_log, self.clock = open_log, clock
        self.recorder: Recorder | None = None
        self.config: dict[str, Any] = {}
        self.groups: set[str] = set()
        self.by_task: dict[int, str] = {}  # id(asyncio task) -> our foreign episode id
        self.by_episode: dict[str, str] = {}  # verifiers Episode.id -> the same
        self.scored: set[str] = set()
        self.dispatches = 0

    def log(self) -> Recorder:
        """The recorder, opened at the first call with what the objects told of the run."""
        if self.recorder is None:
            self.recorder = self.open_log(self.config)
        return self.recorder

    def t(self) -> float:
        return self.clock()

    # --- the dispatcher ----------------------------------------------------------------

    def dispatched(
        self, dispatcher: Any, group_id: uuid.UUID, group: Any, before: set[int]
    ) -> None:
        key = str(group_id)
        self.config.setdefault("group_size", group.target_episodes)
        log, t = self.log(), self.t()
        if key not in self.groups:
            self.groups.add(key)
            task = getattr(group.task, "key", None) or getattr(group.task, "hash", None)
            log.open_group(t, key, env=group.env_name, task=str(task), work=group.kind)
        for task_object in dispatcher.inflight:
            if id(task_object) not in before:
                self.dispatches += 1
                episode = f"{key}/{self.dispatches}"
                self.by_task[id(task_object)] = episode
                log.dispatch(t, key, episode)

    def arrived(self, task: Any) -> None:
        episode = self.by_task.pop(id(task), None)
        if episode is None:
            return
        log, t = self.log(), self.t()
        try:
            result = task.result()
        except BaseException as error:  # the task's own failure, as prime-rl reads it
            log.fail(t, episode, error=type(error).__name__)
            return
        self.by_episode[str(result.id)] = episode
        if not getattr(result, "ok", True):
            log.fail(t, episode, error="episode not ok")
            return
        rewards = [trace.reward or 0.0 for trace in result.traces]
        log.complete(
            t,
            episode,
            reward=sum(rewards),
            prompt_tokens=int(getattr(result, "num_input_tokens", 0) or 0),
            completion_tokens=int(getattr(result, "num_output_tokens", 0) or 0),
        )

    def cancelled(
        self, group_id: uuid.UUID, tasks: Iterable[Any], unscheduled: int, reason: str
    ) -> None:
        episodes = [self.by_task.pop(id(task)) for task in tasks if id(task) in self.by_task]
        if episodes or unscheduled:
            self.log().cancel(
                self.t(), str(group_id), episodes, unscheduled=unscheduled, reason=reason
            )

    # --- the sink ----------------------------------------------------------------------

    def scored_group(self, sink: Any, group_id: str, group: list[Any], voided: bool) -> None:
        """`voided`: a stale cancellation voids every arrived member (prime-rl's per-group
        rule), recorded as their drops before the group's empty score."""
        if group_id not in self.groups or group_id in self.scored:
            return
        self.scored.add(group_id)
        advantages: dict[str, float] = {}
        queued = False
        scored = [e for e in group if getattr(e, "ok", True) and e.traces]
        if voided:  # in dispatch order: prime-rl voids them at once
            self.dropped(sorted(scored, key=lambda e: self._dispatch_number(e)))
            scored = []
        for episode in scored:  # a failure arrives unscored
            ours = self.by_episode[str(episode.id)]
            advantages[ours] = sum(trace_advantage(trace) for trace in episode.traces)
            queued = queued or any(trace.id in sink.pending_batch for trace in episode.traces)
        self.log().score(self.t(), group_id, advantages, admitted=queued)

    def _dispatch_number(self, episode: Any) -> int:
        return int(self.by_episode[str(episode.id)].rpartition("/")[2])

    def dropped(self, voided: Iterable[Any]) -> None:
        for episode in dict.fromkeys(self.by_episode[str(e.id)] for e in voided):
            self.log().drop(self.t(), episode)

    def shipped(self, cut: list[tuple[Any, str]], trained_traces: set[str] | None) -> None:
        """`cut`: (episode, trace id) of each trace the batch took, in queue order."""
        ours = [(self.by_episode[str(episode.id)], trace) for episode, trace in cut]
        episodes = list(dict.fromkeys(e for e, _ in ours))
        kept = episodes
        if trained_traces is not None:
            kept = list(dict.fromkeys(e for e, trace in ours if trace in trained_traces))
        self.log().ship(self.t(), episodes, trained=kept)

    def finish(self, reason: str = "steps") -> None:
        """End the run (the recorder's end-of-run protocol) and close the log."""
        log = self.log()
        if not log.finished:
            log.finish(self.t(), reason)
        log.close()


def trace_advantage(trace: Any) -> float:
    """A trace's advantage as prime-rl reads one back (`algo/routing.py` `scalar_advantage`):
    its algorithm assigns credit per sampled token of each node (`node.advantages`; GRPO
    gives every token the trace's one scalar), and the scalar is the mean of the nonzero
    ones, 0 when none is nonzero or none was assigned."""
    values = [v for node in trace.nodes for v in getattr(node, "advantages", None) or () if v]
    return sum(values) / len(values) if values else 0.0


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


def instrument(dispatcher_cls: type, sink_cls: type, recording: Recording) -> Instrumented:
    """Wrap the methods of the module docstring's table on both classes."""
    done = Instrumented(recording)
    for wrappers, cls in (
        (_dispatch_wrappers(recording), dispatcher_cls),
        (_control_wrappers(recording), dispatcher_cls),
        (_sink_wrappers(recording), sink_cls),
    ):
        for name, make in wrappers.items():
            done.wrap(cls, name, make)
    return done


def _dispatch_wrappers(r: Recording) -> dict[str, Callable[[Any], Any]]:
    """The dispatcher's construction, scheduling, completions and group drops, by method."""

    def init_dispatcher(original: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            r.config.update(
                max_inflight=self.max_inflight,
                max_off_policy_steps=self.max_off_policy_steps,
                target_lag=self.max_off_policy_steps,
                staleness="per-group",
            )

        return __init__

    def schedule(original: Any) -> Any:
        async def schedule_group_episode(self: Any, group_id: Any, group: Any) -> bool:
            before = {id(task) for task in self.inflight}
            scheduled = await original(self, group_id, group)
            if scheduled:
                r.dispatched(self, group_id, group, before)
            return bool(scheduled)

        return schedule_group_episode

    def completed(original: Any) -> Any:
        async def handle_completed_episode(self: Any, task: Any) -> None:
            if task in self.inflight and not task.cancelled():
                r.arrived(task)
            await original(self, task)

        return handle_completed_episode

    def drop(original: Any) -> Any:
        async def drop_group(self: Any, group_id: Any, *, reason: str) -> int:
            group = self.groups.get(group_id)
            tasks = [task for task, meta in self.inflight.items() if meta.group_id == group_id]
            unscheduled = group.episodes_to_schedule if group is not None else 0
            cancelled = await original(self, group_id, reason=reason)
            r.cancelled(group_id, tasks, unscheduled, reason)
            return int(cancelled)

        return drop_group

    return {
        "__init__": init_dispatcher,
        "schedule_group_episode": schedule,
        "handle_completed_episode": completed,
        "drop_group": drop,
    }


def _control_wrappers(r: Recording) -> dict[str, Callable[[Any], Any]]:
    """The dispatcher's overload cuts, version announcements and limit changes, by method."""

    def overload(original: Any) -> Any:
        def cancel_inflight(self: Any, n: int) -> None:
            r.log().overload_cut(r.t(), n)
            original(self, n)

        return cancel_inflight

    def pending(original: Any) -> Any:
        async def on_version_pending(self: Any, step: int) -> None:
            r.log().version_pending(r.t(), step)
            await original(self, step)

        return on_version_pending

    def live(original: Any) -> Any:
        async def on_new_version(self: Any, step: int) -> None:
            await original(self, step)
            r.log().version_live(r.t(), step)

        return on_new_version

    def limit(original: Any) -> Any:
        def set_limit(self: Any, max_inflight: int) -> None:
            original(self, max_inflight)
            r.log().set_limit(r.t(), max_inflight)

        return set_limit

    return {
        "cancel_inflight": overload,
        "on_version_pending": pending,
        "on_new_version": live,
        "set_limit": limit,
    }


def _sink_wrappers(r: Recording) -> dict[str, Callable[[Any], Any]]:
    """The sink's construction, group processing, stale sweep and batch cut, by method."""

    def init_sink(original: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            sizes = {"batch_size": self.batch_size, "token_batch_size": self.token_batch_size}
            r.config.update({k: v for k, v in sizes.items() if v is not None})

        return __init__

    def process(original: Any) -> Any:
        async def process_group(self: Any, group_id: str) -> None:
            group = list(self.pending_groups.get(group_id, ()))
            cancellation = self.pending_group_cancellations.get(group_id)
            voided = cancellation is not None and cancellation.reason == "stale"
            await original(self, group_id)
            r.scored_group(self, group_id, group, voided)

        return process_group

    def sweep(original: Any) -> Any:
        def _drop_stale(self: Any, trace_ids: Iterable[str] | None = None) -> None:
            queued = dict(self.episode_by_trace)
            original(self, trace_ids)
            r.dropped(e for trace, e in queued.items() if trace not in self.pending_batch)

        return _drop_stale

    def batch(original: Any) -> Any:
        def process_batch(self: Any) -> Any:
            queued = list(self.pending_batch)
            episodes = dict(self.episode_by_trace)
            shipped = original(self)
            cut = [(episodes[t], t) for t in queued if t not in self.pending_batch]
            trained = getattr(getattr(shipped, "cohort", None), "sampled_trace_ids", None)
            r.shipped(cut, None if trained is None else set(trained))
            return shipped

        return process_batch

    return {
        "__init__": init_sink,
        "process_group": process,
        "_drop_stale": sweep,
        "process_batch": batch,
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
    the variable, nothing is wrapped (None)."""
    path = environ.get(LOG_VARIABLE)
    if not path:
        return None
    # prime-rl is the caller's, not a dependency of ours: found at run time, where it runs
    dispatcher = importlib.import_module("prime_rl.orchestrator.dispatcher").Dispatcher
    sink = importlib.import_module("prime_rl.orchestrator.train_sink").TrainSink

    def open_log(config: Mapping[str, Any]) -> Recorder:
        return Recorder(path, config=config, code_version="prime-rl")

    return instrument(dispatcher, sink, Recording(open_log, monotonic_clock()))
