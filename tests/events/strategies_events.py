"""Hypothesis strategies for arbitrary valid events of every kind, and sequences of them.

These build values that pass `validate_event` by construction, with the awkward corners
the log must carry exactly: any Unicode text, -0.0 and subnormal floats, int64 extremes,
nested JSON configs. They say nothing about whether a run could produce the events (that
is `rolloutlog.testing.strategies`); they are for the log format.
"""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import strategies as st

from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    CANCEL_REASONS,
    DROP_REASONS,
    EVENT_TYPES,
    INTERRUPT_REASONS,
    UNSEQUENCED,
    WORK_KINDS,
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodeInterrupted,
    EpisodeResumed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    LimitSet,
    OverloadCut,
    RunFinished,
    RunResumed,
    RunStarted,
    VersionLive,
    VersionPending,
    with_seq,
)
from rolloutlog.events.validate import INT64_MAX, INT64_MIN

texts = st.text(max_size=12)
ids = st.text(min_size=1, max_size=12)
counts = st.integers(0, INT64_MAX)
int64s = st.integers(INT64_MIN, INT64_MAX)
finite_floats = st.floats(allow_nan=False, allow_infinity=False)
times = st.floats(min_value=0.0, allow_nan=False, allow_infinity=False)
unique_ids = st.lists(ids, unique=True, max_size=6).map(tuple)

json_values = st.recursive(
    st.none() | st.booleans() | int64s | finite_floats | texts,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(texts, children, max_size=3),
    max_leaves=8,
)
configs = st.dictionaries(texts, json_values, max_size=5)


@st.composite
def scored_groups(draw: st.DrawFn) -> GroupScored:
    """Train groups (one advantage per member) and eval or empty groups (none, not admitted)."""
    episode_ids = draw(unique_ids)
    if draw(st.booleans()):
        advantages = tuple(
            draw(st.lists(finite_floats, min_size=len(episode_ids), max_size=len(episode_ids)))
        )
        admitted = draw(st.booleans()) and bool(episode_ids)
    else:
        advantages, admitted = (), False
    return GroupScored(
        t=draw(times),
        group_id=draw(ids),
        episode_ids=episode_ids,
        advantages=advantages,
        admitted=admitted,
    )


@st.composite
def shipped_batches(draw: st.DrawFn) -> BatchShipped:
    """A batch whose trained ids are an ordered subset of its cut ids, masking at most its
    tokens."""
    episode_ids = draw(unique_ids)
    kept = draw(st.lists(st.booleans(), min_size=len(episode_ids), max_size=len(episode_ids)))
    trained_ids = tuple(ident for ident, keep in zip(episode_ids, kept, strict=True) if keep)
    return BatchShipped(
        t=draw(times),
        step=draw(st.integers(1, INT64_MAX)),
        episode_ids=episode_ids,
        trained_ids=trained_ids,
        tokens=(tokens := draw(counts)),
        masked_tokens=draw(st.integers(0, tokens)),
    )


def event_of_kind(kind: str) -> st.SearchStrategy[Event]:
    """Arbitrary valid, unsequenced events of one kind (run_started may only sit at seq 0)."""
    return _by_kind()[kind]


@functools.cache
def _by_kind() -> dict[str, st.SearchStrategy[Any]]:
    """Each kind's strategy, built once: building them all took half of a property's time
    when `events()` rebuilt them at every draw."""
    common = {"t": times, "seq": st.just(UNSEQUENCED)}
    return {
        "run_started": st.builds(
            RunStarted,
            **common,
            config=configs,
            seed=int64s,
            schema_version=st.just(SCHEMA_VERSION),
            code_version=texts,
        ),
        "group_opened": st.builds(
            GroupOpened,
            **common,
            group_id=ids,
            work=st.sampled_from(WORK_KINDS),
            env=texts,
            task_id=texts,
            group_size=st.integers(1, INT64_MAX),
            policy_version=counts,
            step=st.integers(1, INT64_MAX),
            frozen=st.booleans(),
        ),
        "episode_dispatched": st.builds(
            EpisodeDispatched,
            **common,
            episode_id=ids,
            group_id=ids,
            member=counts,
            policy_version=counts,
        ),
        "episode_completed": st.builds(
            EpisodeCompleted,
            **common,
            episode_id=ids,
            reward=finite_floats,
            prompt_tokens=counts,
            completion_tokens=counts,
        ),
        "episode_failed": st.builds(EpisodeFailed, **common, episode_id=ids, error=texts),
        "episodes_cancelled": st.builds(
            EpisodesCancelled,
            **common,
            group_id=ids,
            episode_ids=unique_ids,
            unscheduled=counts,
            reason=st.sampled_from(CANCEL_REASONS),
        ),
        "version_pending": st.builds(VersionPending, **common, version=counts),
        "version_live": st.builds(VersionLive, **common, version=counts),
        "limit_set": st.builds(LimitSet, **common, max_inflight=counts),
        "overload_cut": st.builds(OverloadCut, **common, n=counts),
        "episode_dropped": st.builds(
            EpisodeDropped,
            **common,
            episode_id=ids,
            reason=st.sampled_from(DROP_REASONS),
            age=counts,
        ),
        "group_scored": scored_groups(),
        "batch_shipped": shipped_batches(),
        "run_finished": st.builds(RunFinished, **common, reason=ids),
        "run_resumed": st.builds(
            RunResumed, **common, reason=ids, episode_ids=unique_ids, version=counts
        ),
        "episode_interrupted": st.builds(
            EpisodeInterrupted,
            **common,
            episode_id=ids,
            completion_tokens=counts,
            reason=st.sampled_from(INTERRUPT_REASONS),
        ),
        "episode_resumed": st.builds(
            EpisodeResumed, **common, episode_id=ids, policy_version=counts
        ),
    }


def events() -> st.SearchStrategy[Event]:
    """An arbitrary valid, unsequenced event of any kind except run_started."""
    return st.sampled_from([kind for kind in EVENT_TYPES if kind != "run_started"]).flatmap(
        event_of_kind
    )


@st.composite
def event_lists(draw: st.DrawFn, min_size: int = 0, max_size: int = 40) -> list[Event]:
    """A valid log's events: run_started at seq 0, then arbitrary events that keep the
    rules between events (`events.log_rules`), seqs gap-free."""
    opening = draw(event_of_kind("run_started"))
    rest = draw(st.lists(events(), min_size=min_size, max_size=max_size))
    return [with_seq(event, seq) for seq, event in enumerate([opening, *_ruled(rest)])]


def _ruled(drawn: list[Event]) -> list[Event]:
    """`drawn` with the log rules kept: a later run_finished left out, and a version that
    goes live announced just before unless it was."""
    kept: list[Event] = []
    announced, finished = {0}, False
    for event in drawn:
        if isinstance(event, RunFinished):
            if finished:
                continue
            finished = True
        elif isinstance(event, VersionPending):
            announced.add(event.version)
        elif isinstance(event, VersionLive) and event.version not in announced:
            kept.append(VersionPending(t=event.t, version=event.version))
            announced.add(event.version)
        kept.append(event)
    return kept
