"""`rolloutlog simulate`: the report, `--json` keys, `--compare`, `--log`, `--plot`, errors."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rolloutlog.cli import progress
from rolloutlog.cli.simulate import simulate_command
from rolloutlog.events.log_reader import read_log
from rolloutlog.replay.fold import fold_events
from rolloutlog.replay.source import open_log
from rolloutlog.replay.verify import verify_log

SIM_KEYS = {
    "virtual_seconds",
    "rollout_seconds_total",
    "rollout_seconds_wasted",
    "finished_rollouts_discarded",
    "trained_episodes_per_hour",
    "trainer_idle_fraction",
    "trained_length_ratio",
    "trained_difficulty_ratio",
}


def invoke(*args: str) -> Any:
    result = CliRunner().invoke(simulate_command, list(args), catch_exceptions=False)
    return result


@pytest.mark.parametrize("scenario", ["smoke", "chaos"])
def test_json_has_every_replay_key_and_the_simulator_keys(tmp_path: Path, scenario: str) -> None:
    """The summary observed on the loop equals replay's fold of the written log, key by key."""
    log = tmp_path / f"{scenario}.arrow"
    result = invoke("--scenario", scenario, "--steps", "8", "--json", "--check", "--log", str(log))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    folded = fold_events(read_log(log))
    assert folded.fold is not None
    replay_summary = folded.fold.summary()
    assert set(replay_summary) <= set(report)
    assert set(report) >= SIM_KEYS
    assert {key: report[key] for key in replay_summary} == json.loads(json.dumps(replay_summary))
    assert report["invariant_violations"] == []
    assert report["run_finished"] == "steps"


def test_invariants_are_checked_only_on_request() -> None:
    unchecked = json.loads(invoke("--scenario", "smoke", "--json").stdout)
    checked = json.loads(invoke("--scenario", "smoke", "--json", "--check").stdout)
    assert unchecked["invariant_violations"] is None
    assert checked["invariant_violations"] == []
    assert {**unchecked, "invariant_violations": []} == checked
    assert "not checked" in invoke("--scenario", "smoke").output


def test_the_log_it_writes_passes_verification(tmp_path: Path) -> None:
    log = tmp_path / "chaos.arrow"
    result = invoke("--scenario", "chaos", "--steps", "6", "--log", str(log), "--json")
    assert result.exit_code == 0, result.output
    verification = verify_log(open_log(log))
    assert verification.ok, verification.divergence or verification.error
    assert verification.events == len(read_log(log))


def test_compare_runs_both_policies_and_writes_a_log_and_plot_each(tmp_path: Path) -> None:
    plot, log = tmp_path / "compare.png", tmp_path / "run.arrow"
    result = invoke(
        "--scenario",
        "smoke",
        "--compare",
        "per-episode,per-group",
        "--plot",
        str(plot),
        "--log",
        str(log),
        "--json",
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert list(report) == ["per-episode", "per-group"]
    assert report["per-group"]["policy"] == "per-group"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "run.per-episode.arrow").exists()
    assert (tmp_path / "run.per-group.arrow").exists()


def test_the_readable_report_shows_the_comparison() -> None:
    result = invoke("--scenario", "smoke", "--compare", "per-episode,per-group")
    assert result.exit_code == 0, result.output
    for text in ("per-episode", "per-group", "finished rollouts discarded", "trained age"):
        assert text in result.output


def test_seed_steps_policy_and_overrides_reach_the_run() -> None:
    result = invoke(
        "--scenario",
        "smoke",
        "--seed",
        "4",
        "--steps",
        "2",
        "--policy",
        "per-group",
        "--set",
        "group_size=2",
        "--json",
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["seed"], report["policy"]) == (4, "per-group")
    assert report["steps_shipped"] >= 2


def test_bad_options_are_refused_with_the_key_named() -> None:
    result = invoke("--scenario", "smoke", "--set", "group_size=0")
    assert result.exit_code == 2
    assert "group_size" in result.output
    result = invoke("--scenario", "smoke", "--compare", "per-episode,per-batch")
    assert result.exit_code == 2
    assert "--compare" in result.output
    result = invoke("--policy", "per-group", "--compare", "per-episode")
    assert result.exit_code == 2
    result = invoke("--scenario", "nowhere")
    assert result.exit_code == 2
    assert "neither a built-in scenario" in result.output


