"""Several trainer updates per weight sync (`updates_per_sync = K`): the simulated trainer
announces a version after every K-th batch only, the gate and the ship hold allow the sync
interval, and the account holds a run to the K it recorded."""

from __future__ import annotations

import attrs

from rolloutlog.events.types import Event
from rolloutlog.replay.fold import fold_events
from rolloutlog.runtime.sim.scenario import load_scenario
from tests.runtime.sim.sim_helpers import run_collect


def _log(k: int) -> list[Event]:
    """12 steps of the default scenario, checked on every event (the account raises)."""
    scenario = load_scenario("default", overrides={"run.updates_per_sync": k})
    return run_collect(scenario.with_steps(12))[0]


def test_versions_come_every_k_batches_and_the_run_keeps_its_properties() -> None:
    log = _log(3)
    versions = [e.version for e in log if e.kind == "version_pending"]
    assert versions and all(v % 3 == 0 for v in versions)
    assert sum(e.kind == "batch_shipped" for e in log) == 12
    fold = fold_events(log).fold
    assert fold is not None and fold.summary()["invariant_violations"] == []


def test_the_same_log_recorded_with_a_sync_every_batch_breaks_the_ship_hold() -> None:
    log = _log(3)
    config = {k: v for k, v in log[0].config.items() if k != "updates_per_sync"}
    fold = fold_events([attrs.evolve(log[0], config=config), *log[1:]]).fold
    assert fold is not None
    assert any("before the ship hold lifts" in v for v in fold.summary()["invariant_violations"])
