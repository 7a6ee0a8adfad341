"""`rolloutlog whatif`: the validation figures and the command.

The validation tests are the issue's checks at test size (short runs): the recorded policy
re-run on its own fitted world reproduces the recorded figures within 5%, and a what-if
under another policy lands within 10% of simulating that policy on the true world.
`benchmarks/whatif.py` runs the same checks longer and prints the errors. The fitted world
itself (its censored draws, its late-arrival rate) is `test_whatif_fit.py`'s.
"""

from __future__ import annotations

import json
import math

import attrs
import pytest
from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.cli.whatif import fit_recorded, run_whatif
from rolloutlog.runs.simulate import run_policy
from rolloutlog.studies.whatif.fit import observed_races
from tests.studies.whatif_runs import FIGURES, independent_scenario, recorded_log, relative_errors

# --- validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "policy"),
    [("default", "per-episode"), ("default", "per-group"), ("chaos", "all")],
)
def test_the_recorded_policy_rerun_reproduces_the_recorded_figures(tmp_path, scenario, policy):
    log, _ = recorded_log(tmp_path, scenario, policy, steps=25)
    fitted, recorded, _ = fit_recorded(log, seed=0)
    runs, _ = run_whatif(fitted.scenario, [policy])
    errors = relative_errors(runs[policy], recorded)
    assert max(errors.values()) <= 0.05, errors


def late_arrival_margin(fitted_episodes, what_if: dict) -> float:
    """Three standard deviations of the late completions a what-if run predicts.

    Whether an abort loses its race is seen only on the recorded in-flight cancellations
    whose late arrival the log could show (`observed_races`: a per-episode log of 60 steps
    has about 20), so the fitted rate is a binomial estimate from that many
    (Agresti-Coull, honest for few); the true run's late arrivals are a binomial draw of
    their own. The what-if count is its cancellations times the rate: a prediction with
    both variances.
    """
    late, seen = observed_races(fitted_episodes)
    cancelled = sum(what_if["episodes_cancelled"].values())
    rate = (late + 2.0) / (seen + 4.0)
    estimate_var = cancelled**2 * rate * (1.0 - rate) / (seen + 4.0)
    draw_var = cancelled * rate * (1.0 - rate)
    return 3.0 * math.sqrt(estimate_var + draw_var)


@pytest.mark.parametrize("scenario", ["default", "tight"])
@pytest.mark.parametrize(
    ("recorded_policy", "what_if"),
    [
        ("per-episode", "per-group"),
        ("per-group", "per-episode"),
        ("per-episode", "all"),
        ("all", "per-episode"),
    ],
)
def test_whatif_lands_near_simulating_the_other_policy_on_the_true_world(
    tmp_path, scenario, recorded_policy, what_if
):
    """Within 10%; under `all`, finished rollouts discarded within 10% plus the noise of
    the late arrivals.

    Under `all` nearly every discarded rollout is a completion that arrived after its
    straggler cut: on a 60-step run a few dozen, fewer than the binomial noise of the
    late-arrival rate a per-episode log shows allows to hold to 10% (docs/whatif.md).
    """
    steps = 60
    log, _ = recorded_log(tmp_path, scenario, recorded_policy, steps)
    fitted, _, _ = fit_recorded(log, seed=1)  # seed 0 would share the truth's races
    runs, _ = run_whatif(fitted.scenario.with_steps(steps), [what_if])
    truth, _ = run_policy(independent_scenario(scenario).with_steps(steps).with_policy(what_if))
    got = runs[what_if]
    errors = relative_errors(got, truth)
    assert errors["trained_episodes_per_hour"] <= 0.10, errors
    assert errors["mean_trained_age"] <= 0.10, errors
    key = "finished_rollouts_discarded"
    margin = late_arrival_margin(fitted.trace.episodes, got) if what_if == "all" else 0.0
    assert abs(got[key] - truth[key]) <= 0.10 * truth[key] + margin, (got[key], truth[key], margin)


# --- the command -----------------------------------------------------------------------