def test_compare_takes_any_list_of_presets() -> None:
    result = invoke(
        "--scenario",
        "smoke",
        "--compare",
        "per-episode,per-episode+straggler+oldest-first,all",
        "--json",
        "--check",
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert list(report) == ["per-episode", "per-episode+straggler+oldest-first", "all"]
    assert report["all"]["policy"] == "all"
    for run in report.values():
        assert run["invariant_violations"] == []
        assert {"trained_length_ratio", "trained_difficulty_ratio"} <= set(run)
    result = invoke("--scenario", "smoke", "--compare", "per-episode+turbo")
    assert result.exit_code == 2 and "unknown rule 'turbo'" in result.output


def test_the_areal_preset_runs_under_its_name_and_counts_what_trains_past_the_bound() -> None:
    result = invoke(
        "--scenario", "default", "--steps", "20", "--policy", "areal", "--json", "--check"
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["policy"] == "areal"
    assert report["invariant_violations"] == []  # its own properties: no hard bound
    ages = report["trained_age_histogram"]
    past = sum(n for age, n in ages.items() if int(age) > 2)  # the default's bound is 2
    assert report["episodes_trained_past_bound"] == past > 0


def test_the_verl_preset_runs_under_its_name_and_keeps_its_budget() -> None:
    result = invoke(
        "--scenario", "default", "--steps", "20", "--policy", "verl-fully-async", "--json",
        "--check",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["policy"] == "verl-fully-async"
    assert report["invariant_violations"] == []  # its own properties: the budget, no bound
    assert report["episodes_dropped_stale"] == 0 and report["steps_shipped"] == 20


def test_an_existing_log_path_is_refused_before_the_run_unless_forced(tmp_path: Path) -> None:
    recorded = tmp_path / "recorded.arrow"
    assert invoke("--scenario", "smoke", "--steps", "3", "--log", str(recorded)).exit_code == 0
    kept = recorded.read_bytes()
    for extra in ([], ["--compare", "per-episode,per-group"]):
        target = recorded if not extra else tmp_path / "run.arrow"
        (tmp_path / "run.per-group.arrow").write_bytes(kept)  # the second policy's path
        result = invoke("--scenario", "smoke", "--steps", "5", "--log", str(target), *extra)
        assert result.exit_code == 2, result.output
        assert "already exists (pass --force to replace it)" in result.output
        assert not (tmp_path / "run.per-episode.arrow").exists()  # nothing ran
    assert recorded.read_bytes() == kept
    forced = invoke("--scenario", "smoke", "--steps", "5", "--log", str(recorded), "--force")
    assert forced.exit_code == 0, forced.output
    shipped = [event for event in read_log(recorded) if event.kind == "batch_shipped"]
    assert len(shipped) == 5  # the 3-step log was replaced by a 5-step one


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--seed", str(2**63)], "0<=x<=9223372036854775807"),
        (["--plot", "figure.txt"], "name the figure's format by its suffix"),
        (["--plot", "figure"], "name the figure's format by its suffix"),
        (["--set", "max_inflight=1000000"], "max_inflight: at most 100,000"),
    ],
)
def test_options_that_would_fail_after_the_run_are_refused_before_it(
    tmp_path: Path, args: list[str], named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("--scenario", "smoke", "--steps", "3", "--log", "run.arrow", *args)
    assert result.exit_code == 2, result.output
    assert named in result.output
    assert list(tmp_path.iterdir()) == []


def test_plot_without_matplotlib_is_refused_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_find_spec = importlib.util.find_spec

    def without_matplotlib(name: str, *args: Any) -> Any:
        return None if name == "matplotlib" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_matplotlib)
    monkeypatch.chdir(tmp_path)
    result = invoke("--scenario", "smoke", "--steps", "3", "--log", "run.arrow", "--plot", "a.png")
    assert result.exit_code == 2, result.output
    assert "drawing needs matplotlib (pip install 'rolloutlog[plot]')" in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_short_run_prints_its_durations_and_rate_in_units_that_fit() -> None:
    result = invoke("--scenario", "smoke", "--steps", "3")
    assert result.exit_code == 0, result.output
    for shown in ("31.4 s", "3.11 min", "1.29 min (41.3%)", "trained episodes / second"):
        assert shown in result.output
    assert " h " not in result.output and "/ hour" not in result.output


def test_off_a_terminal_progress_is_a_plain_line_on_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "LINE_INTERVAL_S", 0.0)  # a line at every update
    result = invoke("--scenario", "smoke", "--compare", "per-episode,per-group", "--json")
    assert result.exit_code == 0, result.output
    lines = [" ".join(line.split()[:3]) for line in result.stderr.splitlines()]
    assert lines == [f"step {s}/5 {p}" for p in ("per-episode", "per-group") for s in range(1, 6)]
    assert set(json.loads(result.stdout)) == {"per-episode", "per-group"}
