"""`rolloutlog whatif`'s fitted world: its censored draws, the late-arrival rate it fits
from the races the log could show, and the scenario it saves.

`test_whatif.py` holds the validation figures and the command.
"""

from __future__ import annotations

import math
import statistics
import tomllib

import attrs
import pytest

from rolloutlog.cli.whatif import fit_recorded
from rolloutlog.core.config import ConfigError
from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import scenario_from_mapping
from rolloutlog.runtime.sim.scenario_toml import scenario_toml
from rolloutlog.runtime.sim.streams import RandomStreams
from rolloutlog.runtime.sim.trace import RecordedEpisode, Trace
from rolloutlog.runtime.sim.trace_world import (
    CENSORED_INFLATION,
    OutcomePool,
    TraceTasks,
    TraceWorld,
)
from rolloutlog.runtime.sim.world import WorldModel
from rolloutlog.runtime.sim.world_config import WorldConfig
from rolloutlog.studies.whatif.fit import late_arrival_rate, observed_races
from tests.studies.whatif_runs import independent_scenario, recorded_log

# --- the fitted world ------------------------------------------------------------------


def episode(episode_id, seconds, outcome="completed", task="t1", **fields):
    return RecordedEpisode(
        episode_id=episode_id, task_id=task, outcome=outcome, seconds=seconds, **fields
    )


def trace_world(episodes, late_rate=0.0, seed=0):
    world = WorldConfig(late_arrival_rate=late_rate)
    return TraceWorld(Trace(seed=seed, episodes=tuple(episodes)), world, RandomStreams(seed))


def test_a_finished_episode_gets_its_recorded_outcome():
    world = trace_world([episode("g1/0", 7.0, reward=1.0, completion_tokens=70, prompt_tokens=9)])
    world.open_group("g1", "t1", 1, train=True)
    plan = world.plan("g1", 0, inflight=0, max_inflight=4)
    assert (plan.work_s, plan.reward, plan.completion_tokens, plan.prompt_tokens) == (
        7.0,
        1.0,
        70,
        9,
    )
    assert world.open_groups() == 0


@pytest.mark.parametrize("seed", range(20))
def test_a_cancelled_episode_runs_longer_than_its_cut_drawn_from_its_task(seed):
    finished = [episode(f"g9/{i}", float(i)) for i in range(1, 11)]  # task t1: 1..10 s
    other = [episode("g8/0", 50.0, task="t2")]
    world = trace_world([*finished, *other, episode("g1/0", 6.5, "censored")], seed=seed)
    world.open_group("g1", "t1", 1, train=True)
    plan = world.plan("g1", 0, 0, 4)
    assert plan.work_s in (7.0, 8.0, 9.0, 10.0)  # the task's outcomes longer than 6.5 s


@pytest.mark.parametrize("seed", range(10))
def test_a_censored_pick_only_raises_the_bound(seed):
    """Redistribute-to-the-right: past a censored episode, only longer outcomes remain."""
    recorded = [
        *(episode(f"g9/{i}", s) for i, s in enumerate((1.0, 2.0, 30.0))),
        episode("g9/3", 20.0, "censored"),  # ran at least 20 s: its mass goes past 20 s
        episode("g1/0", 10.0, "censored"),
    ]
    world = trace_world(recorded, seed=seed)
    world.open_group("g1", "t1", 1, train=True)
    assert world.plan("g1", 0, 0, 4).work_s == 30.0


def test_past_the_task_the_draw_takes_the_run_tail_at_the_task_scale():
    recorded = [
        episode("g9/0", 2.0),
        episode("g9/1", 4.0),  # t1: median 4 s (with the cut below), nothing past 6 s
        *(episode(f"g8/{i}", s, task="t2", completion_tokens=1000) for i, s in
          enumerate((10.0, 20.0, 40.0))),  # t2: median 20 s; 40 s is twice its median
        episode("g1/0", 6.0, "censored"),  # 1.5 x t1's median: only t2's 2 x remains
    ]  # fmt: skip
    world = trace_world(recorded)
    world.open_group("g1", "t1", 1, train=True)
    plan = world.plan("g1", 0, 0, 4)
    assert plan.work_s == 2.0 * 4.0 and plan.completion_tokens == 1000 * 4 // 20


