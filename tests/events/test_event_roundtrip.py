"""Events survive the Arrow form field for field, and `validate_event` refuses bad ones by name."""

from __future__ import annotations

import math

import attrs
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.events.errors import EventError
from rolloutlog.events.schema import (
    FIELD_NAMES,
    LOG_SCHEMA,
    SCHEMA_VERSION,
    SCHEMA_VERSION_KEY,
    batch_columns,
    batch_to_events,
    events_to_batch,
)
from rolloutlog.events.types import (
    EVENT_TYPES,
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeInterrupted,
    EpisodeResumed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    RunStarted,
    event_fields,
    with_seq,
)
from rolloutlog.events.validate import FIELD_RULES, validate_event
from tests.events.strategies_events import event_lists, event_of_kind


def exactly(event: Event) -> tuple[type, str]:
    """Equality that also tells -0.0 from 0.0 and 1 from 1.0: the repr of every field."""
    return type(event), repr(attrs.astuple(event, recurse=False))


@pytest.mark.parametrize("kind", list(EVENT_TYPES))
@given(data=st.data())
def test_every_kind_round_trips_through_arrow(kind: str, data: st.DataObject) -> None:
    event = with_seq(data.draw(event_of_kind(kind)), 0)
    (back,) = batch_to_events(events_to_batch([event]))
    assert exactly(back) == exactly(event)
    validate_event(back)


@given(event_lists(max_size=60))
def test_a_mixed_batch_round_trips_in_order(events: list[Event]) -> None:
    back = batch_to_events(events_to_batch(events))
    assert [exactly(event) for event in back] == [exactly(event) for event in events]


@given(event_lists(max_size=20))
def test_batch_columns_hold_each_field_in_its_column(events: list[Event]) -> None:
    columns = batch_columns(events_to_batch(events))
    for row, event in enumerate(events):
        assert (columns["seq"][row], columns["t"][row], columns["kind"][row]) == (
            event.seq,
            event.t,
            event.kind,
        )
        for name in event_fields(type(event)):
            value = getattr(event, name)
            assert columns[name][row] == (list(value) if isinstance(value, tuple) else value)
        others = set(FIELD_NAMES) - set(event_fields(type(event)))
        assert all(columns[name][row] is None for name in others)


def test_schema_is_flat_with_one_column_per_field_name() -> None:
    assert LOG_SCHEMA.names[:3] == ["seq", "t", "kind"]
    assert not any(LOG_SCHEMA.field(name).nullable for name in ("seq", "t", "kind"))
    assert set(LOG_SCHEMA.names[3:]) == {
        name for cls in EVENT_TYPES.values() for name in event_fields(cls)
    }
    assert LOG_SCHEMA.field("kind").type == pa.dictionary(pa.int8(), pa.string())
    assert LOG_SCHEMA.field("episode_ids").type == pa.list_(pa.string())
    assert LOG_SCHEMA.field("advantages").type == pa.list_(pa.float64())
    assert LOG_SCHEMA.field("config").type == pa.string()
    assert LOG_SCHEMA.metadata[SCHEMA_VERSION_KEY] == str(SCHEMA_VERSION).encode()


def test_every_field_has_a_validation_rule() -> None:
    for cls in EVENT_TYPES.values():
        assert set(event_fields(cls)) <= set(FIELD_RULES), cls.kind


COMPLETED = EpisodeCompleted(
    t=1.0, seq=7, episode_id="g1/0", reward=0.5, prompt_tokens=3, completion_tokens=4
)
SCORED = GroupScored(
    t=1.0, seq=8, group_id="g1", episode_ids=("g1/0", "g1/1"), advantages=(0.5, -0.5), admitted=True
)
SHIPPED = BatchShipped(t=1.0, seq=9, step=1, episode_ids=("a", "b"), trained_ids=("a",), tokens=5)
CANCELLED = EpisodesCancelled(
    t=1.0, seq=3, group_id="g1", episode_ids=("g1/0",), unscheduled=2, reason="stale"
)
OPENED = GroupOpened(
    t=0.0,
    seq=1,
    group_id="g1",
    work="train",
    env="e",
    task_id="t",
    group_size=2,
    policy_version=0,
    step=1,
    frozen=False,
)


