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
from rolloutlog.events.types import Event, VersionPending, with_seq
from rolloutlog.testing.scripted_world import scripted_log
from tests.core.core_events import opened

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
    report = r"^seq 2 \(group_opened\): verl admission: 1 groups counted this sync window, of 1$"
    with pytest.raises(InvariantViolation, match=report):  # the whole report, at its seq
        account.feed(with_seq(opened("g2", 0, 1, 4), 2))


def _reset_to_zero(ledger: TrainLedger, event: Event) -> None:
    """A planted bug: the sync forgets the groups still open and queued."""
    admission_budget.evolve_budget_ledger(ledger, event)
    if isinstance(event, VersionPending):
        ledger.window_groups = 0


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