def test_past_everything_recorded_a_cancelled_episode_gets_an_inflated_cut():
    recorded = [episode("g9/0", 3.0), episode("g8/0", 5.0, task="t2")]
    world = trace_world([*recorded, episode("g1/0", 80.0, "censored")])
    world.open_group("g1", "t1", 1, train=True)
    assert world.plan("g1", 0, 0, 4).work_s == 80.0 * CENSORED_INFLATION


def test_never_dispatched_members_draw_the_run_shape_at_their_task_scale():
    recorded = [
        *(episode(f"g9/{i}", s) for i, s in enumerate((1.0, 2.0, 3.0))),  # t1: median 2 s
        *(episode(f"g8/{i}", s, task="t2") for i, s in enumerate((10.0, 20.0, 60.0))),
    ]  # shape (in medians): 0.5, 1, 1.5 (t1) and 0.5, 1, 3 (t2)
    world = trace_world(recorded)
    world.open_group("g1", "t1", 16, train=True)
    world.open_group("g2", "t7", 16, train=True)  # t7 never finished an episode
    t1 = {world.plan("g1", m, 0, 4).work_s for m in range(16)}
    assert t1 <= {1.0, 2.0, 3.0, 6.0} and 6.0 in t1  # t2's long tail, at t1's scale
    stand_in = {world.plan("g2", m, 0, 4).work_s for m in range(16)}
    assert stand_in <= {1.0, 2.0, 3.0, 6.0} or stand_in <= {10.0, 20.0, 30.0, 60.0}


def test_a_draw_from_the_run_shape_is_held_under_the_generation_cap():
    """t2's tail (10 x its median) at t1's scale would run 400 s and 4,000 tokens; nothing
    the run finished ran past 60 s or 200 tokens, so that is where it stops."""
    recorded = [
        *(episode(f"g9/{i}", s, completion_tokens=100) for i, s in enumerate((20.0, 40.0, 60.0))),
        *(episode(f"g8/{i}", s, task="t2", completion_tokens=round(10 * s))
          for i, s in enumerate((1.0, 2.0, 20.0))),
    ]  # fmt: skip
    world = trace_world(recorded)
    world.open_group("g1", "t1", 64, train=True)
    plans = [world.plan("g1", m, 0, 4) for m in range(64)]
    assert max(p.work_s for p in plans) == 60.0 and max(p.completion_tokens for p in plans) == 200
    assert {p.work_s for p in plans} == {20.0, 40.0, 60.0}


def test_past_the_longest_finished_the_pool_stops_at_the_bound_reached():
    """Cuts beyond the longest finished episode say only "longer": walking on through them
    would put the draw past the longest cut. The unused part of `u` goes on with it."""
    pool = OutcomePool(
        [episode("g9/0", 1.0), episode("g9/1", 3.0)]
        + [episode(f"g8/{i}", s, "censored") for i, s in enumerate((20.0, 30.0))]
    )
    assert pool.draw(0.5, 3.5) == (None, 3.5, 0.5)  # nothing finished past 3.5 s
    drawn, bound, rest = pool.draw(0.5, 2.5)  # 3 s, 20 s (cut), 30 s (cut): picks the 20 s cut
    assert (drawn, bound) == (None, 20.0) and rest == pytest.approx(0.5)
    assert pool.draw(0.1, 2.5)[0] == pool.episodes[1]