@pytest.mark.parametrize(
    ("event", "field", "words"),
    [
        (attrs.evolve(COMPLETED, reward="x"), "reward", 'expected a number, got "x"'),
        (attrs.evolve(COMPLETED, reward=math.nan), "reward", "finite"),
        (attrs.evolve(COMPLETED, prompt_tokens=True), "prompt_tokens", "expected an integer"),
        (attrs.evolve(COMPLETED, prompt_tokens=-1), "prompt_tokens", "must be >= 0"),
        (attrs.evolve(COMPLETED, completion_tokens=2**63), "completion_tokens", "int64"),
        (attrs.evolve(COMPLETED, episode_id=""), "episode_id", "must not be empty"),
        (attrs.evolve(COMPLETED, t=-1.0), "t", "must be >= 0"),
        (attrs.evolve(COMPLETED, seq=-2), "seq", "must be >= -1"),
        (attrs.evolve(OPENED, work="play"), "work", "must be one of 'train', 'eval'"),
        (attrs.evolve(OPENED, step=0), "step", "must be >= 1"),
        (attrs.evolve(OPENED, frozen=1), "frozen", "expected true or false"),
        (attrs.evolve(CANCELLED, reason="bored"), "reason", "must be one of 'stale'"),
        (attrs.evolve(CANCELLED, episode_ids=["g1/0"]), "episode_ids", "expected a tuple"),
        (attrs.evolve(CANCELLED, episode_ids=("a", "a")), "episode_ids", "more than once"),
        (attrs.evolve(SCORED, advantages=(0.5,)), "advantages", "one per episode_ids (2), got 1"),
        (attrs.evolve(SCORED, episode_ids=(), advantages=()), "admitted", "no scored member"),
        (attrs.evolve(SHIPPED, trained_ids=("c",)), "trained_ids", '"c" is not in episode_ids'),
        (attrs.evolve(SHIPPED, masked_tokens=6), "masked_tokens", "6 is more than tokens (5)"),
        (attrs.evolve(SHIPPED, masked_tokens=-1), "masked_tokens", "must be >= 0"),
        (
            EpisodeInterrupted(t=1.0, seq=5, episode_id="g1/0", completion_tokens=3, reason="x"),
            "reason",
            "must be one of 'update', 'recycle'",
        ),
        (
            EpisodeResumed(t=1.0, seq=5, episode_id="g1/0", policy_version=-1),
            "policy_version",
            "must be >= 0",
        ),
        (
            RunStarted(
                t=0.0, seq=4, config={}, seed=0, schema_version=SCHEMA_VERSION, code_version=""
            ),
            "seq",
            "always has seq 0",
        ),
        (
            RunStarted(
                t=0.0,
                seq=0,
                config={"a": (1, 2)},
                seed=0,
                schema_version=SCHEMA_VERSION,
                code_version="",
            ),
            "config",
            "tuple",
        ),
        (
            EpisodeDispatched(
                t=0.0, seq=2, episode_id="\ud800", group_id="g", member=0, policy_version=0
            ),
            "episode_id",
            "UTF-8",
        ),
    ],
)
def test_validate_event_names_kind_seq_and_field(event: Event, field: str, words: str) -> None:
    with pytest.raises(EventError) as caught:
        validate_event(event)
    assert (caught.value.kind, caught.value.seq, caught.value.field) == (
        event.kind,
        event.seq,
        field,
    )
    assert words in caught.value.problem
    assert str(caught.value).startswith(f"{event.kind}.{field} ")


def test_eval_groups_score_members_without_advantages() -> None:
    validate_event(attrs.evolve(SCORED, advantages=(), admitted=False))


def test_validate_event_refuses_what_is_not_an_event() -> None:
    with pytest.raises(EventError, match="not an event: dict"):
        validate_event({"kind": "run_started"})
