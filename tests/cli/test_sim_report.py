"""The `simulate`/`whatif` report: a column per run up to four, the turned table beyond."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from rolloutlog.cli import sim_report
from rolloutlog.cli.sim_report import print_report
from rolloutlog.core.presets import field_set

# A field's worth of names: long ones with rules, short field-like ones.
NAMES = (
    "per-group",
    "per-episode",
    "per-episode+capacity",
    "per-episode+straggler",
    "per-episode+straggler+oldest-first",
    "stack-with-a-long-name",
    "all",
)


def report(n: int) -> dict[str, Any]:
    """A run's figures, as wide as a long run makes them."""
    return {
        "virtual_seconds": 10_836.0 + n,
        "trained_episodes_per_hour": 4_092.4 + 100 * n,
        "finished_rollouts_discarded": 14_556 + n,
        "rollout_seconds_total": 360_000.0,
        "rollout_seconds_wasted": 106_200.0 + 360 * n,
        "trainer_idle_fraction": 0.534 + n / 1000,
        "mean_trained_age": 1.55 + n / 100,
        "max_trained_age": 2 + n,
        "trained_length_ratio": 0.949 + n / 1000,
        "trained_difficulty_ratio": 1.014 + n / 1000,
        "trained_age_histogram": {"0": 617, "1": 4_341, "2": 7_359},
        "invariant_violations": None,
        "episodes_cancelled": {},
    }


def rendered(names: tuple[str, ...], width: int = 80) -> list[str]:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    print_report({name: report(n) for n, name in enumerate(names)}, "a title", console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    return [line.rstrip() for line in text.splitlines()]


def policy_rows(lines: list[str]) -> dict[str, list[str]]:
    """The turned table's rows: each policy (its folded name put back together: a name's
    lines after the first hold nothing else) and its figures."""
    end = next(i for i, line in enumerate(lines) if "histogram" in line)
    rule = next(i for i, line in enumerate(lines) if line and set(line) == {"─"})
    body = lines[rule + 1 : end]
    rows: list[tuple[str, list[str]]] = []
    for line in body:
        first, *figures = line.split()
        if figures:
            rows.append((first, figures))
        else:
            rows[-1] = (rows[-1][0] + first, rows[-1][1])
    return dict(rows)


def test_up_to_four_runs_keep_a_column_each_with_every_figure_a_row() -> None:
    lines = rendered(NAMES[:4], width=200)
    assert "metric" in lines[2] and all(name in lines[2] for name in NAMES[:4])
    assert any(line.startswith("│ trained difficulty ratio") for line in lines)


@pytest.mark.parametrize("count", [5, len(NAMES)])
def test_more_runs_turn_the_table_and_fit_80_columns_with_nothing_cut(count: int) -> None:
    names = NAMES[:count]
    lines = rendered(names)
    assert max(map(len, lines)) <= 80
    assert not any("…" in line for line in lines)
    assert not any(line.lstrip("│ ").startswith("metric") for line in lines)
    rows = policy_rows(lines)
    assert list(rows) == list(names)  # one row each, names whole once unfolded
    for n, name in enumerate(names):
        assert rows[name] == [
            f"{4_092.4 + 100 * n:,.0f}",
            f"{14_556 + n:,}",
            f"{100 * (106_200.0 + 360 * n) / 360_000.0:.1f}%",
            f"{100 * (0.534 + n / 1000):.1f}%",
            f"{1.55 + n / 100:.2f}",
            f"{2 + n}",
            f"{0.949 + n / 1000:.3f}",
            f"{1.014 + n / 1000:.3f}",
        ]


def test_figures_that_do_not_fit_beside_the_others_go_to_a_next_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    more = tuple((f"figure {k}", lambda run, k=k: f"{k:,}0000") for k in range(1, 6))
    monkeypatch.setattr(sim_report, "COLUMNS", (*sim_report.COLUMNS, *more))
    lines = rendered(NAMES)
    assert max(map(len, lines)) <= 80
    assert not any("…" in line for line in lines)
    assert sum(line.startswith("policy") for line in lines) == 2  # the policy column twice
    for k in range(1, 6):
        assert sum(line.count(f"{k:,}0000") for line in lines) == len(NAMES)


def test_the_withheld_row_shows_only_when_a_run_withholds() -> None:
    def lines(**extra: Any) -> list[str]:
        console = Console(width=200, file=io.StringIO(), color_system=None)
        runs = {"prime-rl": report(0), "prime-rl-withhold": {**report(1), **extra}}
        print_report(runs, "a title", console)
        return console.file.getvalue().splitlines()  # type: ignore[attr-defined]

    assert not any("of it withheld" in line for line in lines())
    withheld = [line for line in lines(episodes_withheld=1_234) if "of it withheld" in line]
    assert len(withheld) == 1 and "1,234" in withheld[0]


def test_the_field_set_turned_fits_80_columns_with_every_preset_a_row() -> None:
    names = tuple(field_set())
    lines = rendered(names)
    assert max(map(len, lines)) <= 80
    assert not any("…" in line for line in lines)
    assert list(policy_rows(lines)) == list(names)  # one row each, names whole once unfolded


SEGMENTED = {
    "partial_ratio": 0.25,
    "largest_version_span": 2,
    "trained_token_age_histogram": {"0": 600, "1": 300, "2": 100},
}


def test_the_partial_rows_show_only_when_a_run_segments_episodes() -> None:
    def lines(**extra: Any) -> list[str]:
        console = Console(width=200, file=io.StringIO(), color_system=None)
        print_report({"freeze": report(0), "interrupt": {**report(1), **extra}}, "t", console)
        return console.file.getvalue().splitlines()  # type: ignore[attr-defined]

    plain = lines()
    assert not any("resumed episodes (partial)" in line or "token age" in line for line in plain)
    shown = lines(**SEGMENTED)
    row = next(line for line in shown if "resumed episodes (partial)" in line)
    assert [cell.strip() for cell in row.split("│")[2:4]] == ["–", "25.0%"]
    assert "2" in next(line for line in shown if "largest version span" in line)
    assert "0.50" in next(line for line in shown if "mean trained token age" in line)
    assert "trained token ages, interrupt: 0:60.0%  1:30.0%  2:10.0%" in shown
    assert not any("trained token ages, freeze" in line for line in shown)


def test_the_turned_table_gains_the_partial_columns_and_still_fits_80() -> None:
    console = Console(width=80, file=io.StringIO(), color_system=None)
    runs = {name: {**report(n), **SEGMENTED} for n, name in enumerate(NAMES)}
    print_report(runs, "a title", console)
    lines = [line.rstrip() for line in console.file.getvalue().splitlines()]  # type: ignore[attr-defined]
    assert max(map(len, lines)) <= 80 and not any("…" in line for line in lines)
    assert sum(line.count("25.0%") for line in lines) == len(NAMES)
    assert sum(line.count("0.50") for line in lines) == len(NAMES)
    assert not any("partial" in line for line in rendered(NAMES))
