"""`--rank-by` of `simulate --compare` and `whatif`: throughput, or the learning model's
predicted time to a held-out reward, with the model's tested error; refused before any run
where no model has held its test."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from rich.console import Console

from rolloutlog.cli import rank_by
from rolloutlog.cli.simulate import simulate_command
from rolloutlog.studies.learning_model import LearningModel

MODEL = LearningModel(
    target=0.3, intercept=8.0, per_age=0.5, per_length=-2.0,
    loso_error=0.21, loso_spearman=0.8, settings=9, source="a hand-made model",
)  # fmt: skip
RUNS = {  # fast but stale, slower and fresh, nothing trained
    "stale": {"trained_episodes_per_hour": 7200.0, "mean_trained_age": 4.0,
              "trained_length_ratio": 1.0},
    "fresh": {"trained_episodes_per_hour": 3600.0, "mean_trained_age": 0.0,
              "trained_length_ratio": 1.0},
    "idle": {"trained_episodes_per_hour": None, "mean_trained_age": None,
             "trained_length_ratio": None},
}  # fmt: skip


def test_throughput_and_the_model_rank_the_runs_their_own_ways():
    order, seconds = rank_by.ranking(RUNS, "throughput", MODEL)
    assert order == ["stale", "fresh", "idle"] and seconds == {}
    order, seconds = rank_by.ranking(RUNS, "time-to-reward", MODEL)
    # e^8 episodes at age 0 over 1 episode/s; e^(8 + 2) over 2/s at age 4
    assert order == ["fresh", "stale", "idle"]
    assert seconds["fresh"] == pytest.approx(2980.96, rel=1e-4)
    assert seconds["stale"] == pytest.approx(22026.47 / 2, rel=1e-4)
    assert seconds["idle"] is None
    ranked = rank_by.with_predictions(RUNS, "time-to-reward", MODEL)
    assert list(ranked) == order and ranked["fresh"][rank_by.PREDICTED_KEY] == seconds["fresh"]
    assert list(rank_by.with_predictions(RUNS, None, MODEL)) == list(RUNS)


def test_the_ranking_line_states_the_models_error():
    console = Console(record=True, width=400)
    rank_by.print_ranking(RUNS, "time-to-reward", console, MODEL)
    text = console.export_text()
    assert text.startswith("ranked by predicted time to held-out reward 0.3: fresh (")
    assert "idle (nothing trained)" in text
    assert "off by 21% (median, leaving each of 9 settings out; rank correlation 0.80)" in text


def test_simulate_ranks_by_throughput_and_refuses_a_model_that_did_not_hold(monkeypatch):
    args = ["--scenario", "smoke", "--steps", "3", "--compare", "per-episode,all"]
    result = CliRunner().invoke(simulate_command, [*args, "--rank-by", "throughput", "--json"])
    assert result.exit_code == 0, result.output
    rates = [run["trained_episodes_per_hour"] for run in json.loads(result.stdout).values()]
    assert rates == sorted(rates, reverse=True)
    monkeypatch.setattr(rank_by, "FITTED", None)
    refused = CliRunner().invoke(simulate_command, [*args, "--rank-by", "time-to-reward"])
    assert refused.exit_code == 2
    assert "no learning model has held its test" in refused.output


def test_simulate_ranks_by_the_models_time_when_one_holds(monkeypatch):
    monkeypatch.setattr(rank_by, "FITTED", MODEL)
    args = ["--scenario", "smoke", "--steps", "3", "--compare", "per-episode,all"]
    result = CliRunner().invoke(simulate_command, [*args, "--rank-by", "time-to-reward"])
    assert result.exit_code == 0, result.output
    assert "ranked by predicted time to held-out reward 0.3:" in result.output
    shown = CliRunner().invoke(simulate_command, [*args, "--rank-by", "time-to-reward", "--json"])
    runs = json.loads(shown.stdout)
    predicted = [run[rank_by.PREDICTED_KEY] for run in runs.values()]
    assert predicted == sorted(predicted) and all(p > 0 for p in predicted)
