"""Group affinity, the one placement rule of the live pool and the simulated router."""

from __future__ import annotations

from rolloutlog.runtime.affinity import GROUPS_REMEMBERED_MAX, GroupAffinity


def test_a_recalled_group_is_renewed_and_the_oldest_is_forgotten_past_the_bound() -> None:
    affinity: GroupAffinity[int] = GroupAffinity()
    affinity.remember("g0", 0)
    affinity.remember("g1", 1)
    assert affinity.recall("g0") == 0  # renewed: g1 is now the oldest
    for n in range(2, GROUPS_REMEMBERED_MAX + 1):
        affinity.remember(f"g{n}", n % 3)
    assert affinity.recall("g1") is None
    assert affinity.recall("g0") == 0
    assert affinity.recall(f"g{GROUPS_REMEMBERED_MAX}") == GROUPS_REMEMBERED_MAX % 3


def test_a_placement_that_can_no_longer_serve_is_not_recalled_and_is_forgotten_on_demand() -> None:
    affinity: GroupAffinity[str] = GroupAffinity()
    affinity.remember("g0", "lost")
    assert affinity.recall("g0", lambda server: server != "lost") is None
    assert affinity.recall("g0") == "lost"  # still remembered until placed again
    affinity.forget("g0")
    assert affinity.recall("g0") is None
