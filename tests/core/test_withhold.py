"""Withheld members (`stale_member = "withhold"`, prime-rl #2960): nothing is cancelled for
its age; at finalize a member more than the bound behind the announced version is scored
with its group (its reward in the baseline) and then dropped with reason `withheld`, so its
tokens never ship. The account flags a decider that breaks any part of that."""

from __future__ import annotations

from typing import Any

import pytest

from rolloutlog.core import sink
from rolloutlog.core.account import InvariantViolation
from rolloutlog.core.presets import CHOICES, preset_overrides
from rolloutlog.core.rules import cancellation
from rolloutlog.events.types import BatchShipped, EpisodeDropped, EpisodesCancelled, GroupScored
from tests.core.test_scenarios import Run

# G = 2, three permits, bound 0, no lag: batch 1 shuts the gate until v1.
TIGHT: dict[str, Any] = {
    "group_size": 2,
    "max_inflight": 3,
    "batch_size": 2,
    "max_off_policy_steps": 0,
    "target_lag": 0,
    "staleness": "per-episode",
}


def _mixed_group(**config: Any) -> Run:
    """g1 ships batch 1 and g3/0 goes out at v0 on its permit; v1 lifts the gate, so g3/1
    goes out at v1 while g3/0 is stale in flight; g3 then completes with one stale and one
    fresh member (g2, all v0, stays in flight)."""
    run = Run(**{**TIGHT, **config})
    run.complete("g1/0", "g1/1")
    run.publish(1)
    run.complete("g3/0", reward=1.0)
    run.complete("g3/1", reward=0.0)
    return run


def test_a_stale_member_is_scored_with_its_group_then_withheld() -> None:
    run = _mixed_group(stale_member="withhold")
    assert not any(isinstance(e, EpisodesCancelled) and e.reason == "stale" for e in run.log)
    scored = next(e for e in run.log if isinstance(e, GroupScored) and e.group_id == "g3")
    assert scored.episode_ids == ("g3/0", "g3/1") and scored.advantages == (0.5, -0.5)
    after = run.log[run.log.index(scored) + 1]
    assert isinstance(after, EpisodeDropped)
    assert (after.episode_id, after.reason, after.age) == ("g3/0", "withheld", 1)
    shipped = {i for e in run.log if isinstance(e, BatchShipped) for i in e.episode_ids}
    assert "g3/0" not in shipped and "g3/0" not in run.loop.sink_state.queue
    assert "g3/1" in run.loop.sink_state.queue or "g3/1" in shipped


def test_under_cancel_the_same_member_is_cancelled_in_flight() -> None:
    run = _mixed_group()
    cancelled = [e for e in run.log if isinstance(e, EpisodesCancelled) and e.reason == "stale"]
    assert ("g3/0",) in [e.episode_ids for e in cancelled]
    assert not any(isinstance(e, EpisodeDropped) and e.reason == "withheld" for e in run.log)


def test_the_preset_is_prime_rl_with_stale_members_withheld() -> None:
    assert preset_overrides("prime-rl-withhold") == {
        **preset_overrides("prime-rl"),
        "stale_member": "withhold",
    }


def test_the_account_flags_a_withheld_member_left_to_ship(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sink, "withheld_drops", lambda *args: [])
    with pytest.raises(InvariantViolation, match=r"scored but not withheld: \['g3/0'\]"):
        _mixed_group(stale_member="withhold")


def test_the_account_flags_a_stale_member_dropped_before_scoring(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sink, "withheld_members", lambda *args: set())
    with pytest.raises(InvariantViolation, match="g3/0 dropped before scoring, not withheld"):
        _mixed_group(stale_member="withhold")


def test_the_account_flags_a_stale_cancellation_under_withhold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = CHOICES["stale_member"]["withhold"]
    monkeypatch.setitem(rows, "cancels_stale_work", cancellation.cancel_stale_work)
    with pytest.raises(InvariantViolation, match="stale cancellation under stale_member"):
        _mixed_group(stale_member="withhold")


def test_a_group_withheld_whole_is_idle_work_for_the_zero_output_guard() -> None:
    """Under soft staleness the queue keeps stale episodes, so only the withholding says
    that g2, admitted but all of it withheld, trains nothing."""
    run = Run(**{**TIGHT, "staleness": "soft", "stale_member": "withhold"}, zero_output_batches=1)
    run.complete("g1/0", "g1/1")
    run.publish(1)
    run.complete("g2/0", "g2/1")  # both v0: withheld at v1
    assert {e.episode_id for e in run.log if isinstance(e, EpisodeDropped)} == {"g2/0", "g2/1"}
    reason = run.loop.zero_output_reason()
    assert reason is not None and "2 episodes dropped or cancelled as stale" in reason


def test_the_account_names_the_first_five_members_left_to_ship(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """G = 6: g2, all v0, is withheld whole at v1; a sink planted to drop none leaves six
    owed, and the report names the first five (so a report stays one line)."""
    monkeypatch.setattr(sink, "withheld_drops", lambda *args: [])
    six = {**TIGHT, "group_size": 6, "batch_size": 6, "max_inflight": 12, "staleness": "soft"}
    run = Run(**six, stale_member="withhold")
    run.complete(*(f"g1/{m}" for m in range(6)))
    run.publish(1)
    owed = ", ".join(f"'g2/{m}'" for m in range(5))
    with pytest.raises(InvariantViolation, match=rf"scored but not withheld: \[{owed}\]$"):
        run.complete(*(f"g2/{m}" for m in range(6)))
