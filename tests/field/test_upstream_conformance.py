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


CASES = [
    Case("prime-rl", "update_order"),
    Case("prime-rl", "stale_after_curriculum"),
    Case("prime-rl", "stale_open_groups"),
    Case("prime-rl-withhold", "withheld"),
    Case("prime-rl-withhold", "step_sweep"),
    Case("prime-rl-withhold", "update_no_cancel"),
    Case("areal", "zero_capacity"),
    Case("areal", "update_paused"),
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
            "preset's sink bound drops it at rollout age N + 1 (staleness=soft would keep it, "
            "but stamps each member at its own dispatch where slime snapshots the group's "
            "version at admission: no staleness value has group stamps and no sink bound)",
        ),
    ),
    Case("slime-lag", "update_in_flight"),
    Case("slime-lag", "requeue_first"),
    Case("verl-fully-async", "budget_binds"),
    Case("verl-fully-async", "sync_in_flight"),
    Case("verl-fully-async", "budget_in_groups"),
    Case("tinker-822", "last_chance_oldest_first"),
    Case("tinker-822", "depth_zero_no_stall"),
    Case("tinker-822", "depth_zero_waits"),
    Case("verl-wait", "first_step"),
    Case("verl-wait", "update_submits_after_sync"),
    Case("verl-wait", "bound_zero_no_stall"),
    Case("verl-drop", "first_step"),
    Case("verl-drop", "update_submits_after_sync"),
    Case("verl-drop", "bound_zero_evicts"),
    Case("slime-oversample", "filter_and_abort"),
    Case("slime-oversample", "two_rounds"),
    Case("slime-oversample", "sync_step"),
    Case("slime-recycle", "recycled_count_in_round"),
    Case("slime-recycle", "two_rounds"),
    Case("slime-recycle", "sync_step"),
    Case("roll-flash", "budget_binds"),
    Case("roll-flash", "batch_after_update"),
    Case("roll-flash", "no_liveness"),
    Case("pipelinerl", "update_in_flight"),
    Case("pipelinerl", "no_age_bound"),
    Case("pipelinerl", "no_gate"),
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
