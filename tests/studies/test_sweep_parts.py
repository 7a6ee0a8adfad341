"""The sweep's parts without running it: the grid, the `--best` syntax, the Pareto front."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from rolloutlog.core.config import ConfigError
from rolloutlog.runs.simulate import policy_name
from rolloutlog.studies.best import (
    BestSyntaxError,
    best_per_scenario,
    configurations,
    parse_best,
    require_bound_presets,
)
from rolloutlog.studies.grid import expand, parse_seeds, parse_set_ranges, scenario_digest
from rolloutlog.studies.results import (
    require_kinds,
    require_same_scenarios,
    row_key,
    setting_columns,
    to_table,
)
from rolloutlog.studies.sweep_plot import pareto_front, place_labels

COLUMNS = ["trained_episodes_per_hour", "finished_rollouts_discarded", "mean_trained_age"]


def test_seeds_take_ranges_and_lists() -> None:
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("7") == [7]
    assert parse_seeds("0-1,9") == [0, 1, 9]
    for bad in ("a", "3-1", "0,0", "-2", "1-"):
        with pytest.raises(ConfigError, match="--seeds"):
            parse_seeds(bad)
    with pytest.raises(ConfigError, match="names seed 3 twice"):
        parse_seeds("0-4,3")


def test_seeds_past_int64_are_refused_naming_the_seed() -> None:
    """A seed is an int64 column of the table: a larger one ran, then failed the save."""
    assert parse_seeds(str(2**63 - 1)) == [2**63 - 1]
    for bad, seed in [("99999999999999999999999",) * 2, (f"1,{2**63 - 2}-{2**63}", str(2**63))]:
        with pytest.raises(ConfigError, match=rf"--seeds '{bad}': {seed} is above the largest"):
            parse_seeds(bad)


def test_too_many_seeds_are_refused_before_any_list_is_made() -> None:
    """`0-100000000` took 8 GB within 20 s; now it is counted, not listed."""
    with pytest.raises(ConfigError, match=r"100,000,001 seeds, more than the 10,000 cells"):
        parse_seeds("0-100000000")
    assert len(parse_seeds("0-9", most=10)) == 10
    with pytest.raises(ConfigError, match=r"11 seeds, more than the 10 cells"):
        parse_seeds("0-10", most=10)


def test_set_ranges_are_qualified_typed_and_refused_by_name() -> None:
    ranges = parse_set_ranges(["max_off_policy_steps=1,2", "world.failure_rate=0,0.1"])
    assert ranges == {"run.max_off_policy_steps": [1, 2], "world.failure_rate": [0, 0.1]}
    with pytest.raises(ConfigError, match="unknown key"):
        parse_set_ranges(["no_such_key=1,2"])
    with pytest.raises(ConfigError, match="mixes"):
        parse_set_ranges(["group_size=4,many"])
    with pytest.raises(ConfigError, match="set twice"):
        parse_set_ranges(["group_size=4", "run.group_size=8"])
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_set_ranges(["group_size="])


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ("max_inflight=4,4", "names 4 twice"),
        ("max_inflight=4,4.0", "names 4.0 twice"),  # one cell in a table: 4 == 4.0
        ("staleness=per-group,per-episode,per-group", "names 'per-group' twice"),
        ("max_inflight=4,", "value 2 of 2 is empty"),
        ("max_inflight=,4, ,8", "value 1, 3 of 4 is empty"),
        ("max_inflight=[4]", "a value to sweep is a number, true/false or a word, not a list"),
    ],
)
def test_set_values_are_single_distinct_and_not_empty(item: str, problem: str) -> None:
    """A repeated value ran the same cells twice, and an empty one read as the word ''."""
    with pytest.raises(ConfigError, match=re.escape(f"--set {item!r}: {problem}")):
        parse_set_ranges([item])


def test_the_grid_is_the_product_and_every_cell_is_checked() -> None:
    ranges = parse_set_ranges(["max_off_policy_steps=1,2"])
    cells = expand(["smoke", "tight"], ["per-episode", "all"], [0, 1, 2], ranges, 4)
    assert len(cells) == 2 * 2 * 2 * 3
    assert len({cell.key(["run.max_off_policy_steps"]) for cell in cells}) == len(cells)
    own = expand(["smoke"], None, None, {}, None)
    assert len(own) == 1 and own[0].steps > 0 and own[0].preset
    with pytest.raises(
        ConfigError, match=re.escape("smoke under per-episode --set run.target_lag=9")
    ):
        expand(["smoke"], ["per-episode"], [0], parse_set_ranges(["target_lag=9"]), 2)


def test_a_scenario_is_refused_twice_and_two_scenarios_of_one_name(tmp_path: Path) -> None:
    """Both ran, and their rows were merged into one configuration under one name."""
    with pytest.raises(ConfigError, match="--scenario smoke: given twice"):
        expand(["smoke", "smoke"], None, [0], {}, 1)
    other = tmp_path / "alt" / "smoke.toml"
    other.parent.mkdir()
    other.write_text("steps = 5\n[run]\nmax_inflight = 5\n")
    with pytest.raises(ConfigError, match=rf"--scenario smoke and --scenario {other} are both"):
        expand(["smoke", str(other)], None, [0], {}, 1)


def test_two_presets_that_a_set_makes_one_policy_are_refused_as_simulate_does() -> None:
    """`--set staleness=per-group` made per-episode run per-group, under its own label."""
    presets = ["per-episode", "per-group"]
    clash = "--compare: presets per-episode and per-group both run"
    with pytest.raises(ConfigError, match=f"{clash} per-group under --set staleness=per-group"):
        expand(["smoke"], presets, [0], parse_set_ranges(["staleness=per-group"]), 1)
    ranges = parse_set_ranges(["max_inflight=4,8", "staleness=per-episode,per-group"])
    with pytest.raises(ConfigError, match=f"{clash} per-episode under --set staleness=per-episode"):
        expand(["smoke"], presets, [0], ranges, 1)
    ranges = parse_set_ranges(["max_inflight=4,8"])
    assert len(expand(["smoke"], presets, [0], ranges, 1)) == 4


def test_a_grid_larger_than_the_cap_is_refused_before_its_cells_are_made() -> None:
    ranges = parse_set_ranges(["max_inflight=4,8,16"])
    assert len(expand(["smoke", "tight"], ["per-episode"], [0, 1], ranges, 1, most_cells=12)) == 12
    shown = "2 scenarios × 2 presets × 3 --set combinations × 2 seeds"
    with pytest.raises(ConfigError, match=f"the grid has 24 cells \\({shown}\\), more than the 23"):
        expand(["smoke", "tight"], ["per-episode", "all"], [0, 1], ranges, 1, most_cells=23)


def test_the_digest_tells_scenarios_apart_by_what_they_run(tmp_path: Path) -> None:
    """Seed, steps and description are a cell's own or change nothing; settings do."""
    from rolloutlog.runtime.sim.scenario import load_scenario

    smoke = load_scenario("smoke")
    same = tmp_path / "same.toml"
    same.write_text(
        (Path(__file__).parents[2] / "rolloutlog/runtime/sim/scenarios/smoke.toml")
        .read_text()
        .replace("steps = 5", "steps = 7")
        .replace("seed = 0", "seed = 3")
        .replace("A tiny run", "Another")
    )
    assert scenario_digest(load_scenario(str(same))) == scenario_digest(smoke)
    assert scenario_digest(smoke.with_run(max_inflight=5)) != scenario_digest(smoke)
    assert scenario_digest(load_scenario("smoke", {"world.failure_rate": 0.2})) != (
        scenario_digest(smoke)
    )


