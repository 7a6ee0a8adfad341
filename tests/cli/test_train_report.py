"""`rolloutlog train`'s table prints its wall time in the unit that fits it, as every other
command prints durations (`cli.output.duration`); `--json` keeps plain seconds."""

from __future__ import annotations

import pytest

from rolloutlog.cli.train_report import print_report

REPORT = {
    "finished_reason": "steps",
    "steps_shipped": 3,
    "reward_curve": [0.1, 0.2, 0.3],
    "episodes_dispatched": 10,
    "episodes_trained": 8,
    "episodes_cancelled": {"stale": 1},
    "aborts_sent": 1,
    "late_arrivals": 0,
    "episodes_dropped_stale": 1,
    "episodes_failed": 0,
    "trained_age_histogram": {"0": 8},
    "invariant_violations": [],
    "endpoints": [{"url": "http://127.0.0.1:1", "generations": 10, "alive": True}],
    "log": "run.arrow",
}


@pytest.mark.parametrize(
    ("seconds", "shown"), [(9.5, "9.50 s"), (330.0, "5.50 min"), (10_836.0, "3.01 h")]
)
def test_the_wall_time_is_shown_in_the_unit_that_fits(
    seconds: float, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    print_report({**REPORT, "wall_seconds": seconds})
    line = next(row for row in capsys.readouterr().out.splitlines() if "wall time" in row)
    assert shown in line


def test_a_segmenting_run_shows_its_partial_figures_and_token_ages(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_report({**REPORT, "wall_seconds": 1.0})
    assert "token ages" not in capsys.readouterr().out
    segments = {
        "partial_ratio": 0.5,
        "largest_version_span": 1,
        "trained_token_age_histogram": {"0": 30, "1": 10},
    }
    print_report({**REPORT, "wall_seconds": 1.0, **segments})
    out = capsys.readouterr().out
    assert "50.0% / 1" in out and "0:75.0%  1:25.0% (mean 0.25)" in out
