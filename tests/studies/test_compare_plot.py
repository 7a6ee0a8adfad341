"""`simulate --compare --plot`: one point per policy at the table's figures, its bias
ratios in its label, beside the trained ages and the waste."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rolloutlog.cli.simulate import simulate_command
from rolloutlog.runtime.sim.plot import pyplot
from rolloutlog.studies import compare_plot

PRESETS = "per-group,per-episode,per-episode+capacity,per-episode+straggler,all"


def test_the_chart_puts_each_policy_at_its_reported_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    drawn: list[tuple[Any, list[str]]] = []

    def spy(axis: Any, runs: Any) -> tuple[list[tuple[float, float]], list[str]]:
        points, labels = real(axis, runs)
        drawn.append((axis, labels))
        return points, labels

    real = compare_plot.draw_tradeoff
    monkeypatch.setattr(compare_plot, "draw_tradeoff", spy)
    plot = tmp_path / "compare.png"
    args = ["--scenario", "smoke", "--steps", "4", "--compare", PRESETS, "--json"]
    result = CliRunner().invoke(simulate_command, [*args, "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads(result.stdout)
    ((axis, labels),) = drawn
    points = [tuple(c.get_offsets()[0]) for c in axis.collections]
    assert points == [
        (run["finished_rollouts_discarded"], run["trained_episodes_per_hour"])
        for run in report.values()
    ]
    assert labels == [
        f"{name} (length {run['trained_length_ratio']:.3f}, "
        f"difficulty {run['trained_difficulty_ratio']:.3f})"
        for name, run in report.items()
    ]
    texts = {text.get_text() for text in axis.texts}
    assert texts == set(labels)  # each placed on the figure


def test_a_policy_without_a_figure_is_left_off_the_chart_and_its_ratio_shown_as_none() -> None:
    pytest.importorskip("matplotlib")
    plt = pyplot()
    figure, axis = plt.subplots()
    runs = {
        "a": {"finished_rollouts_discarded": 3, "trained_episodes_per_hour": 10.0},
        "b": {"finished_rollouts_discarded": 5, "trained_episodes_per_hour": None},
        "c": {"finished_rollouts_discarded": 0, "trained_episodes_per_hour": 0.0},
    }
    points, labels = compare_plot.draw_tradeoff(axis, runs)
    plt.close(figure)
    assert points == [(3.0, 10.0), (0.0, 0.0)]  # a run that trained nothing is a point
    assert labels == ["a (length –, difficulty –)", "c (length –, difficulty –)"]
