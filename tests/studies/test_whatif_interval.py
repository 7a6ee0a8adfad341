"""`rolloutlog whatif`: the 95% interval of the discarded count under straggler cuts.

Under `all` the discarded count is the lost races of the cut episodes, and the fitted
late-arrival rate they are drawn at comes from the few races the recorded log showed
(docs/whatif.md). `studies/whatif/interval.py` turns those races into an interval; these
tests pin its arithmetic, the races the simulator counts for it, and, on seeded worlds
against the simulator's truth, how often it holds the truth.
"""

from __future__ import annotations

import json
import math
import random

import attrs
import pytest
from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.cli.whatif import INTERVAL_KEY, discarded_interval_for, fit_recorded
from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.metrics import SimMetrics
from rolloutlog.runtime.sim.streams import RandomStreams
from rolloutlog.runtime.sim.trace import RecordedEpisode, Trace
from rolloutlog.runtime.sim.trace_world import TraceWorld
from rolloutlog.runtime.sim.world import EpisodePlan, Task
from rolloutlog.runtime.sim.world_config import WorldConfig
from rolloutlog.studies.whatif.interval import (
    RaceSample,
    beta_cdf,
    discarded_interval,
    lost_races_interval,
    rate_interval,
)
from tests.studies.whatif_runs import independent_scenario


def episode(episode_id: str, seconds: float, outcome: str = "completed", **fields):  # type: ignore[no-untyped-def]
    return RecordedEpisode(
        episode_id=episode_id, task_id="t1", outcome=outcome, seconds=seconds, **fields
    )


def trace_world(episodes: list[RecordedEpisode], late_rate: float) -> TraceWorld:
    world = WorldConfig(late_arrival_rate=late_rate)
    return TraceWorld(Trace(seed=0, episodes=tuple(episodes)), world, RandomStreams(0))


# --- the arithmetic ----------------------------------------------------------------------


@pytest.mark.parametrize("x", [0.01, 0.2, 0.5, 0.77, 0.99])
def test_the_beta_cdf_matches_its_closed_forms(x: float) -> None:
    assert beta_cdf(x, 0.5, 0.5) == pytest.approx(2.0 / math.pi * math.asin(math.sqrt(x)))
    assert beta_cdf(x, 3.0, 1.0) == pytest.approx(x**3)
    assert beta_cdf(x, 1.0, 40.5) == pytest.approx(1.0 - (1.0 - x) ** 40.5)
    assert beta_cdf(x, 2.0, 2.0) == pytest.approx(3 * x**2 - 2 * x**3)


def test_the_rate_interval_is_jeffreys() -> None:
    """Beta(k + 1/2, n - k + 1/2)'s 2.5% and 97.5% points; nothing late: 0 below."""
    sample = RaceSample(17, 268.0)
    low, high = rate_interval(sample)
    assert beta_cdf(low, 17.5, 251.5) == pytest.approx(0.025, abs=1e-9)
    assert beta_cdf(high, 17.5, 251.5) == pytest.approx(0.975, abs=1e-9)
    assert low < 17 / 268 < high
    assert rate_interval(RaceSample(0, 50.0))[0] == 0.0


def test_the_lost_races_interval_is_the_beta_binomial_one() -> None:
    """Against a seeded draw: the rate from the posterior, then the races at that rate."""
    sample, races = RaceSample(17, 268.0), 2000
    rng = random.Random(7)
    a, b = sample.posterior
    draws = sorted(
        sum(rng.random() < p for _ in range(races))
        for p in (rng.betavariate(a, b) for _ in range(4000))
    )
    low, high = lost_races_interval(sample, races)
    assert abs(low - draws[100]) <= 4 and abs(high - draws[3900]) <= 8, (low, high, draws[100])
    assert lost_races_interval(sample, 0) == (0, 0)


def test_the_discarded_interval_keeps_the_rest_of_the_count() -> None:
    sample = RaceSample(17, 268.0)
    low, high = lost_races_interval(sample, 5000)
    assert discarded_interval(330, 300, 5000, sample) == (30 + low, 30 + high)
    with pytest.raises(ValueError, match="cannot be part of"):
        discarded_interval(10, 20, 5000, sample)
    with pytest.raises(ValueError, match="race sample"):
        RaceSample(3, 2.0)


# --- the races the simulator counts --------------------------------------------------------


def test_the_trace_world_says_which_races_it_drew() -> None:
    """A recorded late arrival and a cut watched past its outcome are the log's facts; a
    shutdown cut (watched 0 s) and a member never cut draw at the rate."""
    recorded = [
        *(episode(f"g9/{i}", float(i)) for i in range(1, 11)),
        episode("g1/0", 0.5, "censored", watched_s=0.0),
        episode("g1/1", 0.5, "censored", watched_s=100.0),
        episode("g1/2", 3.0, late=True, watched_s=100.0),
        episode("g1/3", 3.0),
    ]
    world = trace_world(recorded, late_rate=0.5)
    world.open_group("g1", "t1", 4, train=True)
    drawn = [world.plan("g1", m, 0, 4).race_drawn for m in range(4)]
    assert drawn == [True, False, False, True]


