"""What a simulated run cost and what it trained on: the metrics only a simulator can see.

Every dispatched episode ends in exactly one *fate*, and its generation seconds (time spent
in inference, pauses excluded, cut short when it was cancelled) are added to that fate:

- trained, pruned (zero advantage), rejected (curriculum), eval (measured), unshipped (queued
  or open when the run ended): work that did what the design asks of it;
- failed, dropped_stale, evicted (by a bounded queue), cancelled_<reason>: *wasted* work,
  spent on episodes never trained.

An episode cancelled while its completion was already racing in arrives late; its full
generation time counts as cancelled. `finished_rollouts_discarded` counts episodes whose
generation finished (a completion arrived) and that were then thrown away: dropped by the
sink (as stale, or evicted by a full queue), or arrived late.
Memory holds only episodes whose fate is still open.
"""

from __future__ import annotations

from typing import Any

import attrs

from rolloutlog.events.types import ALWAYS_CANCEL_REASONS, BatchShipped, GroupScored
from rolloutlog.runtime.sim.world import EpisodePlan

KEPT_FATES = ("trained", "pruned", "rejected", "eval", "unshipped")
WASTED_FATES = (
    "failed",
    "dropped_stale",
    "evicted",
    *(f"cancelled_{r}" for r in ALWAYS_CANCEL_REASONS),
)
# The fates every run reports; an optional cancel reason's fate only where a run has one.
FATES = KEPT_FATES + WASTED_FATES
SERIES_POINTS_MAX = 512


class Series:
    """(t, value) samples thinned to at most `max_points`: halve and double the stride when full."""

    def __init__(self, max_points: int = SERIES_POINTS_MAX) -> None:
        if max_points < 2:
            raise ValueError(f"a series needs room for 2 points (got {max_points})")
        self.max_points = max_points
        self.points: list[tuple[float, float]] = []
        self._stride, self._seen = 1, 0

    def add(self, t: float, value: float) -> None:
        """Offer one sample; it is kept when it falls on the current stride."""
        if self._seen % self._stride == 0:
            self.points.append((t, value))
            if len(self.points) > self.max_points:
                self.points = self.points[::2]
                self._stride *= 2
        self._seen += 1


@attrs.define(slots=True)
class _Open:
    """An episode that arrived complete and whose fate the sink has not sealed yet."""

    seconds: float
    length_tokens: float
    solve_rate: float
    train: bool


@attrs.define(slots=True)
class _Mean:
    count: int = 0
    length_tokens: float = 0.0
    solve_rate: float = 0.0

    def add(self, length_tokens: float, solve_rate: float) -> None:
        self.count += 1
        self.length_tokens += length_tokens
        self.solve_rate += solve_rate