def test_rows_of_a_scenario_run_from_other_settings_are_refused(tmp_path: Path) -> None:
    """Resuming with another scenario of a name (or an edited one) mixed the two."""
    other = tmp_path / "smoke.toml"
    other.write_text("steps = 5\n[run]\nmax_inflight = 5\n")
    (builtin,) = expand(["smoke"], None, [0], {}, 1)
    (from_file,) = expand([str(other)], None, [0], {}, 1)
    row = {"scenario": "smoke", "scenario_digest": builtin.digest}
    require_same_scenarios([row, {"scenario": "smoke"}, {"scenario": "tight"}], [builtin])
    with pytest.raises(ValueError, match=f"scenario 'smoke' ran other settings than {other}"):
        require_same_scenarios([row], [from_file])


def _row(scenario: str, preset: str, seed: int, trained: float, discarded: float) -> dict:
    return {
        "scenario": scenario,
        "preset": preset,
        "seed": seed,
        "steps": 10,
        "trained_episodes_per_hour": trained,
        "finished_rollouts_discarded": discarded,
        "mean_trained_age": 1.0,
    }


ROWS = [
    _row("a", "per-episode", 0, 100.0, 40.0),
    _row("a", "per-episode", 1, 120.0, 60.0),  # mean 110 trained/h, 50 discarded
    _row("a", "per-group", 0, 130.0, 80.0),
    _row("a", "per-group", 1, 130.0, 80.0),
    _row("a", "all", 0, 105.0, 10.0),
    _row("a", "all", 1, 105.0, 12.0),  # 11 discarded: <= 0.25 * 50
    _row("b", "per-episode", 0, 50.0, 4.0),
    _row("b", "all", 0, 40.0, 2.0),  # 2 > 0.25 * 4
]


