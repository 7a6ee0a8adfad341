"""The learning study's smallest budget against real `vllm serve` (`--backend vllm`).

`benchmarks/learning.py --backend vllm` runs each cell's `rolloutlog train` against
started vLLM servers; here two batches of one sweep cell (bound 1, `drop`, no correction,
with `interrupt`: every update pauses vLLM in abort mode) show that a row comes back
whole, held-out evaluation and per-step diagnostics included, marked as vLLM's and
reported apart from the twin's.
"""

from __future__ import annotations

import functools
import importlib
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # as `python benchmarks/learning.py` has it
learning = importlib.import_module("learning")
ranking = importlib.import_module("learning_report")

TINY = ("batch_size=16", "max_inflight=16", "group_size=4")


def test_the_sweeps_smallest_budget_runs_against_vllm(vllm, tmp_path):
    table = tmp_path / "runs.jsonl"
    found = learning.variants([1], ["drop"], ["none"], sync=False)
    ran = learning.study(
        presets=["per-episode+interrupt"], seeds=[0], steps=2, settings=["hard"], table=table,
        extra=TINY, variant_sets=found, backend="vllm", progress=lambda line: None,
        runner=functools.partial(learning.run_one, servers=[s for s in vllm if s.running]),
    )  # fmt: skip
    assert ran == 1
    rows = learning.load_table(table)
    (row,) = rows
    assert row["ok"] and row["backend"] == "vllm", row
    # pruning at the trainer may cut a stale episode from a batch of 16: at most 32 train
    assert 0 < row["episodes_trained"] == sum(row["trained_ages"].values()) <= 32
    assert [e["step"] for e in row["eval"]] == [2] and 0.0 <= row["eval"][0]["greedy"] <= 1.0
    assert [d["step"] for d in row["diagnostics"]] == [1, 2]
    assert 0 < row["batch_cpu_s"][0] <= row["cpu_s"]  # the servers' CPU seconds counted too
    assert learning.reported(rows, ["hard"], [0], TINY) == []  # the twin's report
    mine = learning.reported(rows, ["hard"], [0], TINY, backend="vllm")
    assert "| hard | per-episode+interrupt | b1 drop none | 1 |" in ranking.sweep_report(
        mine, 2, 0.5
    )
