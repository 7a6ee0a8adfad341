"""The learning study's real-vLLM subset against the same cells on the CPU twin.

`benchmarks/learning.py --backend vllm` and `--backend twin` write the same cells' runs
(one table each, or one table for both: rows name their backend); this prints, per cell
that ran on both, each backend's mean and vLLM's difference from the twin with its 95%
Welch interval over seeds: the held-out greedy reward, CPU and wall seconds per batch, the
trained age, what was discarded, the trained length ratio and the importance ratio's ESS.

Run: `python benchmarks/learning_backends.py TABLE [TABLE ...] [--steps 50]`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from learning import backend_of, load_table
from learning_report import backend_effects


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("tables", type=Path, nargs="+", help="learning.py --table files")
    parser.add_argument("--steps", type=int, default=50, help="the runs' length in batches")
    args = parser.parse_args(argv)
    missing = [str(path) for path in args.tables if not path.is_file()]
    if missing:
        parser.exit(2, f"learning_backends.py: error: no table at {missing[0]}\n")
    rows = [r for path in args.tables for r in load_table(path) if r.get("ok", True)]
    twin = [r for r in rows if backend_of(r) == "twin"]
    vllm = [r for r in rows if backend_of(r) == "vllm"]
    print(backend_effects(twin, vllm, args.steps))


if __name__ == "__main__":
    main()