def test_best_finds_the_fastest_configuration_within_the_constraint() -> None:
    found = configurations(ROWS, [])
    objective = parse_best("max trained_per_hour where discarded <= 0.25*per-episode", COLUMNS)
    assert objective.describe() == (
        "max trained_episodes_per_hour where finished_rollouts_discarded <= 0.25*per-episode"
    )
    choices = {c.scenario: c for c in best_per_scenario(found, objective)}
    best_a = choices["a"].best
    assert best_a is not None and best_a.preset == "all" and best_a.seeds == 2
    assert best_a.means["finished_rollouts_discarded"] == 11.0
    assert choices["b"].best is None and choices["b"].candidates == 2
    unconstrained = best_per_scenario(found, parse_best("max trained_per_hour", COLUMNS))
    assert [c.best.preset for c in unconstrained if c.best] == ["per-group", "per-episode"]
    fewest = parse_best("min discarded where trained_per_hour >= 100 and mean_age <= 1", COLUMNS)
    assert [c.best.preset for c in best_per_scenario(found, fewest) if c.best] == ["all"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("maximise trained_per_hour", "must start with"),
        ("max speed", "unknown metric 'speed'"),
        ("max trained_per_hour where discarded == 3", "is not 'METRIC"),
        ("max trained_per_hour where discarded <= 0.25*turbo", "bound '0.25\\*turbo'"),
        ("max trained_per_hour where discarded <= x*per-episode", "bound 'x\\*per-episode'"),
        ("max trained_per_hour where", "the 'where' clause is empty"),
        ("max trained_per_hour  where  ", "the 'where' clause is empty"),
    ],
)
def test_bad_best_texts_are_refused_naming_the_part(text: str, problem: str) -> None:
    with pytest.raises(BestSyntaxError, match=problem):
        parse_best(text, COLUMNS)


def test_a_preset_bound_needs_that_preset_in_the_sweep() -> None:
    found = configurations([r for r in ROWS if r["preset"] != "per-episode"], [])
    objective = parse_best("max trained_per_hour where discarded <= per-episode", COLUMNS)
    with pytest.raises(BestSyntaxError, match=r"needs preset 'per-episode'.*add it to --compare"):
        best_per_scenario(found, objective)
    settings = (("run.max_inflight", 4),)
    require_bound_presets(objective, {("a", "all", 10, ()), ("a", "per-episode", 10, ())})
    with pytest.raises(BestSyntaxError, match=r"on scenario 'a' with run.max_inflight=4 \(add"):
        require_bound_presets(objective, {("a", "per-episode", 10, ()), ("a", "all", 10, settings)})


