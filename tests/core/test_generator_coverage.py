"""The generators reach the hard cases: each case's share of generated logs has a floor.

`world_logs()` is what the properties draw from; a case it never reaches is a case they
never check. The table is printed (`pytest -s`, or in the failure message) so that a
change to the generators shows what it costs.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeFailed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    RunFinished,
    RunStarted,
    VersionLive,
    VersionPending,
)
from rolloutlog.testing.coverage import FLOORS, coverage_table, features, fractions
from rolloutlog.testing.strategies import world_logs

# Measured on a fixed, derandomized sample so that the floors are stable in every profile.
SAMPLE = 300


def _generated_logs() -> list[list[Event]]:
    logs: list[list[Event]] = []

    @settings(
        max_examples=SAMPLE,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(world_logs(checked=False))
    def collect(log: list[Event]) -> None:
        logs.append(log)

    collect()
    return logs


def test_generated_logs_reach_every_hard_case_often_enough() -> None:
    total, measured = fractions(_generated_logs())
    table = coverage_table(total, measured)
    print(table)
    below = [name for name, (_, floor) in FLOORS.items() if measured[name] < floor]
    assert not below, f"below the floor: {', '.join(below)}\n{table}"
    assert total >= SAMPLE // 2, f"only {total} logs generated\n{table}"


# --- the detectors themselves: each case found where it is, and not where it is not ----

CONFIG = {"max_off_policy_steps": 1, "admission_smoothing": False}


def _log(*events: Event) -> list[Event]:
    start = RunStarted(
        t=0.0, config=CONFIG, seed=0, schema_version=SCHEMA_VERSION, code_version="t"
    )
    return [start, *events]


def _opened(group_id: str, frozen: bool = False) -> GroupOpened:
    return GroupOpened(
        t=0.0,
        group_id=group_id,
        work="train",
        env="main",
        task_id="t0",
        group_size=3,
        policy_version=0,
        step=1,
        frozen=frozen,
    )


def _dispatched(episode_id: str, version: int) -> EpisodeDispatched:
    group_id, _, member = episode_id.partition("/")
    return EpisodeDispatched(
        t=0.0, episode_id=episode_id, group_id=group_id, member=int(member), policy_version=version
    )


def _shipped(step: int) -> BatchShipped:
    return BatchShipped(t=0.0, step=step, episode_ids=(), trained_ids=(), tokens=0)


def _done(episode_id: str) -> EpisodeCompleted:
    return EpisodeCompleted(
        t=0.0, episode_id=episode_id, reward=1.0, prompt_tokens=1, completion_tokens=1
    )


def _cancelled(episode_id: str, reason: str = "stale") -> EpisodesCancelled:
    group_id = episode_id.partition("/")[0]
    return EpisodesCancelled(
        t=0.0, group_id=group_id, episode_ids=(episode_id,), unscheduled=0, reason=reason
    )


SPANNING = (_opened("g1"), _dispatched("g1/0", 0), _dispatched("g1/1", 1), _shipped(1))


def test_pending_mixed_needs_one_stale_and_one_fresh_member_in_flight() -> None:
    mixed = _log(*SPANNING, _shipped(2), VersionPending(t=0.0, version=2))
    assert "pending_mixed" in features(mixed)  # ages 2 (stale) and 1 (fresh)
    young = _log(*SPANNING, VersionPending(t=0.0, version=1))
    assert "pending_mixed" not in features(young)  # ages 1 and 0: both fresh
    old = _log(*SPANNING, _shipped(2), _shipped(3), VersionPending(t=0.0, version=3))
    assert "pending_mixed" not in features(old)  # ages 3 and 2: both stale
    frozen = _log(
        _opened("g1", frozen=True), *SPANNING[1:], _shipped(2), VersionPending(t=0.0, version=2)
    )
    assert "pending_mixed" not in features(frozen)  # a frozen group never goes stale


def test_arrival_cases_are_told_apart() -> None:
    base = (_opened("g1"), _dispatched("g1/0", 0), _dispatched("g1/1", 0))
    assert features(_log(*base, _done("g1/0"))).isdisjoint(
        {"duplicate_arrival", "late_failure", "arrival_after_finish"}
    )
    assert "duplicate_arrival" in features(_log(*base, _done("g1/0"), _done("g1/0")))
    late = EpisodeFailed(t=0.0, episode_id="g1/1", error="x")
    assert "late_failure" in features(_log(*base, _cancelled("g1/1"), late))
    assert "late_failure" not in features(_log(*base, late))
    finished = RunFinished(t=0.0, reason="x")
    assert "arrival_after_finish" in features(_log(*base, finished, _done("g1/0")))


def test_partial_scoring_after_a_stale_cancellation_and_delayed_live() -> None:
    scored = GroupScored(
        t=0.0, group_id="g1", episode_ids=("g1/0",), advantages=(0.0,), admitted=True
    )
    base = (_opened("g1"), _dispatched("g1/0", 0), _dispatched("g1/1", 0), _done("g1/0"))
    assert "partial_after_stale" in features(_log(*base, _cancelled("g1/1"), scored))
    assert "partial_after_stale" not in features(
        _log(*base, _cancelled("g1/1", "overload"), scored)
    )
    pending, live = VersionPending(t=0.0, version=1), VersionLive(t=0.0, version=1)
    assert "delayed_live" not in features(_log(pending, live))
    assert "delayed_live" in features(_log(pending, _done("g1/0"), live))


def test_redundant_is_a_redundant_cancellation_and_no_other() -> None:
    base = (_opened("g1"), _dispatched("g1/0", 0), _dispatched("g1/1", 0))
    assert "redundant" in features(_log(*base, _done("g1/0"), _cancelled("g1/1", "redundant")))
    assert "redundant" not in features(_log(*base, _done("g1/0"), _cancelled("g1/1")))
