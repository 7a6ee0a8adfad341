"""Where the train episodes dispatched so far stand, for capacity admission.

Capacity admission (`admission = "capacity"`, in the spirit of AReaL's staleness manager)
dispatches a new train episode only while

    trained + queued + arrived-unfinalized + in-flight < (max_off_policy_steps + v + 1) × B

with `B = batch_size`. Every train episode that was dispatched and not thrown away is in
exactly one of those four places, so the left side is the work already promised to the
trainer; the right side is what versions `0 … v + max_off_policy_steps` can consume.
Episodes produced beyond it could only train past the bound (or be dropped), so they are
not produced.

Since every batch cuts exactly `B` episodes, `trained = batches shipped × B`, and the rule
reads: the work beyond the trainer must fit in the `max_off_policy_steps + v + 1 − batches`
batches still to come. With token batches, a batch is taken as `ceil(token_batch_size /
mean tokens per completed episode)` episodes (no limit before the first completion).

Liveness: with no train episode in flight, one may always be dispatched. Without this, a
group larger than the room left (`G > (max_off_policy_steps − target_lag + 1) × B`), or a
token batch the estimate undercounts, would wait forever for members the rule holds back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.events.types import Event


@attrs.define(slots=True)
class TrainLedger:
    """Counts of train episodes by where they stand; bounded by what is open and in flight."""

    inflight: set[str] = attrs.Factory(set)
    arrived: int = 0
    queued: int = 0
    batches: int = 0
    unscored: dict[str, int] = attrs.Factory(dict)  # open train group -> unfinalized arrivals
    arrival_tokens: int = 0
    arrivals: int = 0

    def beyond_trainer(self) -> int:
        """queued + arrived-unfinalized + in-flight: promised work not yet trained."""
        return self.queued + self.arrived + len(self.inflight)


def capacity_left(config: RunConfig, ledger: TrainLedger, version: int) -> int | None:
    """How many more train episodes capacity admission allows now; None when unlimited."""
    if config.admission != "capacity":
        return None
    if config.batch_size is not None:
        per_batch = config.batch_size
    elif ledger.arrivals == 0:
        return None
    else:  # ceil(token_batch_size / mean tokens), in integers
        tokens = (config.token_batch_size or 0) * ledger.arrivals
        per_batch = max(1, -(-tokens // max(1, ledger.arrival_tokens)))
    batches_to_come = config.max_off_policy_steps + version + 1 - ledger.batches
    left = batches_to_come * per_batch - ledger.beyond_trainer()
    return left if ledger.inflight else max(left, 1)  # liveness, see the module docstring


def evolve_ledger(ledger: TrainLedger, event: Event) -> None:
    """Follow one event; only train groups (those opened with work = train) are counted."""
    handler = _LEDGER.get(event.kind)
    if handler is not None:
        handler(ledger, event)


def _group(episode_id: str) -> str:
    return episode_id.rpartition("/")[0]


def _opened(ledger: TrainLedger, event: Any) -> None:
    if event.work == "train":
        ledger.unscored[event.group_id] = 0


def _dispatched(ledger: TrainLedger, event: Any) -> None:
    if event.group_id in ledger.unscored:
        ledger.inflight.add(event.episode_id)


def _arrived(ledger: TrainLedger, event: Any) -> None:
    if event.episode_id not in ledger.inflight:
        return  # eval, or late
    ledger.inflight.discard(event.episode_id)
    ledger.unscored[_group(event.episode_id)] += 1
    ledger.arrived += 1
    if event.kind == "episode_completed":
        ledger.arrivals += 1
        ledger.arrival_tokens += event.prompt_tokens + event.completion_tokens


def _cancelled(ledger: TrainLedger, event: Any) -> None:
    ledger.inflight.difference_update(event.episode_ids)


def _dropped(ledger: TrainLedger, event: Any) -> None:
    group_id = _group(event.episode_id)
    if group_id in ledger.unscored:  # dropped on arrival, before its group was scored
        ledger.unscored[group_id] -= 1
        ledger.arrived -= 1
    else:  # swept from the queue
        ledger.queued -= 1


def _scored(ledger: TrainLedger, event: Any) -> None:
    ledger.arrived -= ledger.unscored.pop(event.group_id, 0)
    if event.admitted:
        ledger.queued += len(event.episode_ids)


def _shipped(ledger: TrainLedger, event: Any) -> None:
    ledger.queued -= len(event.episode_ids)
    ledger.batches += 1


_LEDGER: dict[str, Callable[[TrainLedger, Any], None]] = {
    "group_opened": _opened,
    "episode_dispatched": _dispatched,
    "episode_completed": _arrived,
    "episode_failed": _arrived,
    "episodes_cancelled": _cancelled,
    "episode_dropped": _dropped,
    "group_scored": _scored,
    "batch_shipped": _shipped,
}
