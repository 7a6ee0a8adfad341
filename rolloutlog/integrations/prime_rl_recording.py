"""What the prime-rl recorder keeps between prime-rl's calls, and how it stays harmless.

`Recording` turns what prime-rl's objects show into `Recorder` calls in prime-rl's own ids.
It never raises into prime-rl: each hook runs through `Recording.safely`, and the first
error of its own (a bug here, or a call the recorder refuses) is logged once, the log is
committed and closed without `run_finished` (an incomplete recording, as after a crash),
and every later hook does nothing. The run goes on as if nothing were recorded.
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeVar

from rolloutlog.core.scoring import grpo_advantages
from rolloutlog.record import Recorder

Clock = Callable[[], float]
T = TypeVar("T")
LOGGER: Final = logging.getLogger("rolloutlog.integrations.prime_rl")
COMMIT_EVERY_S: Final = 5.0
# prime-rl keeps advantages per token as float32: the value it computed, to this precision
FLOAT32_RELATIVE: Final = 2.0**-20


class Recording:
    """The recorder behind the wrapped methods: prime-rl's objects in, foreign ids out.

    An episode is known by its asyncio task while in flight and by its verifiers
    `Episode.id` once it arrived (the sink sees only the episode).
    """

    def __init__(
        self,
        open_log: Callable[[Mapping[str, Any]], Recorder],
        clock: Clock,
        *,
        commit_every: float = COMMIT_EVERY_S,
    ) -> None:
        self.open_log, self.clock, self.commit_every = open_log, clock, commit_every
        self.recorder: Recorder | None = None
        self.config: dict[str, Any] = {}
        self.broken: str | None = None  # why the recording stopped early
        self.closed = False
        self.groups: set[str] = set()
        self.by_task: dict[int, str] = {}  # id(asyncio task) -> our foreign episode id
        self.by_episode: dict[str, str] = {}  # verifiers Episode.id -> the same
        self.rewards: dict[str, float] = {}  # our foreign episode id -> its recorded reward
        self.scored: set[str] = set()
        self.dispatches = 0
        self.cuts: dict[int, list[tuple[Any, str]]] = {}  # id(TrainBatch) -> its cut
        self.unshipped: list[tuple[Any, str]] = []  # cut, all pruned: rides the next ship
        self.scoring: tuple[Any, str, list[Any]] | None = None  # (sink, group, members)
        self.shipping: tuple[Any, int] | None = None  # (TrainBatch, the step it would ship)

    # --- staying harmless ---------------------------------------------------------------

    def safely(self, what: str, record: Callable[[], T]) -> T | None:
        """`record()` unless the recording stopped (None then); its error stops it, logged
        once, and gives None."""
        if self.closed or self.broken is not None:
            return None
        if self.recorder is not None and self.recorder.finished:
            return None  # after the drain: prime-rl's wind-down is the shutdown protocol's
        try:
            return record()
        except Exception as error:  # never into prime-rl: its run goes on unrecorded
            self.stop(what, error)
            return None

    def stop(self, what: str, error: BaseException) -> None:
        self.broken = f"{what}: {type(error).__name__}: {error}"
        LOGGER.error(
            "rolloutlog stopped recording this prime-rl run at %s; the run goes on, and "
            "the log keeps what came before, unfinished (incomplete)",
            self.broken,
            exc_info=error,
        )
        self._close_quietly()

    def end(self, reason: str | None) -> None:
        """The orchestrator ended: finish the run with `reason` if the drain did not (None:
        it crashed, and the log stays unfinished), and close the log."""
        if self.closed:
            return
        if reason is not None and self.recorder is not None:  # nothing recorded: no log
            self.safely("end", lambda: self._finish(reason))
        self._close_quietly()

    def _close_quietly(self) -> None:
        self.closed = True
        if self.recorder is None:
            return
        try:
            self.recorder.close()
        except Exception:  # a log that cannot close cannot be helped from here
            LOGGER.exception("rolloutlog could not close its log of this prime-rl run")

    def log(self) -> Recorder:
        """The recorder, opened at the first call with what the objects told of the run."""
        if self.recorder is None:
            self.recorder = self.open_log(self.config)
            self._arm_timer()
        return self.recorder

    def _arm_timer(self) -> None:
        """Commit every `commit_every` seconds on prime-rl's event loop (none: no timer)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return

        def tick() -> None:
            if self.closed or self.broken is not None:
                return
            self.safely("commit", self.log().commit)
            loop.call_later(self.commit_every, tick)

        loop.call_later(self.commit_every, tick)

    def t(self) -> float:
        return self.clock()

    def _finish(self, reason: str) -> None:
        log = self.log()
        if not log.finished:
            log.finish(self.t(), reason)

    def finish(self, reason: str = "steps") -> None:
        """End the run (the recorder's end-of-run protocol); the log stays open to close."""
        self.safely("finish", lambda: self._finish(reason))

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
            size = group.target_episodes
            log.open_group(t, key, env=group.env_name, task=str(task), work=group.kind, size=size)
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
        except Exception as error:  # the task's own failure, as prime-rl reads it
            log.fail(t, episode, error=type(error).__name__)
            return
        self.by_episode[str(result.id)] = episode
        if not getattr(result, "ok", True) or not result.traces:
            log.fail(t, episode, error="episode not ok")
            return
        reward = sum(trace.reward or 0.0 for trace in result.traces)
        self.rewards[episode] = reward
        log.complete(
            t,
            episode,
            reward=reward,
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

    def scored_group(
        self, sink: Any, group_id: str, group: list[Any], voided: bool, queue: Any = None
    ) -> None:
        """`voided`: a stale cancellation voids every arrived member (prime-rl's per-group
        rule), recorded as their drops before the group's empty score. Admitted when any
        of its traces is in `queue` (default: the sink's queue now)."""
        if group_id not in self.groups or group_id in self.scored:
            return
        self.scored.add(group_id)
        scored = [e for e in group if getattr(e, "ok", True) and e.traces]
        if voided:  # in dispatch order: prime-rl voids them at once
            self.dropped(sorted(scored, key=self._dispatch_number))
            scored = []
        ours = [self.by_episode[str(episode.id)] for episode in scored]  # a failure: unscored
        theirs = [sum(trace_advantage(t) for t in episode.traces) for episode in scored]
        advantages = as_computed(theirs, [self.rewards[e] for e in ours])
        queue = sink.pending_batch if queue is None else queue
        queued = any(t.id in queue for e in scored for t in e.traces)
        self.log().score(
            self.t(), group_id, dict(zip(ours, advantages, strict=True)), admitted=queued
        )

    def _dispatch_number(self, episode: Any) -> int:
        return int(self.by_episode[str(episode.id)].rpartition("/")[2])

    def dropped(self, voided: Iterable[Any]) -> None:
        for episode in dict.fromkeys(self.by_episode[str(e.id)] for e in voided):
            self.log().drop(self.t(), episode)

    def swept(self, voided: list[Any], queue: Any) -> None:
        """The sink's sweep voided these episodes from `queue` (the queue before it). The
        insertion sweep runs inside `process_group`, after the group's traces were queued:
        the group's score comes first."""
        if self.scoring is not None and voided:
            sink, group_id, members = self.scoring
            self.scored_group(sink, group_id, members, voided=False, queue=queue)
        self.dropped(voided)

    def cut(self, batch: Any, cut: list[tuple[Any, str]]) -> None:
        """`cut`: (episode, trace id) of each trace the batch took, in queue order; it ships
        when prime-rl advances its step (`shipped`)."""
        self.cuts[id(batch)] = cut

    def stepped(self, step: int) -> None:
        """prime-rl's step is now `step`: the batch being finalized shipped if it moved."""
        if self.shipping is not None and step > self.shipping[1]:
            batch, self.shipping = self.shipping[0], None
            self.shipped(batch)

    def finalized(self, batch: Any) -> None:
        """`finalize_train_batch` returned: a batch it did not ship (all pruned, or past
        `max_steps`) advanced no step."""
        if self.shipping is not None and self.shipping[0] is batch:
            self.shipping = None
            self.unshipped += self.cuts.pop(id(batch), [])

    def shipped(self, batch: Any) -> None:
        """prime-rl advanced its step for `batch`: the ship. A batch whose every sample was
        pruned never advances it; its cut joins the next ship's, untrained."""
        cut = self.unshipped + self.cuts.pop(id(batch), [])
        self.unshipped = []
        trained_ids = getattr(getattr(batch, "cohort", None), "sampled_trace_ids", None)
        ours = [(self.by_episode[str(episode.id)], trace) for episode, trace in cut]
        episodes = list(dict.fromkeys(e for e, _ in ours))
        kept = episodes
        if trained_ids is not None:
            trained = set(trained_ids)
            kept = list(dict.fromkeys(e for e, trace in ours if trace in trained))
        self.log().ship(self.t(), episodes, trained=kept)


def trace_advantage(trace: Any) -> float:
    """A trace's advantage as prime-rl reads one back (`algo/routing.py` `scalar_advantage`):
    its algorithm assigns credit per sampled token of each node (`node.advantages`; GRPO
    gives every token the trace's one scalar), and the scalar is the mean of the nonzero
    ones, 0 when none is nonzero or none was assigned."""
    values = [v for node in trace.nodes for v in getattr(node, "advantages", None) or () if v]
    return sum(values) / len(values) if values else 0.0


def as_computed(theirs: list[float], rewards: list[float]) -> list[float]:
    """prime-rl's advantages, each taken as GRPO's value of the recorded rewards where it
    is that value to float32's precision (prime-rl stores them as float32); any other is
    recorded as prime-rl has it, for replay to flag."""
    exact = grpo_advantages(rewards)
    return [
        computed if math.isclose(a, computed, rel_tol=FLOAT32_RELATIVE, abs_tol=1e-7) else a
        for a, computed in zip(theirs, exact, strict=True)
    ]
