"""Timelines of one group or one episode: every event about it, with the step it happened at.

`show --group g12` lists the group's opening, each member's dispatch (with its own
version), arrivals, cancellations, drops, the scoring and the batches its members shipped
in; `show --episode g12/3` does the same for one member, with its rollout age at each
event. A log of millions of events is scanned by columns: each record batch is narrowed
with Arrow compute to the rows that may concern the target (plus every `batch_shipped`,
which carries the step), and only those rows become event objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rolloutlog.core.digest import event_payload
from rolloutlog.core.staleness import rollout_age
from rolloutlog.events.schema import batch_to_events
from rolloutlog.events.types import Event
from rolloutlog.events.validate import validate_event
from rolloutlog.replay.source import LogSource
from rolloutlog.replay.state_view import groups_named


@attrs.frozen
class Moment:
    """One event of a timeline, with the step current when it happened."""

    event: Event
    step: int
    age: int | None  # the rollout age at `step` of the episode (of a group: its oldest named)

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "age": self.age, **event_payload(self.event)}


def group_timeline(source: LogSource, group_id: str) -> list[Moment]:
    """Every event about group `group_id`, in seq order; an event that names members
    (a dispatch, an arrival, a cancellation, a shipped batch) carries the rollout age of
    the oldest of them at its step."""
    prefix = f"{group_id}/"
    moments: list[Moment] = []
    versions: dict[str, int] = {}
    for event, step in _scan(source, lambda batch: _rows_naming(batch, group_id, prefix)):
        if group_id not in groups_named(event):
            continue
        if event.kind == "episode_dispatched":
            versions[event.episode_id] = event.policy_version  # type: ignore[union-attr]
        ages = [rollout_age(versions[e], step) for e in _members_named(event) if e in versions]
        moments.append(Moment(event, step, max(ages, default=None)))
    return moments


def _members_named(event: Event) -> list[str]:
    """The episode ids an event names: its own, those it cancels, those a batch trains."""
    own = getattr(event, "episode_id", None)
    many = (*getattr(event, "episode_ids", ()), *getattr(event, "trained_ids", ()))
    return [*([own] if own else []), *many]


def episode_timeline(source: LogSource, episode_id: str) -> list[Moment]:
    """Every event about episode `episode_id` (and its group's opening and scoring).

    Empty when no event names the episode itself: the group's opening and scoring alone
    would make a timeline for any member id of a known group (`g1/99` of a group of 4).
    """
    group_id = episode_id.rpartition("/")[0]
    moments, version, named = [], None, False
    for event, step in _scan(source, lambda batch: _rows_naming(batch, group_id, episode_id)):
        names_it = _names_episode(event, episode_id)
        if not names_it and not _opens_or_scores(event, group_id):
            continue
        named |= names_it
        if event.kind == "episode_dispatched":
            version = event.policy_version  # type: ignore[union-attr]
        age = None if version is None else rollout_age(version, step)
        moments.append(Moment(event, step, age))
    return moments if named else []


def _names_episode(event: Event, episode_id: str) -> bool:
    if getattr(event, "episode_id", None) == episode_id:
        return True
    return episode_id in getattr(event, "episode_ids", ())


def _opens_or_scores(event: Event, group_id: str) -> bool:
    return event.kind in ("group_opened", "group_scored") and event.group_id == group_id  # type: ignore[union-attr]


def _scan(
    source: LogSource, rows: Callable[[pa.RecordBatch], np.ndarray[Any, Any]]
) -> Iterator[tuple[Event, int]]:
    """(event, step when it happened) for the rows `rows` selects, in seq order.

    Every `batch_shipped` row is read too, so that the step is known at each event; an
    event is reported with the step before any batch it is part of ships.
    """
    step = 1
    for batch in source.batches():
        shipped = pc.equal(batch.column("kind").cast(pa.string()), "batch_shipped")
        mask = np.asarray(rows(batch)) | shipped.to_numpy(zero_copy_only=False)
        for event in batch_to_events(batch.filter(pa.array(mask))):
            validate_event(event)
            yield event, step
            if event.kind == "batch_shipped":
                step = event.step + 1  # type: ignore[union-attr]


def _rows_naming(batch: pa.RecordBatch, group_id: str, prefix: str) -> np.ndarray[Any, Any]:
    """Rows whose group id is `group_id` or whose episode ids start with `prefix`.

    A superset of the rows about the target: the exact test runs on the few events built.
    """
    mask = _true_rows(pc.equal(batch.column("group_id"), group_id))
    mask |= _true_rows(pc.starts_with(batch.column("episode_id"), prefix))
    for name in ("episode_ids", "trained_ids"):
        column = batch.column(name)
        hits = pc.starts_with(pc.list_flatten(column), prefix)
        parents = pc.list_parent_indices(column).filter(hits).to_numpy()
        mask[parents] = True
    return mask


def _true_rows(condition: pa.Array) -> np.ndarray[Any, Any]:
    """A boolean array where null counts as false."""
    return np.asarray(pc.fill_null(condition, False).to_numpy(zero_copy_only=False), dtype=bool)
