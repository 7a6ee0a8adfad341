"""The run summary that `replay --json` prints: counts, drops, trained ages.

Counting conventions (the docs repeat them):
- `episodes_cancelled` counts dispatched (in-flight) episodes per reason;
  `unscheduled_cancelled` counts members cancelled before they were ever dispatched.
- `episodes_late` counts completions and failures of episodes no longer in flight
  (cancelled, arrived before, or after `run_finished`); recorded and otherwise ignored.
- `episodes_dropped_stale` counts arrived or queued episodes the sink dropped as stale.
- `groups_partial` counts finalized train groups that scored fewer than G members.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rolloutlog.core.sink import SinkState
from rolloutlog.core.staleness import rollout_age
from rolloutlog.events.types import CANCEL_REASONS, Event


class SummaryCollector:
    """Accumulates the summary; `observe` sees each event with the sink state *before* it."""

    def __init__(self, group_size: int) -> None:
        self.group_size = group_size
        self.events = 0
        self.kinds: Counter[str] = Counter()
        self.cancelled: Counter[str] = Counter({reason: 0 for reason in CANCEL_REASONS})
        self.unscheduled_cancelled = 0
        self.dropped_stale = 0
        self.late = 0
        self.scored = 0
        self.partial = 0
        self.admitted_groups = 0
        self.trained = 0
        self.pruned = 0
        self.trained_ages: Counter[int] = Counter()
        self.train_group_sizes: dict[str, int] = {}
        self.finished_reason: str | None = None

    def observe(self, event: Event, sink: SinkState) -> None:
        """Count one event; `sink` is the sink state before the event was applied."""
        self.events += 1
        self.kinds[event.kind] += 1
        kind = event.kind
        if kind in ("episode_completed", "episode_failed"):
            self.late += event.episode_id not in sink.pending  # type: ignore[union-attr]
        elif kind == "episodes_cancelled":
            self.cancelled[event.reason] += len(event.episode_ids)  # type: ignore[union-attr]
            self.unscheduled_cancelled += event.unscheduled  # type: ignore[union-attr]
        elif kind == "episode_dropped":
            self.dropped_stale += 1
        elif kind == "group_scored":
            self._scored(event, sink)
        elif kind == "batch_shipped":
            self._shipped(event, sink)
        elif kind == "run_finished":
            self.finished_reason = event.reason  # type: ignore[union-attr]

    def _scored(self, event: Any, sink: SinkState) -> None:
        group = sink.groups.get(event.group_id)
        if group is None or not group.train:
            return
        self.scored += len(event.episode_ids)
        self.partial += len(event.episode_ids) < group.size
        self.admitted_groups += event.admitted

    def _shipped(self, event: Any, sink: SinkState) -> None:
        self.trained += len(event.trained_ids)
        self.pruned += len(event.episode_ids) - len(event.trained_ids)
        for episode_id in event.trained_ids:
            queued = sink.queue.get(episode_id)
            if queued is not None:  # else the sink refuses this batch as inconsistent next
                self.trained_ages[rollout_age(queued.version, event.step)] += 1

    def summary(self, violations: list[str]) -> dict[str, Any]:
        """The `replay --json` object."""
        ages = self.trained_ages
        trained = sum(ages.values())
        return {
            "events": self.events,
            "steps_shipped": self.kinds["batch_shipped"],
            "groups_opened": self.kinds["group_opened"],
            "groups_finalized": self.kinds["group_scored"],
            "groups_partial": self.partial,
            "groups_admitted": self.admitted_groups,
            "episodes_dispatched": self.kinds["episode_dispatched"],
            "episodes_completed": self.kinds["episode_completed"],
            "episodes_failed": self.kinds["episode_failed"],
            "episodes_late": self.late,
            "episodes_cancelled": dict(self.cancelled),
            "unscheduled_cancelled": self.unscheduled_cancelled,
            "episodes_dropped_stale": self.dropped_stale,
            "episodes_scored": self.scored,
            "episodes_trained": self.trained,
            "episodes_pruned_zero_adv": self.pruned,
            "max_trained_age": max(ages) if ages else None,
            "mean_trained_age": (sum(a * n for a, n in ages.items()) / trained)
            if trained
            else None,
            "trained_age_histogram": {str(age): ages[age] for age in sorted(ages)},
            "run_finished": self.finished_reason,
            "restarts": self.kinds["run_resumed"],
            "invariant_violations": violations,
        }
