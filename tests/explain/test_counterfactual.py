"""`explain --without CAUSE`: the fitted world re-decided with one cause removed."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from rolloutlog.core.config import RunConfig
from rolloutlog.events.log_writer import write_log
from rolloutlog.events.types import Event
from rolloutlog.runtime.sim.simulation import simulate
from rolloutlog.studies.counterfactual import WORLD, counterfactual
from rolloutlog.studies.whatif.fit import fit_log
from tests.explain.tiny_world import TinyWorld
from tests.invoke import run
from tests.runtime.sim.sim_helpers import slow_update_run


def _paused_run() -> list[Event]:
    """Rollouts of 1 s, training 1 s, updates 2.5 s (the known answer's world)."""
    config = RunConfig(group_size=2, batch_size=4, max_inflight=8)
    return TinyWorld(config, lambda e: 1.0, train_s=1.0, update_s=lambda step: 2.5).run(6)


def test_the_baseline_is_the_recorded_run_and_instant_updates_gain_their_time() -> None:
    log = _paused_run()
    found = counterfactual(log, "pause")
    recorded = {e.step: e.t for e in log if e.kind == "batch_shipped"}  # type: ignore[attr-defined]
    assert found.baseline == recorded  # the recorded policy re-run on its own world: exact
    # Batch k + 2 waits for v_k (the ship hold, target_lag 1): each update before it
    # delays it by its 2.5 s. Steps 4, 5, 6 come after one, two, three of them.
    earlier = [earlier for _, _, earlier in found.steps()]
    assert earlier == pytest.approx([0.0, 0.0, 0.0, 2.5, 5.0, 7.5], abs=1e-9)
    assert found.gain_s() == pytest.approx(7.5, abs=1e-9)
    assert found.world == WORLD


@st.composite
def quiet_runs(draw: st.DrawFn) -> list[Event]:
    """Runs with no failure, no weight-update time and rollouts of random lengths."""
    group_size = draw(st.integers(1, 4))
    config = RunConfig(
        group_size=group_size,
        batch_size=group_size * draw(st.integers(1, 3)),
        max_inflight=draw(st.integers(1, 12)),
        max_off_policy_steps=draw(st.integers(0, 3)),
        target_lag=0,
    )
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    lengths: dict[str, float] = {}

    def duration(episode_id: str) -> float:
        return lengths.setdefault(episode_id, round(rng.uniform(0.5, 3.0), 2))

    train_s = draw(st.sampled_from([0.1, 1.0, 5.0]))
    return TinyWorld(config, duration, train_s=train_s).run(draw(st.integers(2, 6)))


@given(quiet_runs(), st.sampled_from(["pause", "failures", "drops"]))
def test_removing_a_cause_the_run_never_hit_changes_nothing(log: list[Event], cause: str) -> None:
    # "Never hit" on the world the counterfactual runs on: the fitted world re-run as
    # recorded. pause and failures cannot be hit here; drops only where nothing went stale.
    scenario = fit_log(log).scenario
    stale: list[Event] = []
    simulate(
        scenario,
        on_events=lambda events: stale.extend(
            e for e in events if getattr(e, "reason", None) in ("stale", "requeue")
        ),
    )
    assume(cause != "drops" or not stale)
    found = counterfactual(log, cause)
    assert found.without == found.baseline
    assert found.gain_s() == 0.0


def test_explain_without_says_which_world_and_what_the_run_would_gain(tmp_path: Path) -> None:
    log = tmp_path / "paused.arrow"
    write_log(log, _paused_run())
    result = run("explain", str(log), "--without", "pause")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("without pause: weight updates instantaneous\nworld: whatif")
    assert "would ship its 6 steps 7.5 s sooner (60.0% of 12.5 s" in result.output
    found = json.loads(run("explain", str(log), "--without", "pause", "--json").output)
    assert found["gain_s"] == pytest.approx(7.5, abs=1e-5) and found["world"] == WORLD
    refused = run("explain", str(log), "--without", "luck")
    assert refused.exit_code == 2 and "luck" in refused.output


def test_instant_updates_of_a_run_that_interrupts_at_each_update() -> None:
    # Found on an areal-preset log: an update of no time at all left the simulator's
    # interrupt rule nothing to interrupt around (an InconsistentLogError); it takes 1 µs.
    events, _ = slow_update_run(3, **{"run.weight_update": "interrupt"})
    found = counterfactual(events, "pause")
    assert found.gain_s() is not None and found.gain_s() > 0


def test_stragglers_and_gate_removed_from_a_run_that_never_hit_them_change_nothing() -> None:
    # One group in flight at a time, rollouts of 1 s, training 0.5 s, instant updates:
    # every rollout is as long as the 99th percentile, and the trainer publishes v_k
    # before batch k + 1 could need it, so neither the gate nor the hold ever binds.
    config = RunConfig(group_size=2, batch_size=2, max_inflight=2)
    log = TinyWorld(config, lambda episode_id: 1.0).run(8)
    for cause in ("stragglers", "gate"):
        found = counterfactual(log, cause)
        assert found.without == found.baseline, cause
