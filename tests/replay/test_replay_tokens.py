"""`batch_shipped.tokens` is checked by replay: the tokens of the episodes the batch trains.

The sink writes `tokens` as the prompt and completion tokens of the trained episodes; a
log whose batch says otherwise (an exported log edited and imported again) breaks a
property at that batch's seq, on the columnar fold (which hands over) and the plain one.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.events.types import BatchShipped, Event
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import MemoryLog
from rolloutlog.testing.strategies import world_logs
from tests.core.planted import fed
from tests.replay.replay_helpers import small_log


def _with_tokens(log: list[Event], seq: int, tokens: int) -> list[Event]:
    return [attrs.evolve(event, tokens=tokens) if event.seq == seq else event for event in log]


@pytest.mark.parametrize("columnar", [True, False])
def test_a_batch_that_misstates_its_tokens_is_a_violation_at_its_seq(columnar: bool) -> None:
    log = small_log()
    shipped = next(event for event in log if isinstance(event, BatchShipped))
    assert shipped.tokens == 4 and replay_log(MemoryLog(log), columnar=columnar).violations == []
    replay = replay_log(MemoryLog(_with_tokens(log, shipped.seq, 1)), columnar=columnar)
    assert replay.path == "plain"  # the columnar fold does not vouch for it
    assert replay.violations == [
        f"seq {shipped.seq} (batch_shipped): tokens 1, but the trained episodes hold 4"
    ]


@given(world_logs(max_steps=40), st.data())
def test_every_batch_is_checked_for_its_tokens(log: list[Event], data: st.DataObject) -> None:
    batches = [event for event in log if isinstance(event, BatchShipped)]
    assert fed(log).violations == []
    if not batches:
        return
    shipped = data.draw(st.sampled_from(batches))
    damaged = _with_tokens(log, shipped.seq, shipped.tokens + 1)
    assert fed(damaged).violations == [
        f"seq {shipped.seq} (batch_shipped): tokens {shipped.tokens + 1}, "
        f"but the trained episodes hold {shipped.tokens}"
    ]
