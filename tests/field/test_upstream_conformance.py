"""Every field preset decides as its source does, log by log.

Each log in tests/field/logs/ is what another stack's code decides in a small run, derived
by reading that code at the commit its header names (file:line for every decision), and
checked with `rolloutlog verify --policy PRESET`. Each preset has at least three: a weight
update with work in flight, a bound that binds, and the preset's own distinctive rule.

Where the preset departs from its source today, the log of the source's decision fails
verify: its case is `xfail(strict=True)` naming the departure, so it flips (XPASS fails
the run) the day the preset is fixed, and `test_a_departure_parts_where_it_is_named` pins
the seq where the log and the preset part, so a slip in the log cannot pass for the
departure. docs/policies.md describes each source and each departure.
"""

from __future__ import annotations

import re

import attrs
import pytest

from rolloutlog.core.presets import FIELD
from tests.field.field_logs import LOGS, cited_lines, header, log_path, verdict


@attrs.frozen
class Departure:
    """Where the preset parts from its source: the first nonconforming seq, and why."""

    seq: int
    reason: str


@attrs.frozen
class Case:
    """One log of what `preset`'s source decides; `departure` where the preset differs."""

    preset: str
    name: str
    departure: Departure | None = None

    @property
    def id(self) -> str:
        return f"{self.preset}/{self.name}"


# Departures two presets share (their logs are twins under each preset's own source).
VERL_V1_AFTER_SYNC = (
    "departure: the preset opens the next step's prompts in the reaction to "
    "version_pending; verl submits them when the next step begins, after on_step_end's "
    "sync and resume (trainer_base.py:509-517, trainer_colocate_async.py:48-53)"
)
VERL_V1_TWO_BATCHES = (
    "departure: the preset's outstanding cap is (target_lag + 1) batches, target_lag <= "
    "bound, so 1 batch at bound 0; verl keeps num_warmup_batches + 1 = 2 batches out "
    "whatever its threshold (trainer_colocate_async.py:40-46, trainer_base.py:517)"
)
SLIME_AFTER_UPDATE = (
    "departure: the preset opens the next step's first round in the reaction to "
    "version_pending; slime's train.py generates the next step only after "
    "update_weights (train.py:53, 69, 85)"
)

