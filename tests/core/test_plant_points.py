"""Every planted fault of the account's suites finds points to plant in its worlds.

A plant that finds no point in a log leaves the log undamaged, and its property passes
without checking anything: when a preset or a check changes, a fault can go quiet that way
(four did, or nearly: the ship wait's worlds came to hold no open group beside a full
batch, a plant read the leftover books that a run-on account no longer keeps, verl's lone
budget was seldom spent with nothing open, and the bounded queue's worlds seldom held part
of a group). Here each fault's own worlds are drawn, derandomized,
and at least one in twenty must offer a point: fewer, and the properties (25 examples under
the mutation profile of scripts/mutation.sh) judge the fault on one log or none.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from rolloutlog.events.types import Event
from rolloutlog.testing.strategies import world_logs
from tests.core import (
    test_account_damage,
    test_account_faults,
    test_account_faults_field,
    test_account_faults_more,
    test_account_faults_partial,
    test_account_faults_sink,
)
from tests.core.mask_plants import ships_an_end_at
from tests.core.planted_faults import Plant, first_plant

EXAMPLES = 100  # four times the mutation profile's 25 (tests/conftest.py)
LEAST = 5  # of them with a point to plant
Finds = Callable[[list[Event]], bool]


def _plants() -> dict[str, tuple[Finds, st.SearchStrategy[list[Event]]]]:
    """Each suite's faults: whether a log has a point to plant one, and its worlds."""

    def finds(plant: Plant) -> Finds:
        return lambda log: first_plant(log, plant) is not None

    every: dict[str, tuple[Finds, st.SearchStrategy[list[Event]]]] = {}
    for suite in (test_account_faults, test_account_faults_sink, test_account_faults_field):
        worlds = suite.WORLDS
        for name, (_, plant) in suite.FAULTS.items():
            every[f"{suite.__name__}: {name}"] = (
                finds(plant),
                worlds[name] if suite is test_account_faults_field else worlds.get(name, _PLAIN),
            )
    for name, (_, plant, worlds) in test_account_faults_more.FAULTS.items():
        every[f"more: {name}"] = (finds(plant), worlds)
    for name, (_, worlds, plant) in test_account_faults_partial.FAULTS.items():
        every[f"partial: {name}"] = (finds(plant), worlds)
    for name, (worlds, plant) in test_account_faults_partial.TAKEN.items():
        every[f"partial, its boundary: {name}"] = (finds(plant), worlds)
    every["more, its boundary: an end at the bound"] = (
        finds(ships_an_end_at(0)),
        test_account_faults_more._MASK,
    )
    for name, damage in test_account_damage.DAMAGES.items():
        every[f"damage: {name}"] = (lambda log, damage=damage: damage(log) is not None, _PLAIN)
    return every


_PLAIN = world_logs(max_steps=60)  # the suites' worlds where a fault names none of its own
PLANTS = _plants()


@pytest.mark.parametrize("fault", sorted(PLANTS))
def test_a_fault_finds_points_to_plant_in_its_worlds(fault: str) -> None:
    finds, worlds = PLANTS[fault]
    found: list[bool] = []

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(worlds)
    def draw(log: list[Event]) -> None:
        found.append(finds(log))

    draw()
    assert sum(found) >= LEAST, f"{fault}: a point to plant in {sum(found)} of {len(found)} logs"
