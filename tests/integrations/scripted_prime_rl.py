"""A scripted stand-in for prime-rl's orchestrator, for CI where no prime-rl checkout is.

`Dispatcher` and `TrainSink` have the method names and the attributes that
`rolloutlog.integrations.prime_rl` wraps and reads (prime-rl 559b447's shapes: `groups`
of `GroupState`s by uuid, `inflight` by asyncio task, `pending_groups`, `pending_batch`
and `episode_by_trace` by trace id). What they decide is scripted: `play` walks a log our
deciders wrote and makes each of its facts happen through them, in its order, so the
recorded log must conform to the preset that log was decided under.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    LimitSet,
    RunFinished,
    VersionLive,
    VersionPending,
)
from rolloutlog.integrations.prime_rl import Recording


@dataclass
class Task:
    key: str


@dataclass
class GroupState:
    kind: str
    env_name: str
    task: Task
    step: int
    episodes_to_schedule: int
    target_episodes: int
    policy_version_at_start: int = 0


@dataclass
class InflightEpisode:
    group_id: uuid.UUID


@dataclass
class Node:
    """prime-rl's shape (verifiers' `MessageNode`): credit per sampled token, None until
    the algorithm assigns it."""

    mask: list[bool]
    advantages: list[float] | None = None


@dataclass
class Trace:
    id: str
    reward: float
    nodes: list[Node]


@dataclass
class Episode:
    id: str
    traces: list[Trace]
    num_input_tokens: int
    num_output_tokens: int
    ok: bool = True


@dataclass
class GroupCancellation:
    reason: str


@dataclass
class Cohort:
    sampled_trace_ids: set[str]


@dataclass
class TrainBatch:
    cohort: Cohort
    samples: list[str]


@dataclass
class Progress:
    step: int = 1


class Orchestrator:
    """prime-rl's `finalize_train_batch`: a batch with samples ships, and the step moves
    right before the dispatch gate is updated."""

    def __init__(self) -> None:
        self.progress = Progress()

    async def finalize_train_batch(self, batch: TrainBatch) -> None:
        if batch.samples:
            self.progress.step += 1
            self.update_dispatch_gate()

    def update_dispatch_gate(self) -> None:
        """prime-rl pauses or resumes its dispatcher here; the script dispatches as the log."""


class Dispatcher:
    def __init__(self, *, initial_max_inflight: int, max_off_policy_steps: int) -> None:
        self.max_inflight = initial_max_inflight
        self.max_off_policy_steps = max_off_policy_steps
        self.groups: dict[uuid.UUID, GroupState] = {}
        self.inflight: dict[asyncio.Future[Episode], InflightEpisode] = {}
        self.out: list[Episode] = []

    async def schedule_group_episode(self, group_id: uuid.UUID, group: GroupState) -> bool:
        group.episodes_to_schedule -= 1
        task: asyncio.Future[Episode] = asyncio.get_running_loop().create_future()
        self.inflight[task] = InflightEpisode(group_id)
        return True

    async def handle_completed_episode(self, task: asyncio.Future[Episode]) -> None:
        if self.inflight.pop(task, None) is not None:
            self.out.append(task.result())

    async def drop_group(self, group_id: uuid.UUID, *, reason: str) -> int:
        group = self.groups.pop(group_id, None)
        claimed = [t for t, meta in self.inflight.items() if meta.group_id == group_id]
        for task in claimed:
            del self.inflight[task]
        await asyncio.sleep(0)  # prime-rl awaits here (its out_q, its tasks' cancellation)
        for task in claimed:
            task.cancel()
        return len(claimed) + (group.episodes_to_schedule if group is not None else 0)

    def cancel_inflight(self, n: int) -> None:
        """prime-rl sheds the youngest groups here; the script drops what the log drops."""

    async def on_version_pending(self, step: int) -> None:
        """prime-rl drops its stale groups here; the script drops what the log drops."""

    async def on_new_version(self, step: int) -> None:
        """A no-op in prime-rl too."""

    def set_limit(self, max_inflight: int) -> None:
        self.max_inflight = max_inflight


class TrainSink:
    def __init__(self, *, batch_size: int | None, token_batch_size: int | None) -> None:
        self.batch_size, self.token_batch_size = batch_size, token_batch_size
        self.pending_groups: dict[str, list[Episode]] = defaultdict(list)
        self.pending_batch: dict[str, list[Any]] = {}
        self.episode_by_trace: dict[str, Episode] = {}
        self.pending_group_cancellations: dict[str, GroupCancellation] = {}
        self.admit: dict[str, list[str]] = {}  # the script's verdicts: the traces it queues
        self.stale: set[str] = set()  # the script's drops, by trace
        self.cut: tuple[list[str], set[str]] = ([], set())  # the script's next batch

    async def process_group(self, group_id: str) -> None:
        group = self.pending_groups.pop(group_id, [])
        self.pending_group_cancellations.pop(group_id, None)
        by_trace = {trace.id: (episode, trace) for episode in group for trace in episode.traces}
        for trace_id in self.admit.pop(group_id):
            episode, trace = by_trace[trace_id]
            self.pending_batch[trace_id] = [trace]
            self.episode_by_trace[trace_id] = episode

    def _drop_stale(self, trace_ids: Sequence[str] | None = None) -> None:
        for trace_id in sorted(self.stale):
            del self.pending_batch[trace_id]
            del self.episode_by_trace[trace_id]
        self.stale.clear()

    def process_batch(self) -> TrainBatch:
        selected, trained = self.cut
        for trace_id in selected:
            del self.pending_batch[trace_id]
            self.episode_by_trace.pop(trace_id)
        return TrainBatch(Cohort(trained), selected)  # every cut the log ships


def assign_advantages(trace: Trace, advantage: float) -> None:
    """prime-rl's GRPO credit (`algo/routing.py` `assign_advantages`): the trace's scalar on
    every sampled token of every node that has one."""
    for node in trace.nodes:
        if any(node.mask):
            node.advantages = [advantage] * sum(node.mask)


class Play:
    """Makes a log's facts happen through the stand-in, which the recording watches."""

    def __init__(self, recording: Recording, now: list[float]) -> None:
        self.recording, self.now = recording, now
        self.dispatcher: Dispatcher | None = None
        self.sink: TrainSink | None = None
        self.orchestrator = Orchestrator()
        self.groups: dict[str, uuid.UUID] = {}  # ours -> prime-rl's group id
        self.tasks: dict[str, asyncio.Future[Episode]] = {}  # ours -> its task
        self.traces: dict[str, str] = {}  # ours -> its trace id

    async def start(self, config: dict[str, Any]) -> None:
        self.dispatcher = Dispatcher(
            initial_max_inflight=config["max_inflight"],
            max_off_policy_steps=config["max_off_policy_steps"],
        )
        self.sink = TrainSink(
            batch_size=config.get("batch_size", 8), token_batch_size=config.get("token_batch_size")
        )

    async def event(self, event: Event) -> bool:
        """Make `event` happen; False once the run finished."""
        dispatcher, sink = self.dispatcher, self.sink
        assert dispatcher is not None and sink is not None
        self.now[0] = event.t
        if isinstance(event, GroupOpened):
            gid = self.groups[event.group_id] = uuid.uuid4()
            dispatcher.groups[gid] = GroupState(
                event.work,
                event.env,
                Task(event.task_id),
                event.step,
                event.group_size,
                event.group_size,
                event.policy_version,
            )
        elif isinstance(event, EpisodeDispatched):
            gid = self.groups[event.group_id]
            before = set(dispatcher.inflight)
            await dispatcher.schedule_group_episode(gid, dispatcher.groups[gid])
            (self.tasks[event.episode_id],) = set(dispatcher.inflight) - before
        elif isinstance(event, EpisodeCompleted):
            task = self.tasks[event.episode_id]
            if task.cancelled():
                return True  # prime-rl never sees a cancelled run's result
            trace = self.traces[event.episode_id] = f"trace-{uuid.uuid4()}"
            episode = Episode(
                str(uuid.uuid4()),
                [Trace(trace, event.reward, [Node([False] * 3), Node([True] * 2)])],
                event.prompt_tokens,
                event.completion_tokens,
            )
            task.set_result(episode)
            await dispatcher.handle_completed_episode(task)
            group = event.episode_id.rpartition("/")[0]
            sink.pending_groups[str(self.groups[group])].append(episode)
        elif isinstance(event, EpisodesCancelled):
            gid = self.groups[event.group_id]
            await dispatcher.drop_group(gid, reason=event.reason)
            sink.pending_group_cancellations[str(gid)] = GroupCancellation(event.reason)
        elif isinstance(event, GroupScored):
            gid = str(self.groups[event.group_id])
            for ours, advantage in zip(event.episode_ids, event.advantages, strict=False):
                episode = next(
                    e for e in sink.pending_groups[gid] if e.traces[0].id == self.traces[ours]
                )
                assign_advantages(episode.traces[0], advantage)
            sink.admit[gid] = [self.traces[e] for e in event.episode_ids if event.admitted]
            await sink.process_group(gid)
        elif isinstance(event, EpisodeDropped):
            trace = self.traces[event.episode_id]
            if trace in sink.pending_batch:  # queued: the sweep drops it
                sink.stale = {trace}
                sink._drop_stale()
            else:  # arrived: voided with its group by a stale cancellation, or not prime-rl's
                group = str(self.groups[event.episode_id.rpartition("/")[0]])
                cancellation = sink.pending_group_cancellations.get(group)
                if cancellation is None or cancellation.reason != "stale":
                    raise NotImplementedError("prime-rl drops no arrival before its group ends")
        elif isinstance(event, BatchShipped):
            sink.cut = (
                [self.traces[e] for e in event.episode_ids],
                {self.traces[e] for e in event.trained_ids},
            )
            await self.orchestrator.finalize_train_batch(sink.process_batch())
        elif isinstance(event, VersionPending):
            await dispatcher.on_version_pending(event.version)
        elif isinstance(event, VersionLive):
            await dispatcher.on_new_version(event.version)
        elif isinstance(event, LimitSet):
            dispatcher.set_limit(event.max_inflight)
        elif isinstance(event, RunFinished):
            return False
        return True


async def play(log: Sequence[Event], recording: Recording, now: list[float]) -> None:
    """Make every fact of `log` happen through the stand-in, up to its run_finished (the
    recorder's own end-of-run protocol would write the rest)."""
    player = Play(recording, now)
    first = log[0]
    assert first.kind == "run_started"
    await player.start(first.config)  # type: ignore[union-attr]
    for event in log[1:]:
        if not await player.event(event):
            return