def test_a_table_edited_to_other_kinds_of_value_is_refused() -> None:
    """A seed edited into text matched no cell, and sorting the table with the new rows
    failed after the whole grid ran, losing them."""
    sample = {**ROWS[0], "run.max_inflight": 4, "invariant_violations": None}
    require_kinds(
        [*ROWS, {**ROWS[0], "run.max_inflight": 8.5, "invariant_violations": "[]"}], sample
    )
    with pytest.raises(ValueError, match=r"column 'seed' holds str values \('0'\) where a sweep"):
        require_kinds([*ROWS, {**ROWS[0], "seed": "0"}], sample)
    with pytest.raises(ValueError, match=r"column 'run\.max_inflight' holds boolean values"):
        require_kinds([{**ROWS[0], "run.max_inflight": True}], sample)


def test_pareto_front_keeps_the_undominated_points_by_discards() -> None:
    points = [(50.0, 110.0), (80.0, 130.0), (11.0, 105.0), (60.0, 100.0), (11.0, 90.0)]
    assert pareto_front(points) == [2, 0, 1]


def test_the_table_sorts_by_cell_whatever_the_order_rows_came_in() -> None:
    rows = [dict(r, **{"run.group_size": 4 if r["seed"] else None}) for r in ROWS]
    keys = setting_columns(rows)
    assert keys == ["run.group_size"]
    forward, backward = to_table(rows), to_table(rows[::-1])
    assert forward.equals(backward)
    assert [row_key(r, keys) for r in forward.to_pylist()] == sorted(
        (row_key(r, keys) for r in rows), key=lambda k: (k[:4], k[4] is None, k[4] or 0)
    )


def test_an_explicit_set_wins_over_the_preset_as_in_simulate() -> None:
    (cell,) = expand(["smoke"], ["per-episode"], [0], parse_set_ranges(["straggler_cut=true"]), 2)
    assert cell.scenario().run.straggler_cut is True
    assert policy_name(cell.scenario()) == "per-episode+straggler"


def test_labels_of_nearby_points_do_not_overlap() -> None:
    """Four configurations whose points nearly coincide (as the presets of a sweep that
    changes little do): each label is moved to a free spot, where one spot would print
    every label over the one before; a fifth near the right edge is labelled to its left,
    inside the axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4.8))
    points = [(227.0, 2285.0), (251.0, 2292.0), (236.0, 2310.0), (244.0, 2270.0), (455.0, 2600.0)]
    presets = ("per-episode", "per-group", "all", "x", "per-episode")
    texts = [f"{preset} max_inflight=16" for preset in presets]
    axis.scatter(*zip(*points, strict=True))
    axis.set_xlim(200, 460)
    axis.set_ylim(2200, 3150)
    try:
        renderer = figure.canvas.get_renderer()
        at_first_spot = [
            axis.annotate(text, point, textcoords="offset points", xytext=(5, 4), fontsize=7)
            for point, text in zip(points[:4], texts[:4], strict=True)
        ]
        assert _any_overlap([note.get_window_extent(renderer) for note in at_first_spot])
        for note in at_first_spot:
            note.remove()
        boxes = place_labels(axis, points, texts)
        assert len(boxes) == len(points) == len(axis.texts)
        assert not _any_overlap(boxes)
        frame = axis.get_window_extent(renderer)
        assert frame.x0 <= boxes[-1].x0 and boxes[-1].x1 <= frame.x1
    finally:
        plt.close(figure)


def _any_overlap(boxes: list[Any]) -> bool:
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
