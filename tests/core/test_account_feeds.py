"""The account's feed table per run (`core.account.feeds_for`): a run that never interrupts,
drains, recycles or masks skips the books of segments, spans and token ages, and its
account says exactly what the full table's says, on valid logs and on tampered ones."""

from __future__ import annotations

from hypothesis import given

from rolloutlog.core.account import FEEDS, Account, feeds_for
from rolloutlog.core.config import RunConfig
from rolloutlog.events.types import Event
from rolloutlog.testing.strategies import Tampered, run_configs, tampered_logs, world_logs

PLAIN = run_configs(weight_update="freeze", recycle=False, stale_tokens="drop")


def _summaries(log: list[Event]) -> tuple[dict[str, object], dict[str, object]]:
    config = RunConfig.from_mapping(log[0].config, startable=False)  # type: ignore[attr-defined]
    lean, full = (Account(config, raise_on_violation=False) for _ in range(2))
    full.feeds = FEEDS
    for event in log:
        lean.feed(event)
        full.feed(event)
    return lean.summary(), full.summary()


@given(world_logs(PLAIN))
def test_a_plain_run_skips_books_and_reports_the_same(log: list[Event]) -> None:
    config = RunConfig.from_mapping(log[0].config)  # type: ignore[attr-defined]
    assert feeds_for(config) is not FEEDS
    lean, full = _summaries(log)
    assert lean == full


@given(tampered_logs())
def test_the_lean_table_reports_what_the_full_one_does_on_a_tampered_log(
    tampered: Tampered,
) -> None:
    """An interruption in a run that allows none is reported through the rows both keep."""
    lean, full = _summaries(tampered.log)
    assert lean == full


def test_a_run_that_interrupts_keeps_every_book() -> None:
    for keys in ({"weight_update": "interrupt"}, {"recycle": True}, {"stale_tokens": "mask"}):
        assert feeds_for(RunConfig.from_mapping({"batch_size": 4, **keys})) is FEEDS, keys
