"""The learning study's machinery on a tiny budget: rows, resume, ranking, correlation."""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # as `python benchmarks/learning.py` has it
learning = importlib.import_module("learning")
ranking = importlib.import_module("learning_report")

TINY = ("batch_size=16", "max_inflight=16", "group_size=4", "server_mode=thread")


def _row(preset: str, curve: list[float], seed: int = 0, whatif: float = 1.0) -> dict:
    return {
        "settings": "default", "preset": preset, "seed": seed, "steps": len(curve),
        "overrides": [], "curve": curve, "batch_t": [float(i + 1) for i in range(len(curve))],
        "trained_tokens": 10, "discarded": 0, "trained_ages": {"0": 1},
        "by_difficulty": {"easy": {"dispatched": 4, "trained": 2, "reward": 0.5}},
        "whatif": {"a": whatif, "b": 2 * whatif, "c": 3 * whatif},
    }  # fmt: skip


def test_the_study_runs_each_missing_run_once_and_reports_it(tmp_path):
    table = tmp_path / "runs.jsonl"
    lines: list[str] = []
    common = {
        "presets": ["per-group", "per-episode"],
        "seeds": [0, 1],
        "steps": 2,
        "settings": ["hard"],
        "table": table,
        "extra": TINY,
        "progress": lines.append,
    }
    assert learning.study(**common) == 4
    rows = learning.load_table(table)
    label = " ".join(["hard_task_share=0.2", *TINY])
    assert sorted(learning.run_key(r) for r in rows) == [
        ("hard", label, preset, seed, 2)
        for preset in ("per-episode", "per-group")
        for seed in (0, 1)
    ]
    for row in rows:
        assert row["ok"] and len(row["curve"]) == len(row["batch_t"]) == 2
        assert set(row["whatif"]) == {"per-group", "per-episode"}
        assert set(row["by_difficulty"]) == {"easy", "hard"}  # hard_task_share=0.2
        assert row["trained_tokens"] > 0 and "hard_task_share=0.2" in row["overrides"]
    # resuming runs nothing new; a part with another seed runs only that seed
    assert learning.study(**common) == 0
    assert learning.study(**{**common, "seeds": [0, 2]}) == 2
    assert len(learning.load_table(table)) == 6
    # other --set items make other runs, reported apart
    assert learning.study(**{**common, "seeds": [0], "presets": ["per-group"],
                             "extra": [*TINY, "is_correction=tis"],
                             "compare": ["per-group", "all"]}) == 1  # fmt: skip
    assert set(learning.load_table(table)[-1]["whatif"]) == {"per-group", "all"}
    text = ranking.report(learning.load_table(table), 2)
    assert f"### hard ({label})" in text and "| per-group | 3 |" in text
    assert "is_correction=tis)" in text and "| per-group | 1 |" in text and "Spearman" in text


def test_a_missing_preset_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        learning.main(["--presets", "per-group,nonesuch", "--table", str(tmp_path / "t")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("learning.py: error: --presets: policy 'nonesuch'")
    assert "\n" not in error and not (tmp_path / "t").exists()


def test_a_run_that_never_reaches_the_target_ranks_after_those_that_do():
    slow = _row("a", [0.9] * 30)  # reaches 0.8 at batch 10
    late = _row("b", [0.0] * 20 + [0.85] * 10)  # reaches it at batch 30
    never_high = _row("c", [0.7] * 30)
    never_low = _row("d", [0.1] * 30)
    assert ranking.seconds_to(slow, 0.8) == 10.0 and ranking.seconds_to(late, 0.8) == 30.0
    assert math.isinf(ranking.seconds_to(never_high, 0.8))
    order = ranking.run_order([never_low, never_high, late, slow])
    assert [r["preset"] for r in order] == ["a", "b", "c", "d"]
    assert ranking.preset_order([never_low, never_high, late, slow]) == ["a", "b", "c", "d"]


def test_the_correlation_of_learner_and_whatif_rankings_on_a_hand_made_table():
    rows = [_row("a", [0.9] * 12), _row("b", [0.0] * 2 + [0.9] * 10), _row("c", [0.1] * 12)]
    assert ranking.preset_order(rows) == ["a", "b", "c"]
    assert ranking.whatif_order(rows) == ["c", "b", "a"]  # whatif: c > b > a per hour
    assert ranking.spearman(ranking.preset_order(rows), ranking.whatif_order(rows)) == -1.0
    assert ranking.spearman(["a", "b", "c"], ["a", "c", "b"]) == pytest.approx(0.5)
    assert ranking.spearman(["a"], ["a"]) is None
    assert "Spearman -1.00" in ranking.report(rows, 12)
    json.dumps(rows)  # the rows are what the table stores


def test_the_report_shows_only_the_runs_of_its_command(tmp_path, capsys):
    def run(settings: str, overrides: list[str], steps: int = 3, seed: int = 0) -> dict:
        row = _row("per-group", [0.1] * steps, seed=seed, whatif=1.0)
        return {**row, "settings": settings, "overrides": overrides, "whatif": {"per-group": 1.0}}

    study = list(learning.SETTINGS_SETS["study"])
    table = tmp_path / "runs.jsonl"
    rows = [
        run("study", study),
        run("study", [*study, "is_correction=tis"]),  # more items: a set of its own
        run("study", study, seed=7),  # a seed the command does not name
        run("study", study, steps=4),  # another length
        run("hard", ["hard_task_share=0.2", "batch_size=128"]),  # an older set
    ]
    table.write_text("".join(json.dumps(row) + "\n" for row in rows))
    common = ["--report-only", "--presets", "per-group", "--steps", "3", "--table", str(table)]
    learning.main([*common, "--settings", "study", "--seeds", "0", "1"])
    text = capsys.readouterr().out
    label = " ".join(study)
    assert text.count("### ") == 2 and f"### study ({label})\n" in text
    assert f"### study ({label} is_correction=tis)" in text
    assert text.count("| per-group | 1 |") == 2 and "### hard" not in text
    learning.main([*common, "--settings", "study", "--seeds", "0", "--set", "is_correction=tis"])
    text = capsys.readouterr().out
    assert text.count("### ") == 1 and "is_correction=tis)" in text


def test_the_report_compares_rewards_at_the_wall_second_every_run_reached():
    long = {**_row("a", [0.2] * 10 + [0.9] * 20), "steps": 30}  # 30 s
    short = {**_row("b", [0.5] * 12), "steps": 30}  # 12 s: the shortest run
    text = ranking.report([long, short], 30)
    assert "| final reward | reward at 12 s |" in text
    assert "| a | 1 | 15 (15-15) | 19 (19-19) | 0.900 | 0.340 |" in text  # 8 x 0.2, 2 x 0.9
    assert "| b | 1 | 10 (10-10) | never (0/1 did) | 0.500 | 0.500 |" in text