class SimMetrics:
    """Accumulates fates, generation seconds and the selection bias of what trained."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(FATES, 0.0)
        self.episodes = dict.fromkeys(FATES, 0)
        self.finished_discarded = 0
        self.late_arrivals = 0
        # Races drawn at `late_arrival_rate` (not recorded facts) whose loss would discard a
        # finished rollout: in-flight cancellations of completions, not at shutdown; and
        # how many of them lost and arrived. Not in `as_dict`: `whatif` reads them for the
        # interval of its discarded count (`studies.whatif.interval`).
        self.drawn_races = 0
        self.drawn_late = 0
        self.dispatched = _Mean()
        self.trained = _Mean()
        self.open: dict[str, _Open] = {}
        self.wasted_series = Series()

    def wasted_seconds(self) -> float:
        """Generation seconds spent on episodes never trained (failed, dropped, cancelled)."""
        return sum(s for fate, s in self.seconds.items() if fate not in KEPT_FATES)

    def on_dispatched(self, plan: EpisodePlan) -> None:
        """A train episode's task joins the baseline of the selection-bias ratios."""
        if plan.train:
            self.dispatched.add(plan.task.length_tokens, plan.task.solve_rate)

    def on_cancelled(self, reason: str, spent_s: float) -> None:
        """An episode was cancelled in flight after `spent_s` generation seconds."""
        self._seal(f"cancelled_{reason}", spent_s)

    def on_race(self, plan: EpisodePlan, reason: str) -> None:
        """An episode in flight is being cancelled for `reason`: its abort races it."""
        if plan.race_drawn and not plan.failed and reason != "shutdown":
            self.drawn_races += 1

    def on_arrived(self, episode_id: str, plan: EpisodePlan, cancelled: str | None) -> None:
        """An outcome arrived; `cancelled` names the cancel reason when it arrived late."""
        if cancelled is not None:
            self.late_arrivals += 1
            if plan.race_drawn and not plan.failed and cancelled != "shutdown":
                self.drawn_late += 1
            self.finished_discarded += not plan.failed
            self._seal(f"cancelled_{cancelled}", plan.work_s)
        elif plan.failed:
            self._seal("failed", plan.work_s)
        else:
            task = plan.task
            self.open[episode_id] = _Open(
                plan.work_s, task.length_tokens, task.solve_rate, plan.train
            )

    def on_dropped(self, episode_id: str, reason: str) -> None:
        """The sink dropped an arrived or queued episode as stale, or a full queue evicted
        it (failed ones are sealed)."""
        episode = self.open.pop(episode_id, None)
        if episode is not None:
            self.finished_discarded += 1
            self._seal("evicted" if reason == "evicted" else "dropped_stale", episode.seconds)

    def on_scored(self, event: GroupScored) -> None:
        """Scored members are queued when admitted, else rejected (train) or measured (eval)."""
        if event.admitted:
            return
        for episode_id in event.episode_ids:
            episode = self.open.pop(episode_id)
            self._seal("rejected" if episode.train else "eval", episode.seconds)

    def on_shipped(self, event: BatchShipped) -> None:
        """Cut episodes trained, or were pruned for a zero advantage."""
        trained = set(event.trained_ids)
        for episode_id in event.episode_ids:
            episode = self.open.pop(episode_id)
            if episode_id in trained:
                self.trained.add(episode.length_tokens, episode.solve_rate)
                self._seal("trained", episode.seconds)
            else:
                self._seal("pruned", episode.seconds)
        self.wasted_series.add(event.t, self.wasted_seconds())

    def on_finished(self, t: float, racing: list[tuple[str, float]]) -> None:
        """The run ended: open fates become `unshipped`; `racing` is cancelled work that was
        still going to arrive late, as (cancel reason, seconds spent until the end)."""
        for episode in self.open.values():
            self._seal("unshipped", episode.seconds)
        self.open.clear()
        for reason, seconds in racing:
            self._seal(f"cancelled_{reason}", seconds)
        self.wasted_series.add(t, self.wasted_seconds())

    def _seal(self, fate: str, seconds: float) -> None:
        self.seconds[fate] = self.seconds.get(fate, 0.0) + seconds  # `cancelled_leftover`
        self.episodes[fate] = self.episodes.get(fate, 0) + 1  # appears once it happens

    def as_dict(self, virtual_seconds: float, trainer_busy_s: float) -> dict[str, Any]:
        """The simulator's keys of `simulate --json` (definitions: docs/simulator.md)."""
        hours = virtual_seconds / 3600.0
        return {
            "virtual_seconds": virtual_seconds,
            "rollout_seconds_total": sum(self.seconds.values()),
            "rollout_seconds_wasted": self.wasted_seconds(),
            "finished_rollouts_discarded": self.finished_discarded,
            "trained_episodes_per_hour": self.episodes["trained"] / hours if hours > 0 else None,
            "trainer_idle_fraction": (
                max(0.0, 1.0 - trainer_busy_s / virtual_seconds) if virtual_seconds > 0 else None
            ),
            "trained_length_ratio": _ratio(
                self.trained.length_tokens,
                self.trained.count,
                self.dispatched.length_tokens,
                self.dispatched.count,
            ),
            "trained_difficulty_ratio": _ratio(
                self.trained.solve_rate,
                self.trained.count,
                self.dispatched.solve_rate,
                self.dispatched.count,
            ),
            "late_arrivals": self.late_arrivals,
            "rollout_seconds_by_fate": dict(self.seconds),
            "episodes_by_fate": dict(self.episodes),
        }


def _ratio(total: float, count: int, base_total: float, base_count: int) -> float | None:
    """mean(total/count) over mean(base_total/base_count); None when either is empty."""
    if count == 0 or base_count == 0 or base_total == 0.0:
        return None
    return (total / count) / (base_total / base_count)