CASES = [
    Case("prime-rl", "update_order"),
    Case("prime-rl", "stale_after_curriculum"),
    Case("prime-rl", "stale_open_groups"),
    Case("prime-rl-withhold", "withheld"),
    Case("prime-rl-withhold", "step_sweep"),
    Case("prime-rl-withhold", "update_no_cancel"),
    Case(
        "areal",
        "zero_capacity",
        Departure(
            8,
            "departure: the liveness exception opens a group with nothing running where "
            "AReaL's capacity is 0 and it waits for the next version (staleness_manager.py:"
            "99-113, workflow_executor.py:437-447)",
        ),
    ),
    Case(
        "areal",
        "update_paused",
        Departure(
            12,
            "departure: the preset opens new work in the reaction to version_pending; AReaL's "
            "executor is paused for the whole update (rl_trainer.py:754, 859)",
        ),
    ),
    Case("areal", "capacity_binds"),
    Case("tinker", "one_group_per_slot"),
    Case("tinker", "requeue_behind_fresh"),
    Case("tinker", "update_in_flight"),
    Case(
        "slime-lag",
        "sink_bound_stricter",
        Departure(
            20,
            "departure: slime keeps a group whose lag at the pop is N (fully_async_rollout.py:"
            "191-207) and train_async trains it one version later (train_async.py:44-52); the "
            "preset's sink bound drops it at rollout age N + 1",
        ),
    ),
    Case("slime-lag", "update_in_flight"),
    Case("slime-lag", "requeue_first"),
    Case("verl-fully-async", "budget_binds"),
    Case(
        "verl-fully-async",
        "sync_in_flight",
        Departure(
            56,
            "departure: the preset takes new samples in the reaction to version_pending; verl "
            "resets its count and unpauses only after the weight update and the replicas' "
            "resume (fully_async_trainer.py:690-760, checkpoint_engine/base.py:506-556)",
        ),
    ),
    Case("verl-fully-async", "budget_in_groups"),
    Case("tinker-822", "last_chance_oldest_first"),
    Case(
        "tinker-822",
        "depth_zero_no_stall",
        Departure(
            9,
            "departure: the preset's liveness exception opens a group beyond PR #822's cap of "
            "groups_per_batch at pipeline_depth 0 and the ship waits for it at its last chance "
            "(the verl-wait / tinker-822 stall); the PR's workers block in acquire_slot "
            "(train.py:996-1008, 1159-1162) and the batch goes",
        ),
    ),
    Case(
        "tinker-822",
        "depth_zero_waits",
        Departure(
            10,
            "departure: the liveness exception opens a group with none open where PR #822's "
            "workers wait for the train step to release slots (train.py:996-1008, 1418)",
        ),
    ),
    Case("verl-wait", "first_step"),
    Case(
        "verl-wait",
        "update_submits_after_sync",
        Departure(
            15,
            VERL_V1_AFTER_SYNC,
        ),
    ),
    Case(
        "verl-wait",
        "bound_zero_no_stall",
        Departure(
            5,
            VERL_V1_TWO_BATCHES,
        ),
    ),
    Case("verl-drop", "first_step"),
    Case(
        "verl-drop",
        "update_submits_after_sync",
        Departure(
            15,
            VERL_V1_AFTER_SYNC,
        ),
    ),
    Case(
        "verl-drop",
        "bound_zero_evicts",
        Departure(
            5,
            VERL_V1_TWO_BATCHES,
        ),
    ),
    Case("slime-oversample", "filter_and_abort"),
    Case("slime-oversample", "two_rounds"),
    Case(
        "slime-oversample",
        "sync_step",
        Departure(
            15,
            SLIME_AFTER_UPDATE,
        ),
    ),
    Case("slime-recycle", "recycled_count_in_round"),
    Case("slime-recycle", "two_rounds"),
    Case(
        "slime-recycle",
        "sync_step",
        Departure(
            15,
            SLIME_AFTER_UPDATE,
        ),
    ),
    Case("roll-flash", "budget_binds"),
    Case(
        "roll-flash",
        "batch_after_update",
        Departure(
            15,
            "departure: the preset ships the held batch in the reaction to version_pending; "
            "ROLL takes it in get_batch after the model update (rlvr_pipeline.py:516-546, "
            "generate_scheduler.py:639-648)",
        ),
    ),
    Case(
        "roll-flash",
        "no_liveness",
        Departure(
            14,
            "departure: with target_lag 1 the preset ships batch 2 at v0 and its liveness "
            "exception sends a prompt past ROLL's budget; ROLL sends nothing while running + "
            "completed >= its budget (generate_scheduler.py:245-253)",
        ),
    ),
    Case("pipelinerl", "update_in_flight"),
    Case("pipelinerl", "no_age_bound"),
    Case(
        "pipelinerl",
        "no_gate",
        Departure(
            13,
            "departure: the preset keeps rolloutlog's dispatch gate (target_lag); PipelineRL with "
            "max_lag null keeps submitting whatever the trainer's version (actor.py:531-534, "
            "559-575)",
        ),
    ),
    Case("per-group", "stale_owed_members"),
]


def _param(case: Case) -> object:
    if case.departure is None:
        return pytest.param(case, id=case.id)
    mark = pytest.mark.xfail(strict=True, reason=case.departure.reason)
    return pytest.param(case, id=case.id, marks=mark)


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_the_preset_decides_as_its_source(case: Case) -> None:
    result = verdict(case.preset, case.name)
    assert result.error is None, f"{case.id}: the log is bad input: {result.error}"
    assert result.ok, f"{case.id}: {result.nonconformity and result.nonconformity.describe()}"


DEPARTURES = [case for case in CASES if case.departure is not None]


@pytest.mark.parametrize("case", DEPARTURES, ids=[case.id for case in DEPARTURES])
def test_a_departure_parts_where_it_is_named(case: Case) -> None:
    """A departure's log conforms up to the seq named, and parts there (or, once the preset
    is fixed, nowhere): not at a slip earlier in the log."""
    assert case.departure is not None
    result = verdict(case.preset, case.name)
    assert result.error is None, f"{case.id}: the log is bad input: {result.error}"
    if result.nonconformity is not None:
        found = result.nonconformity
        assert found.seq == case.departure.seq, f"{case.id}: {found.describe()}"


def test_every_field_preset_has_three_logs_at_least() -> None:
    counts = {preset: sum(case.preset == preset for case in CASES) for preset in FIELD}
    assert {preset: n for preset, n in counts.items() if n < 3} == {}


def test_every_log_is_checked() -> None:
    on_disk = {path.name for path in LOGS.glob("*.jsonl")}
    assert on_disk == {log_path(case.preset, case.name).name for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_every_log_names_its_source(case: Case) -> None:
    """The header names the commit or pull request read, and cites file:line."""
    path = log_path(case.preset, case.name)
    assert re.search(r"@ ?[0-9a-f]{7,}|PR #\d+|==\d", header(path)), f"{case.id}: no commit"
    assert len(cited_lines(path)) >= 3, f"{case.id}: cites {cited_lines(path)}"
