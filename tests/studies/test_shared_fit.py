"""The shared world fitted from one log (`studies.whatif.shared_fit`, `whatif --world
shared`): it recovers the parameters of simulated logs whose truth is known, warns when a
policy runs outside the log's range, and its saved world round-trips through `simulate`.

The stated errors, from one log of a world with `step(n) = 0.02 + 0.002·n`:
- the decode step at the log's concurrency within 10% (a log that holds one number in
  flight identifies the step there, not `a` and `b` apart: three probes do that,
  `test_decode_fit.py`);
- the trainer's fixed and per-token seconds within 2% (no jitter), the update pause
  within 1%; with jitter, the draws' means the log's (the parts over `exp(jitter²/2)`);
  the colocated coupling 0.5 within 0.2, and none found where there is none.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.events.types import Event
from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import Scenario, load_scenario, scenario_from_mapping
from rolloutlog.studies.whatif.fit import collect, fit_log, train_windows
from rolloutlog.studies.whatif.kv_logs import KNOWN_RUN, KNOWN_WORLD
from rolloutlog.studies.whatif.shared_fit import (
    SharedFit,
    fit_shared,
    range_warnings,
    shared_scenario,
)

# The known world's costs (`KNOWN_WORLD`), which the fit should recover.
STEP_S, PER_SEQ_S = KNOWN_WORLD["decode_step_s"], KNOWN_WORLD["decode_s_per_seq"]
TRAIN_STEP_S, TRAIN_S_PER_TOKEN = KNOWN_WORLD["train_step_s"], KNOWN_WORLD["train_s_per_token"]
UPDATE_S, COUPLING = KNOWN_WORLD["weight_update_s"], 0.5
STEP_ERROR, TRAINER_ERROR, COUPLING_ERROR = 0.10, 0.02, 0.2


def _truth(max_inflight: int, colocated: bool, steps: int = 30) -> Scenario:
    world: dict[str, Any] = dict(KNOWN_WORLD)
    if colocated:
        world |= {"colocated": True, "colocation_coupling": COUPLING}
    run = {**KNOWN_RUN, "max_inflight": max_inflight}
    return scenario_from_mapping({"steps": steps, "seed": 1, "run": run, "world": world})


def _fit(scenario: Scenario) -> SharedFit:
    events: list[Event] = []
    from rolloutlog.runtime.sim.simulation import simulate

    simulate(scenario, on_events=events.extend)
    return fit_shared(collect(events), fit_log(events), servers=1)


@pytest.mark.parametrize("max_inflight", [16, 64])
@pytest.mark.parametrize("colocated", [False, True])
def test_one_log_recovers_the_step_the_trainer_and_the_coupling(
    max_inflight: int, colocated: bool
) -> None:
    fit = _fit(_truth(max_inflight, colocated))
    running = (fit.decode.running_min + fit.decode.running_max) / 2
    assert fit.decode.step_s(running) == pytest.approx(STEP_S + PER_SEQ_S * running, rel=STEP_ERROR)
    world = fit.world
    assert world["colocated"] is colocated
    assert world["colocation_coupling"] == pytest.approx(COUPLING if colocated else 0.0,
                                                         abs=COUPLING_ERROR)  # fmt: skip
    trainer_error = TRAINER_ERROR + (COUPLING_ERROR / (1 + COUPLING) if colocated else 0.0)
    assert world["train_step_s"] == pytest.approx(TRAIN_STEP_S, rel=trainer_error)
    assert world["train_s_per_token"] == pytest.approx(TRAIN_S_PER_TOKEN, rel=trainer_error)
    keys = {p.key: p for p in fit.parameters}
    assert keys["weight_update_s"].value == pytest.approx(UPDATE_S, rel=0.01)
    assert f"{fit.decode.running_min:.1f}" in keys["decode_compute_s_per_seq"].basis


def test_the_fitted_world_reruns_the_recorded_policy_near_its_figures(tmp_path: Path) -> None:
    """The recorded policy on the fitted shared world: throughput within 10%."""
    truth = _truth(64, colocated=False)
    log = tmp_path / "truth.arrow"
    recorded, _ = run_policy(truth, log_path=log)
    answer = _whatif_json(log)
    rerun = answer["policies"][recorded["policy"]]
    assert rerun["trained_episodes_per_hour"] == pytest.approx(
        recorded["trained_episodes_per_hour"], rel=0.10
    )
    assert answer["fit"]["warnings"] == []


def _whatif_json(log: Path, *options: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["whatif", str(log), "--json", *options])
    assert result.exit_code == 0, result.output
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def test_a_policy_beyond_the_log_is_warned_of_naming_the_figure(tmp_path: Path) -> None:
    truth = _truth(16, colocated=False, steps=8)
    log = tmp_path / "narrow.arrow"
    run_policy(truth, log_path=log)
    result = CliRunner().invoke(main, ["whatif", str(log), "--set", "max_inflight=128"])
    assert result.exit_code == 0, result.output
    assert "warning: per-episode: up to 128 running requests per server" in result.stderr
    assert "the log shows 16-16" in result.stderr
    fit = _fit(truth)
    inside = range_warnings(fit, shared_scenario(fit_log_of(log), fit), "per-episode")
    assert inside == []


def test_a_policy_a_gate_holds_below_the_log_is_warned_of_after_its_run(tmp_path: Path) -> None:
    """Fast inference beside a slow trainer, a per-episode log at up to 64 running,
    what-if'd into prime-rl at the same `max_inflight`: its gate holds a few in flight,
    fewer than the log ever ran, which the run's own mean shows (before the run only
    `max_inflight`, in range, is known); the recorded policy is not warned of."""
    fast = {"decode_step_s": 0.002, "decode_s_per_seq": 0.0002, "episode_overhead_s": 0.1}
    world = {**KNOWN_WORLD, **fast}
    run = {**KNOWN_RUN, "max_inflight": 64}
    log = tmp_path / "wide.arrow"
    truth = scenario_from_mapping({"steps": 12, "seed": 1, "run": run, "world": world})
    run_policy(truth, log_path=log)
    answer = _whatif_json(log, "--compare", "prime-rl,per-episode")
    (line,) = answer["fit"]["warnings"]
    assert line.startswith("prime-rl: ran ") and "running requests per server on average" in line
    running = float(line.split()[2])
    low = answer["fit"]["ranges"][0]["low"]
    assert running * 1.1 < low and f"the log shows {low:,.0f}-" in line


def fit_log_of(log: Path) -> Any:
    from rolloutlog.replay.source import open_log

    return fit_log(open_log(log).events())


def test_the_saved_world_round_trips_through_simulate(tmp_path: Path) -> None:
    truth = _truth(32, colocated=True, steps=6)
    log, saved = tmp_path / "run.arrow", tmp_path / "world.toml"
    run_policy(truth, log_path=log)
    answer = _whatif_json(log, "--save-world", str(saved))
    world = load_scenario(str(saved)).world
    assert world.inference == "shared" and world.colocated
    fitted = {p["key"]: p["value"] for p in answer["fit"]["parameters"]}
    assert world.decode_compute_s_per_seq == fitted["decode_compute_s_per_seq"]
    assert world.train_step_s == fitted["train_step_s"]
    simulated = CliRunner().invoke(main, ["simulate", "--scenario", str(saved), "--json"])
    assert simulated.exit_code == 0, simulated.output
    again = json.loads(simulated.stdout)
    rerun = answer["policies"]["per-episode"]
    for key in ("trained_episodes_per_hour", "episodes_dropped_stale", "mean_trained_age"):
        assert again[key] == rerun[key], key


def test_whatif_plot_draws_the_fitted_curve(tmp_path: Path) -> None:
    log = tmp_path / "run.arrow"
    run_policy(_truth(16, colocated=False, steps=4), log_path=log)
    plot = tmp_path / "fit.png"
    result = CliRunner().invoke(main, ["whatif", str(log), "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    assert plot.stat().st_size > 10_000


def test_a_log_the_shared_fit_cannot_use_is_one_line_exit_2(tmp_path: Path) -> None:
    log = tmp_path / "short.arrow"
    tiny = _truth(2, colocated=False, steps=1).with_run(group_size=2, batch_size=4)
    run_policy(tiny, log_path=log)
    result = CliRunner().invoke(main, ["whatif", str(log)])
    assert result.exit_code == 2, result.output
    line = f"rolloutlog: error: {log}: cannot fit the shared world: the log has "
    assert line in result.stderr and len(result.stderr.strip().splitlines()) == 1
    replay = CliRunner().invoke(main, ["whatif", str(log), "--world", "replay"])
    assert replay.exit_code == 0, replay.output


def test_a_jittered_trainer_is_fitted_to_train_as_many_seconds_as_the_log() -> None:
    """The world draws a batch's time as its parts times `exp(jitter·z)` (and an update
    as the update's): the parts are the log's least squares over `exp(jitter²/2)`, so that
    the draws' means are the log's (undivided, a jitter of 0.5 trained 13% slower)."""
    events: list[Event] = []
    from rolloutlog.runtime.sim.simulation import simulate

    world = {**KNOWN_WORLD, "trainer_jitter": 0.5}
    run = {**KNOWN_RUN, "max_inflight": 16}
    simulate(scenario_from_mapping({"steps": 30, "seed": 1, "run": run, "world": world}),
             on_events=events.extend)  # fmt: skip
    collector = collect(events)
    fit = fit_shared(collector, fit_log(events), servers=1)
    keys, jitter = fit.world, fit.world["trainer_jitter"]
    assert jitter == pytest.approx(0.5, abs=0.2)
    single = [w for w in train_windows(collector) if w.batches == 1]
    drawn = [(keys["train_step_s"] + keys["train_s_per_token"] * w.tokens) for w in single]
    mean = statistics.fmean(w.end - w.start for w in single)
    assert statistics.fmean(drawn) * math.exp(jitter**2 / 2) == pytest.approx(mean, rel=1e-6)
    recorded = fit_log(events).scenario.world.weight_update_s
    assert keys["weight_update_s"] * math.exp(jitter**2 / 2) == pytest.approx(recorded)