def test_whatif_json_has_the_keys_of_simulate_json(tmp_path):
    log, _ = recorded_log(tmp_path, "smoke", "per-episode", steps=5)
    world = tmp_path / "world.toml"
    plot = tmp_path / "whatif.png"
    result = CliRunner().invoke(
        main,
        [
            "whatif", str(log), "--compare", "per-episode,per-group", "--json",
            "--save-world", str(world), "--plot", str(plot), "--set", "max_off_policy_steps=2",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    simulated = CliRunner().invoke(main, ["simulate", "--scenario", "smoke", "--json"])
    keys = set(json.loads(simulated.stdout))
    assert set(report["recorded"]) == keys
    assert set(report["policies"]) == {"per-episode", "per-group"}
    assert all(set(run) == keys | {"discarded_interval"} for run in report["policies"].values())
    assert report["recorded"]["policy"] == "per-episode"
    assert plot.stat().st_size > 0
    again = CliRunner().invoke(main, ["simulate", "--scenario", str(world), "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["max_trained_age"] <= 2  # the --set reached the file


def test_whatif_refuses_a_missing_log_and_a_bad_override(tmp_path):
    missing = CliRunner().invoke(main, ["whatif", str(tmp_path / "nope.arrow")])
    assert missing.exit_code == 2 and missing.output.count("nope.arrow") == 1
    log, _ = recorded_log(tmp_path, "smoke", "per-episode", steps=3)
    bad = CliRunner().invoke(main, ["whatif", str(log), "--set", "world.nonsense=1"])
    assert bad.exit_code == 2 and "nonsense" in bad.output
    policy = CliRunner().invoke(main, ["whatif", str(log), "--compare", "per-nothing"])
    assert policy.exit_code == 2 and "per-nothing" in policy.output


@pytest.mark.parametrize("paused", [True, False])
def test_the_fit_reads_from_the_log_whether_inference_paused_for_updates(tmp_path, paused):
    path = tmp_path / "run.arrow"
    truth = independent_scenario("default").with_steps(12)
    world = attrs.evolve(truth.world, pause_inference_on_update=paused)
    run_policy(attrs.evolve(truth, world=world), log_path=path)
    fitted, replayed, _ = fit_recorded(path, seed=0)
    assert fitted.scenario.world.pause_inference_on_update is paused
    runs, _ = run_whatif(fitted.scenario, ["per-episode"])
    assert relative_errors(runs["per-episode"], replayed) == dict.fromkeys(FIGURES, 0.0)


def test_a_set_of_a_world_key_a_fitted_world_does_not_read_is_refused(tmp_path):
    """A fitted world draws from its trace: `--set world.failure_rate` changed nothing,
    silently, in whatif and in simulate on a saved world."""
    log, _ = recorded_log(tmp_path, "smoke", "per-episode", steps=3)
    saved = tmp_path / "world.toml"
    unread = "does not read it; it reads colocated, colocation_coupling, decode_compute_s"
    for command in (
        ["whatif", str(log), "--steps", "2", "--save-world", str(saved)],
        ["simulate", "--scenario", str(saved), "--steps", "2"],
    ):
        refused = CliRunner().invoke(main, [*command, "--set", "world.failure_rate=0.5"])
        assert refused.exit_code == 2 and unread in refused.output, refused.output
        read = CliRunner().invoke(main, [*command, "--set", "world.late_arrival_rate=0.5"])
        assert read.exit_code == 0, read.output


def test_a_log_too_torn_to_fit_says_it_is_torn(tmp_path):
    log, _ = recorded_log(tmp_path, "smoke", "per-episode", steps=3)
    torn = tmp_path / "torn.arrow"
    torn.write_bytes(log.read_bytes()[:3000])  # inside the first commit: no event kept
    result = CliRunner().invoke(main, ["whatif", str(torn)])
    assert result.exit_code == 2
    assert "torn tail" in result.stderr and "no run_started" in result.stderr


def test_the_title_says_when_the_what_if_runs_other_steps_than_were_recorded(tmp_path):
    log, _ = recorded_log(tmp_path, "smoke", "per-episode", steps=3)
    shorter = CliRunner().invoke(main, ["whatif", str(log), "--steps", "2"])
    assert "seed 0, 2 steps (recorded: 3)" in " ".join(shorter.stdout.split())  # may wrap
    same = CliRunner().invoke(main, ["whatif", str(log)])
    assert "seed 0, 3 steps" in same.stdout and "(recorded:" not in same.stdout


def test_whatif_of_a_short_run_labels_its_clock_and_keeps_its_rate_in_range(tmp_path):
    log = tmp_path / "smoke.arrow"
    CliRunner().invoke(main, ["simulate", "--scenario", "smoke", "--steps", "3", "--log", str(log)])
    result = CliRunner().invoke(main, ["whatif", str(log)])
    assert result.exit_code == 0, result.output
    assert "run time" in result.output and "virtual time" not in result.output
    assert "trained episodes / second" in result.output and "/ hour" not in result.output


def test_whatif_of_a_torn_log_says_the_recorded_run_is_unfinished(tmp_path):
    log, torn = tmp_path / "run.arrow", tmp_path / "torn.arrow"
    args = ["simulate", "--scenario", "smoke", "--steps", "300", "--log", str(log)]
    assert CliRunner().invoke(main, args).exit_code == 0
    torn.write_bytes(log.read_bytes()[: log.stat().st_size * 2 // 3])
    result = CliRunner().invoke(main, ["whatif", str(torn), "--steps", "5"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if "run finished" in line)
    assert "unfinished" in row and "None" not in row


def test_a_recorded_run_that_interrupts_reports_its_token_split_beside_the_policies(tmp_path):
    """The recorded column has the recorded log's partial ratio and token split (replay's
    own), and each simulated policy its own: only those that segment episodes have one."""
    path = tmp_path / "interrupt.arrow"
    truth = independent_scenario("smoke", {"world.weight_update_s": 4.0}).with_steps(8)
    report, _ = run_policy(truth.with_policy("per-episode+interrupt"), log_path=path)
    fitted, recorded, _ = fit_recorded(path, seed=0)
    for key in ("partial_ratio", "trained_token_age_histogram", "off_policy/token_age/mean"):
        assert recorded[key] == report[key]
    assert recorded["partial_ratio"] > 0
    runs, _ = run_whatif(fitted.scenario.with_steps(8), ["per-episode", "per-episode+interrupt"])
    assert "trained_token_age_histogram" not in runs["per-episode"]
    assert runs["per-episode+interrupt"]["partial_ratio"] > 0
    assert sum(runs["per-episode+interrupt"]["trained_token_age_histogram"].values()) > 0
