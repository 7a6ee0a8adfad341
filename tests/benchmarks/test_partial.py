"""benchmarks/partial.py on a tiny budget: freeze, interrupt, drain and recycle, a row each
of one markdown table per scenario, with the resumptions' prefill read off each log."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # as `python benchmarks/partial.py` has it
partial = importlib.import_module("partial")


def test_a_tiny_run_prints_a_row_per_way_with_prefill_only_where_work_resumes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    partial.main(["--seeds", "2", "--steps", "3", "--scenarios", "smoke,long-gen"])
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    header = [line for line in lines if line.startswith("| weight update |")]
    assert len(header) == 2
    columns = header[0].count("|") - 1
    assert columns == 2 + len(partial.COLUMNS)
    rows = {
        way: [line for line in lines if line.startswith(f"| `{way}` |")] for way in partial.WAYS
    }
    for way, found in rows.items():
        assert [row.count("|") - 1 for row in found] == [columns, columns], way
    prefill = {way: [row.split("|")[-2].strip() for row in found] for way, found in rows.items()}
    assert prefill["freeze"] == prefill["drain"] == ["0.00 s", "0.00 s"]
    assert "0.00 s" not in prefill["interrupt"]
    assert lines[-1].startswith("4 ways x 2 seeds x 3 steps per scenario, 2 scenarios")
    assert len(captured.err.splitlines()) == 2 * len(partial.WAYS)
