"""verl's sample budget per weight sync (`admission = "verl"`): the decider keeps it, and
the account's own count catches a decider that forgets what is outstanding at a sync.

G = 4 under 12 permits, a batch of one group, θ = 0, a sync every batch (K = 1): a sync
window opens one train group, so without the budget the permits would let three run at once.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from rolloutlog.core.account import Account, InvariantViolation
from rolloutlog.core.account.properties import VERL_BUDGET, kept_properties
from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.core.presets import CHOICES, preset_overrides
from rolloutlog.core.rules import admission_budget
from rolloutlog.core.state import TrainLedger
from rolloutlog.events.types import EpisodeFailed, Event, GroupOpened, VersionPending, with_seq
from rolloutlog.testing.scripted_world import scripted_log
from tests.core.core_events import opened
from tests.core.test_scenarios import Run

WORLD = {
    "group_size": 4,
    "max_inflight": 12,
    "batch_size": 4,
    "staleness_threshold": 0.0,
    "updates_per_sync": 1,
    # the budget under keep mode: the preset's interruptions (`partial_rollout`) would spend
    # the scripted world's steps on aborts and resumptions, and fewer syncs would come
    "weight_update": "freeze",
}


def _config(**keys: Any) -> RunConfig:
    return RunConfig.from_mapping({**preset_overrides("verl-fully-async"), **WORLD, **keys})


def _log(config: RunConfig, account: Account) -> list[Event]:
    loop = ReactionLoop(config, observers=(account,))
    return scripted_log(config, random.Random(0).randrange, 80, loop=loop)


def test_the_preset_keeps_the_budget_and_no_bound() -> None:
    assert kept_properties(_config()) == {VERL_BUDGET}
    assert kept_properties(_config(batch_size=None, token_batch_size=40)) == frozenset()


@pytest.mark.parametrize(
    ("threshold", "k", "budget"), [(0.0, 1, 2), (0.5, 1, 3), (1.0, 1, 4), (0.1, 1, 2), (0.1, 4, 8)]
)
def test_the_budget_is_verls_int_of_r_times_one_plus_theta_times_k(
    threshold: float, k: int, budget: int
) -> None:
    config = _config(batch_size=8, staleness_threshold=threshold, updates_per_sync=k)
    assert admission_budget.sync_budget(config, 8) == budget


@pytest.mark.parametrize(("threshold", "k"), [(0.0, 1), (1.0, 1), (0.0, 2), (0.5, 3)])
def test_a_verl_run_opens_no_group_past_the_window(threshold: float, k: int) -> None:
    config = _config(zero_output_batches=1000, staleness_threshold=threshold, updates_per_sync=k)
    account = Account(config)  # raises on a broken property
    log = _log(config, account)
    assert sum(e.kind == "version_pending" for e in log) > 3
    assert account.violations == []


def test_a_group_opened_past_the_window_is_a_violation() -> None:
    account = Account(_config())
    account.feed(opened("g1", 0, 1, 4))
    report = r"^seq 2 \(group_opened\): verl admission: 4 episodes counted this sync window, of 4$"
    with pytest.raises(InvariantViolation, match=report):  # the whole report, at its seq
        account.feed(with_seq(opened("g2", 0, 1, 4), 2))


def _reset_to_zero(ledger: TrainLedger, event: Event) -> None:
    """A planted bug: the sync forgets the groups still open and the episodes queued."""
    admission_budget.evolve_budget_ledger(ledger, event)
    if isinstance(event, VersionPending):
        ledger.window_queued = 0
        ledger.window_kept.clear()


def test_the_account_catches_a_decider_that_forgets_the_outstanding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    row = {**CHOICES["admission"]["verl"], "follow_ledger": _reset_to_zero}
    monkeypatch.setitem(CHOICES["admission"], "verl", row)
    # two groups a window: one is still open when the other's batch brings the sync
    config = _config(zero_output_batches=1000, staleness_threshold=1.0)
    account = Account(config, raise_on_violation=False)
    _log(config, account)
    assert any("verl admission" in v for v in account.violations)


def test_a_member_lost_before_the_queue_gives_its_room_back() -> None:
    """A budget of one group of 2 a window: verl never trains part of a sample (a failed
    one ends its run), so g1's failed member frees its room and g2 opens to fill the batch,
    where verl's count in groups (and no liveness exception) would wait for ever."""
    run = Run(**{**_config().to_dict(), "group_size": 2, "batch_size": 2, "max_inflight": 8})
    assert not run.config.liveness and _train_groups(run) == ["g1"]
    run.feed(EpisodeFailed(t=1.0, episode_id="g1/0", error="scripted"))
    assert _train_groups(run) == ["g1", "g2"]
    run.complete("g1/1", "g2/0", "g2/1")
    assert run.of_kind("batch_shipped")[0].episode_ids == ("g1/1", "g2/0")


def _train_groups(run: Run) -> list[str]:
    return [e.group_id for e in run.log if isinstance(e, GroupOpened) and e.work == "train"]


def test_a_batch_cut_past_the_sync_still_counts_at_the_reset() -> None:
    """verl's reset counts its MessageQueue, which holds what the trainer has not taken
    yet. G = 1, a batch of one, K = 2, θ = 0.5: three samples a window; with a ship hold of
    lag one, batch 3 is cut before the sync to v2 (verl's trainer would take it after), so
    the new window has room for two groups, not three."""
    keys = {"group_size": 1, "batch_size": 1, "max_inflight": 8, "gate_lag": "one"}
    run = Run(**{**_config(updates_per_sync=2, staleness_threshold=0.5).to_dict(), **keys})
    assert _train_groups(run) == ["g1", "g2", "g3"]
    run.complete("g1/0", "g2/0", "g3/0")
    assert [e.step for e in run.of_kind("batch_shipped")] == [1, 2, 3]
    run.update(2)
    assert _train_groups(run) == ["g1", "g2", "g3", "g4", "g5"]