def test_the_late_arrival_rate_counts_only_races_the_log_could_show():
    """2 late arrivals in 20 cancellations the log watched; 10 cut at shutdown (watched 0 s)
    could not show a lost race. Partly watched: weighted by the chance it would show."""
    finished = [episode(f"g9/{i}", float(i)) for i in range(1, 11)]  # 1..10 s
    watched = [episode(f"g1/{i}", 0.5, "censored", watched_s=100.0) for i in range(18)]
    late = [episode(f"g2/{i}", 4.0, task="t2", late=True, watched_s=100.0) for i in range(2)]
    shutdown = [episode(f"g3/{i}", 0.5, "censored", watched_s=0.0) for i in range(10)]
    episodes = [*finished, *watched, *late, *shutdown]
    assert late_arrival_rate(episodes) == pytest.approx(2 / 20)
    assert observed_races(episodes) == (2, pytest.approx(20.0))
    half = episode("g4/0", 0.5, "censored", watched_s=5.0)  # due by 5.5 s: 1..5 of 1..10
    assert observed_races([*episodes, half]) == (2, pytest.approx(20.5))
    score_at_rate = (
        2 / late_arrival_rate([*episodes, half])
        - 18 / (1 - late_arrival_rate([*episodes, half]))
        - 0.5 / (1 - 0.5 * late_arrival_rate([*episodes, half]))
    )
    assert score_at_rate == pytest.approx(0.0, abs=1e-6)  # the likelihood's maximum
    assert late_arrival_rate([*finished, *shutdown]) == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_a_cut_whose_race_the_log_could_not_show_draws_it(seed):
    """Late rate 1: a shutdown cut (watched 0 s) loses its race; a cut the log watched past
    its drawn outcome won it, as recorded; an arrival that was late stays late."""
    recorded = [
        *(episode(f"g9/{i}", float(i)) for i in range(1, 11)),
        episode("g1/0", 0.5, "censored", watched_s=0.0),
        episode("g1/1", 0.5, "censored", watched_s=100.0),
        episode("g1/2", 3.0, late=True, watched_s=100.0),
    ]
    world = trace_world(recorded, late_rate=1.0, seed=seed)
    world.open_group("g1", "t1", 3, train=True)
    races = [world.plan("g1", m, 0, 4).late_if_cancelled for m in range(3)]
    assert races == [True, False, True]
    world = trace_world(recorded, late_rate=0.0, seed=seed)
    world.open_group("g1", "t1", 3, train=True)
    assert [world.plan("g1", m, 0, 4).late_if_cancelled for m in range(3)] == [
        False,
        False,
        True,
    ]


@pytest.mark.parametrize("world_seed", [0, 1, 2])
def test_the_fitted_late_arrival_rate_is_the_lost_share_of_the_races_the_log_watched(
    tmp_path, monkeypatch, world_seed
):
    """No bias in the fit: the rate is the share of the recorded in-flight cancellations
    that truly lost their race (read from the true world's plans), within 10%.

    The sample itself is a binomial draw of the world's rate (a per-episode log of 200
    steps watches about 75 races), so the fit can be no closer to the world's rate than
    that; counting the shutdown cuts as won races (the fit before the MLE) drew 0.038 on
    a sample of 0.054.
    """
    lost: dict[str, bool] = {}
    plan = WorldModel.plan

    def recording(self, group_id, member, inflight, max_inflight):  # type: ignore[no-untyped-def]
        planned = plan(self, group_id, member, inflight, max_inflight)
        lost[f"{group_id}/{member}"] = planned.late_if_cancelled
        return planned

    monkeypatch.setattr(WorldModel, "plan", recording)
    path = tmp_path / "run.arrow"
    truth = attrs.evolve(independent_scenario("default").with_steps(200), seed=world_seed)
    run_policy(truth.with_policy("per-episode"), log_path=path)
    fitted, _, _ = fit_recorded(path, seed=world_seed + 1)
    watched = [
        e for e in fitted.trace.episodes
        if (e.late or e.outcome == "censored") and e.watched_s > 0.0
    ]  # fmt: skip
    share = sum(lost[e.episode_id] for e in watched) / len(watched)
    rate = fitted.scenario.world.late_arrival_rate
    assert len(watched) > 30 and share > 0.0
    assert abs(rate - share) <= 0.10 * share, (rate, share, len(watched))


