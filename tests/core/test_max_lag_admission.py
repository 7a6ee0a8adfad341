"""Max-lag admission (`admission = "max-lag"`): PipelineRL's actor with `finetune.max_lag`
set submits at most `⌈max_lag / G⌉ + ⌈B / G⌉` groups before the first weight update and
`⌈B / G⌉` more at each update (`pipelinerl/actor.py`, `can_submit_before_update`)."""

from __future__ import annotations

from typing import Any

import pytest

from rolloutlog.core.account import InvariantViolation
from rolloutlog.core.presets import CHOICES
from rolloutlog.core.rules import admission, admission_field
from tests.core.test_scenarios import Run

# G = 2, B = 4, max_lag = 3 episodes: ⌈3/2⌉ + ⌈4/2⌉ = 4 groups before the first update,
# under permits for 10; a lag of 2 keeps the gate out of the way.
LAGGED: dict[str, Any] = {
    "staleness": "soft",
    "admission": "max-lag",
    "max_lag": 3,
    "group_size": 2,
    "batch_size": 4,
    "max_inflight": 20,
    "target_lag": 2,
}


def _opened(run: Run) -> list[str]:
    return [e.group_id for e in run.of_kind("group_opened")]


def test_max_lag_opens_lag_groups_plus_one_update_before_the_first_update() -> None:
    run = Run(**LAGGED)
    assert _opened(run) == ["g1", "g2", "g3", "g4"]
    run.complete("g1/0", "g1/1", "g2/0", "g2/1")  # batch 1 ships; no update yet
    assert len(_opened(run)) == 4
    run.publish(1)  # an update: ⌈B/G⌉ = 2 more groups
    assert _opened(run) == ["g1", "g2", "g3", "g4", "g5", "g6"]


def test_without_max_lag_admission_every_permit_goes_out() -> None:
    run = Run(**{**LAGGED, "admission": "none"})
    assert len(_opened(run)) == 10


def test_the_account_flags_a_planted_max_lag_that_admits_one_group_too_many(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def one_too_many(config: Any, ledger: admission.TrainLedger, version: int) -> int | None:
        left = admission_field.max_lag_left(config, ledger, version)
        return None if left is None else left + config.group_size

    planted = {**CHOICES["admission"]["max-lag"], "allowance": one_too_many}
    monkeypatch.setitem(CHOICES["admission"], "max-lag", planted)
    with pytest.raises(InvariantViolation, match="max-lag admission: train group 5 opened"):
        Run(**LAGGED)