def _plan(*, drawn: bool = True, failed: bool = False, late: bool = True) -> EpisodePlan:
    return EpisodePlan(
        task=Task(100.0, 0.5),
        train=True,
        work_s=5.0,
        failed=failed,
        reward=1.0,
        completion_tokens=100,
        late_if_cancelled=late,
        race_drawn=drawn,
    )


def test_the_metrics_count_drawn_races_that_would_discard_a_rollout() -> None:
    metrics = SimMetrics()
    races = [
        (_plan(), "straggler"),  # counted, and arrives late
        (_plan(late=False), "stale"),  # counted, wins
        (_plan(drawn=False), "straggler"),  # a recorded fact
        (_plan(failed=True), "straggler"),  # a failure discards no finished rollout
        (_plan(), "shutdown"),  # never arrives
    ]
    for plan, reason in races:
        metrics.on_race(plan, reason)
    for index, (plan, reason) in enumerate(races):
        if plan.late_if_cancelled and reason != "shutdown":
            metrics.on_arrived(f"g1/{index}", plan, reason)
    assert (metrics.drawn_races, metrics.drawn_late) == (2, 1)
    assert metrics.late_arrivals == 3 and metrics.finished_discarded == 2
    assert "drawn_races" not in metrics.as_dict(100.0, 10.0)


# --- coverage against the truth -------------------------------------------------------------

COVERAGE_WORLDS = range(12)
COVERAGE_STEPS = 40
MIN_COVERED = 10  # of 12


def test_the_discarded_interval_under_all_holds_the_truth_in_most_worlds(tmp_path) -> None:
    """On 12 seeded worlds of the tight scenario (40 steps), a per-episode log's what-if
    under `all`: the truth's discarded count lies in the 95% interval in at least 10.

    At a true coverage of 95% that happens with probability 0.98 (at most 2 misses in 12);
    at 70%, 0.25. The same interval with the rate taken as known (the true run's binomial
    draw at the fitted rate only, as if its race sample were a million times larger) holds
    the truth in fewer than 10: a 40-step log shows 53-201 races, so the rate is good only
    to about 40%, and the bound fails an interval that ignores that.
    """
    covered = covered_known_rate = 0
    for world in COVERAGE_WORLDS:
        truth = attrs.evolve(independent_scenario("tight").with_steps(COVERAGE_STEPS), seed=world)
        log = tmp_path / f"world{world}.arrow"
        run_policy(truth.with_policy("per-episode"), log_path=log)
        want = run_policy(truth.with_policy("all"))[0]["finished_rollouts_discarded"]
        fitted, _, _ = fit_recorded(log, seed=world + 100)  # not the truth's race draws
        scenario = fitted.scenario.with_steps(COVERAGE_STEPS).with_policy("all")
        got, result = run_policy(scenario)  # as `run_whatif`
        interval = discarded_interval_for(scenario, got, result, fitted.races)
        if interval is None:
            raise AssertionError("no interval under all")
        covered += interval[0] <= want <= interval[1]
        sample = fitted.races
        known = RaceSample(sample.late * 10**6, sample.seen * 10**6)
        low, high = discarded_interval(
            got["finished_rollouts_discarded"], result.drawn_late, result.drawn_races, known
        )
        covered_known_rate += low <= want <= high
    assert covered >= MIN_COVERED, (covered, covered_known_rate)
    assert covered_known_rate < MIN_COVERED, (covered, covered_known_rate)


# --- the command -----------------------------------------------------------------------


def test_whatif_prints_the_interval_under_straggler_cuts_only(tmp_path) -> None:
    log = tmp_path / "run.arrow"
    truth = independent_scenario("default").with_steps(10).with_policy("per-episode")
    run_policy(truth, log_path=log)
    result = CliRunner().invoke(main, ["whatif", str(log), "--compare", "per-episode,all"])
    assert result.exit_code == 0, result.output
    assert "(95%: " in result.stdout and "races seen (95%: " in result.stdout
    report = json.loads(
        CliRunner()
        .invoke(main, ["whatif", str(log), "--compare", "per-episode,all", "--json"])
        .stdout
    )
    policies = report["policies"]
    assert policies["per-episode"][INTERVAL_KEY] is None
    low, high = policies["all"][INTERVAL_KEY]
    assert low <= policies["all"]["finished_rollouts_discarded"] <= high
    assert INTERVAL_KEY not in report["recorded"]
    rate_set = CliRunner().invoke(
        main, ["whatif", str(log), "--compare", "all", "--json", "--set", "late_arrival_rate=0.1"]
    )
    assert rate_set.exit_code == 0, rate_set.output
    assert json.loads(rate_set.stdout)["policies"]["all"][INTERVAL_KEY] is None