@pytest.mark.parametrize("seed", range(3))
def test_a_race_the_log_never_saw_is_drawn_at_the_fitted_rate(seed):
    """Members the recorded run finished without a cut, or never dispatched, lose a race at
    the fitted rate (binomial, 4 standard deviations); a recorded late arrival always does;
    a cut the log watched past its outcome never does."""
    rate, size = 0.25, 400
    recorded = [episode(f"g1/{m}", 1.0 + m % 10) for m in range(size // 2)]  # finished
    recorded += [episode("g2/0", 3.0, late=True, watched_s=100.0)]
    recorded += [episode("g2/1", 0.5, "censored", watched_s=100.0)]
    world = trace_world(recorded, late_rate=rate, seed=seed)
    world.open_group("g1", "t1", size, train=True)  # half finished, half never dispatched
    races = [world.plan("g1", m, 0, 4).late_if_cancelled for m in range(size)]
    for half in (races[: size // 2], races[size // 2 :]):
        sd = math.sqrt(len(half) * rate * (1.0 - rate))
        assert abs(sum(half) - rate * len(half)) <= 4.0 * sd, sum(half)
    world.open_group("g2", "t1", 2, train=True)
    assert [world.plan("g2", m, 0, 4).late_if_cancelled for m in range(2)] == [True, False]


def test_a_cut_episode_draws_as_long_as_it_truly_ran(tmp_path):
    """On an `all` log (many straggler cuts), the durations drawn for the cut episodes
    average within 5% of what they truly ran, read from the true world's per-episode run
    (the same seeded world: every episode there ran to its end)."""
    steps = 60
    log, _ = recorded_log(tmp_path, "default", "all", steps)
    truth_log, _ = recorded_log(tmp_path, "default", "per-episode", steps)
    fitted, _, _ = fit_recorded(log, seed=0)
    true_s = {
        e.episode_id: e.seconds
        for e in fit_recorded(truth_log, seed=0)[0].trace.episodes
        if e.outcome != "censored"
    }
    tasks = TraceTasks(fitted.trace)
    cut = [e for e in fitted.trace.episodes if e.outcome == "censored" and e.episode_id in true_s]
    quantiles = [(k + 0.5) / 64 for k in range(64)]
    drawn = [
        statistics.fmean(tasks.draw(e.task_id, u, e.seconds).seconds for u in quantiles)
        for e in cut
    ]
    want = statistics.fmean(true_s[e.episode_id] for e in cut)
    assert len(cut) > 200
    assert abs(statistics.fmean(drawn) - want) <= 0.05 * want, (statistics.fmean(drawn), want)


def test_a_fitted_world_saves_as_a_scenario_and_loads_back(tmp_path):
    log, _ = recorded_log(tmp_path, "chaos", "per-episode", steps=8)
    fitted, _, _ = fit_recorded(log, seed=5)
    text = scenario_toml(fitted.scenario)
    loaded = scenario_from_mapping(tomllib.loads(text), name=fitted.scenario.name)
    assert loaded == fitted.scenario
    trace = fitted.trace
    assert trace.seed == 5 and trace.controls and trace.batches
    assert {e.outcome for e in trace.episodes} == {"completed", "failed", "censored"}


def test_a_bad_trace_table_is_refused_by_name():
    base = {"run": {}, "world": {}}
    bad = {
        "trace": {"episodes": {"episode_id": ["g1/0"], "task_id": ["t1"], "seconds": [1.0]}},
    }
    with pytest.raises(ConfigError, match=r"trace\]\.episodes: missing column 'outcome'"):
        scenario_from_mapping({**base, **bad})
    bad["trace"]["episodes"]["outcome"] = ["finished"]
    with pytest.raises(ConfigError, match=r"episodes\.outcome\[0\]: must be one of"):
        scenario_from_mapping({**base, **bad})
    bad["trace"]["episodes"]["outcome"] = ["completed"]
    bad["trace"]["episodes"]["seconds"] = ["long"]
    with pytest.raises(ConfigError, match=r"episodes\.seconds\[0\]: must be float"):
        scenario_from_mapping({**base, **bad})
