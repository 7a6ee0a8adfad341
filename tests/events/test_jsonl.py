"""JSONL export → import gives the same events bit for bit; errors name the line and field."""

from __future__ import annotations

import io
import json

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.events.errors import JsonlError
from rolloutlog.events.jsonl import event_to_json, read_jsonl, write_jsonl
from rolloutlog.events.types import EVENT_TYPES, UNSEQUENCED, Event, with_seq
from tests.events.strategies_events import event_lists, event_of_kind


def exactly(event: Event) -> tuple[type, str]:
    """Equality that also tells -0.0 from 0.0 and 1 from 1.0: the repr of every field."""
    return type(event), repr(attrs.astuple(event, recurse=False))


def through_jsonl(events: list[Event]) -> list[Event]:
    out = io.StringIO()
    write_jsonl(events, out)
    return list(read_jsonl(io.StringIO(out.getvalue())))


@pytest.mark.parametrize("kind", list(EVENT_TYPES))
@given(data=st.data())
def test_every_kind_round_trips_through_jsonl(kind: str, data: st.DataObject) -> None:
    event = with_seq(data.draw(event_of_kind(kind)), 0)
    (back,) = through_jsonl([event])
    assert exactly(back) == exactly(event)


@given(event_lists(max_size=30))
def test_a_log_round_trips_through_jsonl(events: list[Event]) -> None:
    assert [exactly(e) for e in through_jsonl(events)] == [exactly(e) for e in events]


def test_a_line_holds_kind_seq_t_and_the_design_field_names() -> None:
    line = io.StringIO()
    event = EVENT_TYPES["batch_shipped"](
        t=2.5, seq=3, step=1, episode_ids=("a", "b"), trained_ids=("a",), tokens=9
    )
    write_jsonl([event], line)
    assert json.loads(line.getvalue()) == {
        "kind": "batch_shipped",
        "seq": 3,
        "t": 2.5,
        "step": 1,
        "episode_ids": ["a", "b"],
        "trained_ids": ["a"],
        "tokens": 9,
        "masked_tokens": 0,
    }


STARTED = (
    '{"kind": "run_started", "seq": 0, "t": 0, "config": {}, "seed": 1, '
    '"schema_version": 1, "code_version": "x"}'
)
COMPLETED = (
    '{"kind": "episode_completed", "seq": 1, "t": 1.5, "episode_id": "g1/0", '
    '"reward": REWARD, "prompt_tokens": 3, "completion_tokens": 4}'
)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            COMPLETED.replace("REWARD", '"x"'),
            'line 2: episode_completed.reward: expected a number, got "x"',
        ),
        (COMPLETED.replace("REWARD", "NaN"), "line 2: invalid JSON: NaN is not a JSON number"),
        (
            COMPLETED.replace("REWARD", "1e400"),
            "line 2: episode_completed.reward: must be a finite",
        ),
        (
            COMPLETED.replace("REWARD", "0.5").replace('"seq": 1', '"seq": 4'),
            "line 2: episode_completed.seq: expected 1",
        ),
        (
            COMPLETED.replace("REWARD", "0.5").replace("prompt_tokens", "prompts"),
            "line 2: episode_completed.prompts: unknown field",
        ),
        (
            COMPLETED.replace("REWARD", "0.5").replace(', "completion_tokens": 4', ""),
            "line 2: episode_completed.completion_tokens: missing field",
        ),
        (
            COMPLETED.replace("REWARD", "0.5").replace('"t": 1.5', '"t": true'),
            "line 2: episode_completed.t: expected a number, got true",
        ),
        (
            COMPLETED.replace("REWARD", "0.5").replace("episode_completed", "episode_finished"),
            'line 2: kind: unknown kind "episode_finished"',
        ),
        (
            '{"kind": "limit_set", "kind": "limit_set", "t": 1, "max_inflight": 2}',
            'line 2: invalid JSON: key "kind" appears twice',
        ),
        ("[1, 2]", "line 2: expected a JSON object, got list"),
        ('{"kind": "limit_set", "t": 1,', "line 2: invalid JSON: Expecting"),
    ],
)
def test_import_errors_name_the_line_and_field(line: str, message: str) -> None:
    with pytest.raises(JsonlError) as caught:
        list(read_jsonl([STARTED, line]))
    assert str(caught.value).startswith(message)
    assert caught.value.line == 2


def test_blank_lines_are_skipped_but_counted_and_seq_may_be_left_out() -> None:
    lines = [STARTED, "", COMPLETED.replace("REWARD", "1").replace('"seq": 1, ', ""), "   "]
    started, completed = read_jsonl(lines)
    assert completed.seq == UNSEQUENCED
    assert completed.reward == 1.0 and isinstance(completed.reward, float)
    assert started.t == 0.0 and isinstance(started.t, float)
    with pytest.raises(JsonlError, match=r"^line 4: "):
        list(read_jsonl([STARTED, "", "", "{}"]))


def test_integers_too_large_for_an_exact_float_are_refused() -> None:
    line = COMPLETED.replace("REWARD", str(2**60 + 1))
    with pytest.raises(
        JsonlError, match=r"line 2: episode_completed\.reward: must be a finite float64"
    ):
        list(read_jsonl([STARTED, line]))


def test_export_writes_plain_json_that_other_tools_read() -> None:
    event = EVENT_TYPES["episode_failed"](t=1.0, seq=1, episode_id="g1/0", error="timeout: ü")
    assert event_to_json(event) == {
        "kind": "episode_failed",
        "seq": 1,
        "t": 1.0,
        "episode_id": "g1/0",
        "error": "timeout: ü",
    }
