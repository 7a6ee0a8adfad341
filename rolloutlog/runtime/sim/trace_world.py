"""A world made of a recorded run's outcomes (a `runtime.sim.trace.Trace`): trace-driven
simulation (`rolloutlog whatif`).

`TraceWorld` plans episodes from it. Member m of group g gets the recorded outcome of
episode `g/m` when the recorded run finished that episode (on the same task). Work the
recorded run never finished is drawn from that task's finished outcomes, falling back to
the whole run's:

- an episode it *cancelled* ran at least `seconds` (its duration is censored): it gets an
  outcome drawn from those that ran longer than `seconds`; if none did, the longest
  outcome it could have had is unknown, and it gets `CENSORED_INFLATION` times its
  censoring time (with the tokens and reward of an unconditional draw);
- a member it never dispatched (or a group it never opened) gets an unconditional draw.

A drawn outcome runs no longer than the run's longest finished episode (generation stops
at a token cap), unless it was cut past it.

Whether an abort loses its race is the recorded fact where the log saw it: an episode that
arrived after its cancellation loses again; one cancelled without arriving, whose drawn
outcome came due while the log went on, won. Any other race is drawn with the fitted
`late_arrival_rate` (an episode cut at shutdown never showed its race).

Draws come from the simulation's named streams, a block per group when it opens (as in
`WorldModel`): `durations` picks outcomes, `races` decides whether an abort loses its race.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import attrs
import numpy as np

from rolloutlog.core.config import RunConfig
from rolloutlog.events.types import LimitSet, OverloadCut
from rolloutlog.runtime.sim.clock import EventQueue
from rolloutlog.runtime.sim.controller import Controller
from rolloutlog.runtime.sim.streams import RandomStreams
from rolloutlog.runtime.sim.trace import RecordedEpisode, Trace, require_finished
from rolloutlog.runtime.sim.world import EpisodePlan, Task
from rolloutlog.runtime.sim.world_config import WorldConfig

CENSORED_INFLATION = 1.5  # a cancelled episode longer than anything recorded: 1.5 x its cut


class OutcomePool:
    """The recorded episodes of one task (or of the whole run), finished and censored alike.

    A draw picks uniformly among the episodes longer than a bound. A censored pick is not
    an outcome, only a longer bound: the draw goes on among the episodes longer than it
    (Efron's redistribute-to-the-right, the sampling form of the Kaplan-Meier estimate).
    Leaving the censored out instead would draw short: a policy that cuts long episodes
    leaves mostly short ones finished. Past the pool's longest finished episode it knows
    nothing more and stops at the bound reached, not at its longest cut: walking on through
    the cuts beyond would put every such draw past the longest of them, too long.
    """

    def __init__(self, episodes: Sequence[RecordedEpisode]) -> None:
        self.episodes = sorted(episodes, key=lambda e: (e.seconds, e.episode_id))
        self.seconds = [e.seconds for e in self.episodes]
        self.finished = [e for e in self.episodes if e.outcome != "censored"]
        self.longest = self.finished[-1].seconds if self.finished else -math.inf
        completed = [e for e in self.finished if e.outcome == "completed"]
        self.mean_tokens = _mean([e.completion_tokens for e in completed])
        self.mean_reward = _mean([e.reward for e in completed])

    def median(self) -> float:
        """The Kaplan-Meier median duration: cancelled episodes count as at least their cut.

        When more than half were cut, the longest duration seen (a lower bound).
        """
        survival = 1.0
        for index, episode in enumerate(self.episodes):
            if episode.outcome != "censored":
                survival *= 1.0 - 1.0 / (len(self.episodes) - index)
                if survival <= 0.5:
                    return episode.seconds
        return self.seconds[-1]

    def draw(self, u: float, longer_than: float) -> tuple[RecordedEpisode | None, float, float]:
        """A finished outcome longer than `longer_than`, from the quantile `u`, or None with
        the bound reached when no finished one lies beyond it; and the part of `u` not used.

        Each pick uses the integer part of `u` times the choices; the remainder is again
        uniform and independent of the pick, so a draw that goes on elsewhere uses it (the
        `u` that ran out here is a high one: reused, it would pick long there too).
        """
        while longer_than < self.longest:
            start = bisect.bisect_right(self.seconds, longer_than)
            left = len(self.episodes) - start
            index = min(int(u * left), left - 1)
            u = u * left - index
            picked = self.episodes[start + index]
            if picked.outcome != "censored":
                return picked, longer_than, u
            longer_than = picked.seconds
        return None, longer_than, u


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


class TraceTasks:
    """Per-task pools of recorded episodes and the task properties the metrics read."""

    def __init__(self, trace: Trace) -> None:
        require_finished(trace.episodes, "trace")
        by_task: dict[str, list[RecordedEpisode]] = {}
        for episode in trace.episodes:
            by_task.setdefault(episode.task_id, []).append(episode)
        self.pools = {
            task: OutcomePool(episodes)
            for task, episodes in by_task.items()
            if any(e.outcome != "censored" for e in episodes)
        }
        self.run_pool = OutcomePool(trace.episodes)
        # every episode in units of its task's median duration: the run's tail shape
        self.scales = {task: pool.median() for task, pool in self.pools.items()}
        self.shape_pool = OutcomePool(
            [
                attrs.evolve(e, seconds=e.seconds / self.scales[e.task_id])
                for e in trace.episodes
                if self.scales.get(e.task_id, 0.0) > 0.0
            ]
        )
        # generation stops at a token cap: nothing the run finished ran longer than this
        self.ceiling_s = self.run_pool.longest
        self.ceiling_tokens = max((e.completion_tokens for e in self.run_pool.finished), default=0)
        self.names = sorted(self.pools)

    def pool(self, task_id: str) -> OutcomePool:
        """The task's pool, or the whole run's when the task never finished an episode."""
        return self.pools.get(task_id, self.run_pool)

    def source(self, task_id: str, u: float) -> str:
        """The task to draw for `task_id`: itself, or (never finished) a recorded task at `u`.

        Members of a group share their task's length, so a task the run never finished
        stands in as one recorded task for the whole group, not as the whole run's mix.
        """
        if task_id in self.pools:
            return task_id
        return self.names[min(int(u * len(self.names)), len(self.names) - 1)]

    def draw(self, task_id: str, u: float, longer_than: float = -1.0) -> RecordedEpisode:
        """An outcome longer than `longer_than`: from the task, else the run, else inflated.

        Past the task's longest outcome, the draw goes on in the run's outcomes measured in
        units of their task's median duration (the tail's shape, at this task's scale); a
        task never finished draws from the run as it is. Past the longest outcome the run
        ever finished, the episode gets `CENSORED_INFLATION` times the bound reached. A
        draw from elsewhere runs no longer than the run's longest finished episode (the
        generation cap), unless its cut was already past it.
        """
        pool = self.pool(task_id)
        drawn, bound, u = pool.draw(u, longer_than)
        if drawn is not None:
            return drawn
        scale = self.scales.get(task_id, 0.0)
        if scale > 0.0:
            shaped, bound, u = self.shape_pool.draw(u, bound / scale)
            if shaped is not None:
                return self._rescaled(shaped, scale, longer_than)
            bound *= scale
        else:
            drawn, bound, u = self.run_pool.draw(u, bound)
            if drawn is not None:
                return drawn
        finished = pool.finished
        plain = finished[min(int(u * len(finished)), len(finished) - 1)]
        seconds = min(bound * CENSORED_INFLATION, self._ceiling(longer_than))
        return attrs.evolve(plain, seconds=seconds)

    def _ceiling(self, longer_than: float) -> float:
        """The longest a drawn outcome runs: the generation cap the run showed (its longest
        finished episode), none for an episode cut past it."""
        return self.ceiling_s if longer_than < self.ceiling_s else math.inf

    def draw_shaped(self, task_id: str, u: float) -> RecordedEpisode:
        """A plain draw from the run's shape at the task's scale (median duration).

        A task's own episodes are few (often one group's dispatched members, the longest of
        them cut) and their longest finished one caps its tail; the run's shape at the
        task's scale has the tail of every task.
        """
        scale = self.scales.get(task_id, 0.0)
        shaped = self.shape_pool.draw(u, -1.0)[0] if scale > 0.0 else None
        return self.draw(task_id, u) if shaped is None else self._rescaled(shaped, scale, -1.0)

    def _rescaled(
        self, shaped: RecordedEpisode, scale: float, longer_than: float
    ) -> RecordedEpisode:
        """A shape-pool outcome at a task's scale: seconds and completion tokens scaled, held
        under the generation cap (the rescaled tail of a short task's shape would pass it)."""
        ratio = scale / self.scales[shaped.task_id]
        tokens = min(round(shaped.completion_tokens * ratio), self.ceiling_tokens)
        return attrs.evolve(
            shaped,
            seconds=min(shaped.seconds * scale, self._ceiling(longer_than)),
            completion_tokens=max(tokens, 1) if shaped.completion_tokens else 0,
        )

    def task(self, task_id: str) -> Task:
        """A task's length (mean completion tokens) and solve rate (mean reward), as recorded."""
        pool, run = self.pool(task_id), self.run_pool
        tokens = pool.mean_tokens if pool.mean_tokens is not None else run.mean_tokens
        reward = pool.mean_reward if pool.mean_reward is not None else run.mean_reward
        return Task(tokens or 0.0, reward or 0.0)


@attrs.define(slots=True)
class _Group:
    task_id: str
    source: str  # the task whose recorded episodes its members draw from
    train: bool
    size: int
    picks: list[float]
    races: list[float]
    settled: int = 0


class TraceWorld:
    """Plans episodes from a `Trace` (the interface of `WorldModel`)."""

    def __init__(self, trace: Trace, world: WorldConfig, streams: RandomStreams) -> None:
        self.world, self.streams = world, streams
        self.tasks = TraceTasks(trace)
        self.recorded = {e.episode_id: e for e in trace.episodes}
        self._groups: dict[str, _Group] = {}

    def open_group(self, group_id: str, task_id: str, size: int, train: bool) -> None:
        """Draw the group's block: a stand-in task, one pick and one race number per member."""
        if group_id in self._groups:
            raise ValueError(f"{group_id} opened twice in the trace world")
        source = self.tasks.source(task_id, float(self.streams["tasks"].random()))
        picks = self.streams["durations"].random(size).tolist()
        races = self.streams["races"].random(size).tolist()
        self._groups[group_id] = _Group(task_id, source, train, size, picks, races)

    def outcome(self, episode_id: str, group: _Group, u: float) -> RecordedEpisode:
        """The recorded outcome of an episode, or one drawn at quantile `u` of its pool."""
        recorded = self._recorded(episode_id, group.task_id)
        if recorded is None:
            return self.tasks.draw_shaped(group.source, u)
        if recorded.outcome == "censored":  # it ran at least `seconds`
            return self.tasks.draw(group.source, u, recorded.seconds)
        return recorded

    def _recorded(self, episode_id: str, task_id: str) -> RecordedEpisode | None:
        recorded = self.recorded.get(episode_id)
        return recorded if recorded is not None and recorded.task_id == task_id else None

    def _race(
        self, episode_id: str, task_id: str, outcome: RecordedEpisode, u: float
    ) -> tuple[bool, bool]:
        """Whether an abort of this episode loses its race, and whether that was drawn at
        `late_arrival_rate` (False: as recorded, where the log saw it).

        A recorded cancellation without a late arrival won its race only if a lost race would
        have shown: its `outcome` (drawn past the cut) came due while the log went on.
        """
        recorded = self._recorded(episode_id, task_id)
        if recorded is not None:
            if recorded.late:
                return True, False
            seen = outcome.seconds - recorded.seconds <= recorded.watched_s
            if recorded.outcome == "censored" and seen:
                return False, False
        return u < self.world.late_arrival_rate, True

    def plan(self, group_id: str, member: int, inflight: int, max_inflight: int) -> EpisodePlan:
        """The recorded (or drawn) outcome of member `member`; load does not change it."""
        group = self._draws(group_id)
        episode_id = f"{group_id}/{member}"
        outcome = self.outcome(episode_id, group, group.picks[member])
        self._settle(group_id, group, 1)
        late, drawn = self._race(episode_id, group.task_id, outcome, group.races[member])
        return EpisodePlan(
            task=self.tasks.task(group.source),
            train=group.train,
            work_s=outcome.seconds,
            failed=outcome.outcome == "failed",
            reward=outcome.reward,
            completion_tokens=outcome.completion_tokens,
            late_if_cancelled=late,
            prompt_tokens=outcome.prompt_tokens,
            race_drawn=drawn,
            env_s=self.world.episode_overhead_s,  # read only by shared inference
        )

    def unscheduled_cancelled(self, group_id: str, count: int) -> None:
        """Members cancelled before dispatch will never be planned; free their draws."""
        if count:
            self._settle(group_id, self._draws(group_id), count)

    def open_groups(self) -> int:
        """How many groups' draws are held."""
        return len(self._groups)

    def _draws(self, group_id: str) -> _Group:
        group = self._groups.get(group_id)
        if group is None:
            raise KeyError(f"{group_id} is not open in the trace world")
        return group

    def _settle(self, group_id: str, group: _Group, count: int) -> None:
        group.settled += count
        if group.settled > group.size:
            raise ValueError(f"{group_id}: more than {group.size} members settled")
        if group.settled == group.size:
            del self._groups[group_id]


class TraceTimes:
    """Batch times for the trainer: the recorded ones by step, then bootstrapped."""

    def __init__(self, trace: Trace, world: WorldConfig, rng: np.random.Generator) -> None:
        self.world, self.rng = world, rng
        self.by_step = {b.step: b for b in trace.batches}
        self.timed = [b for b in trace.batches if not b.skipped]

    def __call__(self, step: int, trained: int, tokens: int) -> tuple[float, float, float]:
        """(train s, update s, skip uniform); a recorded skip is forced, others never skip."""
        pick, skip = self.rng.random(2).tolist()
        recorded = self.by_step.get(step)
        if recorded is not None:
            return recorded.train_s, recorded.update_s, 0.0 if recorded.skipped else 1.0
        if not self.timed:
            return self.world.train_step_s, self.world.weight_update_s, skip
        batch = self.timed[min(int(pick * len(self.timed)), len(self.timed) - 1)]
        return batch.train_s, batch.update_s, skip


class TraceController(Controller):
    """Replays the recorded `limit_set` and `overload_cut` events at their recorded times."""

    def __init__(
        self,
        trace: Trace,
        world: WorldConfig,
        run: RunConfig,
        rng: np.random.Generator,
        queue: EventQueue,
    ) -> None:
        super().__init__(world, run, rng, queue)
        self.controls = sorted(trace.controls, key=lambda c: c.t)
        self._next = 0

    def start(self) -> None:
        """Schedule the first recorded control event."""
        self._schedule_next()

    def fire(self, now: float, kind: str) -> LimitSet | OverloadCut:
        """The recorded event that came due; the next one is scheduled."""
        control = self.controls[self._next]
        self._next += 1
        self._schedule_next()
        if control.kind == "limit":
            self.limit = control.value
            return LimitSet(t=now, max_inflight=control.value)
        return OverloadCut(t=now, n=control.value)

    def _schedule_next(self) -> None:
        if self._next < len(self.controls):
            control = self.controls[self._next]
            self.queue.push(control.t, (control.kind, None))
