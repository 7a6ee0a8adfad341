"""The run summary: what `replay --json` counts, kept apart from the properties it reports.

The shadow account (`core.account`) decides what each event means (a late arrival, a
trained episode's age, a partial group) and counts it here; this module only holds the
counts and writes them as the `replay --json` object. Counting conventions:
- `episodes_cancelled` counts dispatched (in-flight) episodes per reason (`redundant`, the
  members past G cancelled when a group's first G arrived, only where a run has one);
  `unscheduled_cancelled` counts members cancelled before they were ever dispatched.
- `episodes_late` counts completions and failures of episodes no longer in flight
  (cancelled, arrived before, or after `run_finished`); recorded and otherwise ignored.
- `episodes_dropped_stale` counts arrived or queued episodes the sink dropped as stale.
- `groups_partial` counts finalized train groups that scored fewer than G members.
- `episodes_trained_past_bound` counts trained episodes of the policy being trained older
  than `max_off_policy_steps` at their step: a violation where the policy keeps the bound
  (`core.account.properties`), the price of its admission where it does not.
- `groups_requeued` counts groups opened again on the task of a group the sink discarded
  for requeue (tinker, slime-lag); those discarded members are in `episodes_dropped_stale`.
- `ship_waits` counts batches that waited for work at its last chance (`ship_wait`,
  tinker-822), `ship_wait_seconds` the time they waited: ship time minus the moment the
  batch was full and its hold had lifted. Reported only by a run whose rule waits.
- `episodes_withheld` and `tokens_withheld` (only for a run that withholds,
  `stale_member = "withhold"`) count the stale members scored with their group and then
  dropped (reason `withheld`), and their prompt and completion tokens, which never ship.
  They are in `episodes_scored` (they count in the baseline) and in
  `episodes_dropped_stale` (they never train), so trained + pruned + dropped from the queue
  + still queued stays the admitted members.
- `episodes_evicted` counts queued episodes a bounded queue (`queue_limit`) dropped to make
  room for an admitted group; they are not in `episodes_dropped_stale`.
- `episodes_dropped_leftover` (only where a run aborted leftovers, slime-oversample)
  counts finished rollouts dropped with the abort: arrived members of aborted groups and
  queued episodes the full batch did not take; the aborted in-flight episodes are
  `episodes_cancelled["leftover"]`.
- `trained_token_age_histogram` (only for a run whose rule segments episodes,
  `weight_update = "interrupt"` or `recycle`) counts trained completion tokens by the age of
  the version that generated them (`core.account.tokens`): beside `trained_age_histogram`,
  which counts episodes by the age of their oldest token, it shows how much of the training
  signal resuming made younger. `partial_ratio` is the share of trained episodes of more
  than one segment, `largest_version_span` the largest end − start among them.
- `tokens_trained_gradient` and `tokens_trained_masked` (only for a run that masks,
  `stale_tokens = "mask"`) split the trained episodes' tokens (`batch_shipped.tokens`):
  the masked ones are the completion tokens of segments past the bound, which carry no
  gradient (`batch_shipped.masked_tokens`); the rest carry it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from rolloutlog.events.types import ALWAYS_CANCEL_REASONS


def _no_cancellations() -> Counter[str]:
    return Counter(dict.fromkeys(ALWAYS_CANCEL_REASONS, 0))


@attrs.define(slots=True)
class RunSummary:
    """The counts of one run; `report` is the `replay --json` object."""

    events: int = 0
    kinds: Counter[str] = attrs.Factory(Counter)
    cancelled_by: Counter[str] = attrs.Factory(_no_cancellations)
    unscheduled_cancelled: int = 0
    dropped_stale: int = 0
    late: int = 0
    scored: int = 0
    partial: int = 0
    admitted_groups: int = 0
    requeued: int = 0
    withholds: bool = False  # the run withholds stale members: report what it withheld
    withheld: int = 0
    withheld_tokens: int = 0
    evicted: int = 0
    dropped_leftover: int = 0
    trained: int = 0
    pruned: int = 0
    trained_ages: Counter[int] = attrs.Factory(Counter)
    trained_past_bound: int = 0
    trained_partial: int = 0  # trained episodes of more than one segment (resumed)
    largest_span: int = 0  # largest end − start of a trained episode
    segments: bool = False  # the run's rule segments episodes: report the token ages
    token_ages: Counter[int] = attrs.Factory(Counter)  # trained completion tokens by age
    finished_reason: str | None = None
    ship_wait: bool = False  # the run's rule waits: its report has the two wait figures
    ship_waits: int = 0
    ship_wait_seconds: float = 0.0
    masks: bool = False  # the run masks stale segments: its report splits trained tokens
    tokens_trained: int = 0
    tokens_masked: int = 0

    def count_kinds(self, kinds: Iterable[str], events: int) -> None:
        """A whole batch of rows at once (the columnar fold's counting)."""
        self.events += events
        self.kinds.update(kinds)

    def trained_at(self, age: int, *, past_bound: bool = False) -> None:
        """One episode trained at rollout age `age`, counted at 0 if negative (as prime-rl
        clamps its lag): only a log that announced a version before its batch shipped has
        one, and the account reports that at its seq. `past_bound`: it was of the policy
        being trained and older than `max_off_policy_steps`."""
        self.trained_ages[max(0, age)] += 1
        self.trained_past_bound += past_bound

    def report(self, violations: Sequence[str]) -> dict[str, Any]:
        """The `replay --json` object, listing `violations`."""
        ages, kinds = self.trained_ages, self.kinds
        trained = sum(ages.values())
        report = {
            "events": self.events,
            "steps_shipped": kinds["batch_shipped"],
            "groups_opened": kinds["group_opened"],
            "groups_finalized": kinds["group_scored"],
            "groups_partial": self.partial,
            "groups_admitted": self.admitted_groups,
            "groups_requeued": self.requeued,
            **(
                {"episodes_withheld": self.withheld, "tokens_withheld": self.withheld_tokens}
                if self.withholds
                else {}
            ),
            "episodes_dispatched": kinds["episode_dispatched"],
            "episodes_completed": kinds["episode_completed"],
            "episodes_failed": kinds["episode_failed"],
            "episodes_late": self.late,
            "episodes_cancelled": dict(self.cancelled_by),
            "unscheduled_cancelled": self.unscheduled_cancelled,
            "episodes_dropped_stale": self.dropped_stale,
            "episodes_evicted": self.evicted,
            "episodes_scored": self.scored,
            "episodes_trained": self.trained,
            "episodes_pruned_zero_adv": self.pruned,
            "max_trained_age": max(ages) if ages else None,
            "mean_trained_age": sum(a * n for a, n in ages.items()) / trained if trained else None,
            "trained_age_histogram": {str(a): ages[a] for a in sorted(ages)},
            "episodes_trained_past_bound": self.trained_past_bound,
            "episodes_interrupted": kinds["episode_interrupted"],
            "partial_ratio": self.trained_partial / self.trained if self.trained else None,
            "largest_version_span": self.largest_span,
            "run_finished": self.finished_reason,
            "restarts": kinds["run_resumed"],
            "invariant_violations": list(violations),
            **self._leftovers(),
        }
        if self.segments:
            tokens = self.token_ages
            report["trained_token_age_histogram"] = {str(a): tokens[a] for a in sorted(tokens)}
        if self.masks:
            report["tokens_trained_gradient"] = self.tokens_trained - self.tokens_masked
            report["tokens_trained_masked"] = self.tokens_masked
        if self.ship_wait:
            report["ship_waits"] = self.ship_waits
            report["ship_wait_seconds"] = round(self.ship_wait_seconds, 6)
        return report

    def _leftovers(self) -> dict[str, int]:
        """Only a run that aborted leftovers (slime) reports what the abort wasted."""
        if not self.cancelled_by["leftover"] and not self.dropped_leftover:
            return {}
        return {"episodes_dropped_leftover": self.dropped_leftover}
