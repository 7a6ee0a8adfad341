"""One `rolloutlog` command's CPU seconds here against a base revision's, paired round by round.

    .venv/bin/python benchmarks/paired.py --base 95d0c4c --rounds 3 -- \\
        simulate --seed 3 --steps 1000 --set group_size=16 --set max_inflight=256 \\
        --set batch_size=128

The base is `git archive BASE` unpacked once under the system's temporary folder; both
sides run as `python -m rolloutlog ARGS` under this interpreter, with PYTHONPATH at their
tree, alternately (base, then this tree) in each round, so a machine shared with other work
disturbs both alike. The figure is the child's CPU seconds (user + system, from `wait4`),
which other work disturbs far less than wall time; each round prints both and the ratio
here / base, and the last line the median ratio. `--here-set KEY=VALUE` adds `--set
KEY=VALUE` to this tree's command only: a key the base does not know that names what the
base did without it (`--here-set inference=independent`: the world before the shared one).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def base_tree(revision: str) -> Path:
    """The source tree of `revision`, unpacked once (named by its full commit)."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{revision}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tree = Path(tempfile.gettempdir()) / f"rolloutlog-base-{commit}"
    if not (tree / "rolloutlog").is_dir():
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True)
        archive.check_returncode()
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(tree, filter="data")
    return tree


def cpu_seconds(tree: Path, args: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of `python -m rolloutlog ARGS` run from `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "rolloutlog", *args],
            cwd=scratch,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"rolloutlog {' '.join(args)} failed in {tree}")
    return usage.ru_utime + usage.ru_stime, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the revision to compare against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--here-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a `--set` for this tree's command only (a key the base does not have)",
    )
    parser.add_argument("command", nargs="+", help="the rolloutlog command and its options")
    options = parser.parse_args()
    base = base_tree(options.base)
    here_command = [*options.command, *(a for kv in options.here_set for a in ("--set", kv))]
    ratios = []
    for round_number in range(1, options.rounds + 1):
        base_cpu, base_wall = cpu_seconds(base, options.command)
        here_cpu, here_wall = cpu_seconds(ROOT, here_command)
        ratios.append(here_cpu / base_cpu)
        print(
            f"round {round_number}: base {base_cpu:6.2f} s CPU ({base_wall:6.2f} s wall)  "
            f"here {here_cpu:6.2f} s CPU ({here_wall:6.2f} s wall)  here/base {ratios[-1]:.3f}"
        )
    print(f"median here/base over {len(ratios)} rounds: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
