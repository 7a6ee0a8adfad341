"""What the rules between events (`events.log_rules`: one `run_finished`, `version_live`
only after its `version_pending`) cost the commands that read a log: `replay` and `verify`
of one log with the rules checked and with `LogRules.batch` made a no-op, in CPU seconds of
this process, the two interleaved round by round, best of `--rounds`.

    .venv/bin/python benchmarks/log_rules.py --log big.arrow --rounds 3

The log: any, such as `rolloutlog simulate --steps 9800 --log big.arrow` (2.0M events, the
figure in benchmarks/RESULTS.md). Prints each side's best CPU seconds
and the ratio with/without; `read` is reading and verifying the record batches alone, the
part of every command that the rules add to.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.log_rules import LogRules
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import open_log
from rolloutlog.replay.verify import verify_log


@contextmanager
def rules_off() -> Iterator[None]:
    """`LogRules.batch` checks nothing for the block."""
    checked = LogRules.batch
    LogRules.batch = lambda self, first_seq, batch: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        LogRules.batch = checked  # type: ignore[method-assign]


def cpu_seconds(work: Callable[[], Any]) -> float:
    began = time.process_time()
    work()
    return time.process_time() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, required=True, help="the log to read")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    log = args.log
    print(f"log: {log}, {LogReader(log).info().events:,} events")
    commands: dict[str, Callable[[], Any]] = {
        "read": lambda: sum(len(b) for b in LogReader(log, warn=False).batches()),
        "replay": lambda: replay_log(open_log(log)),
        "verify": lambda: verify_log(open_log(log)),
    }
    for name, work in commands.items():
        best = {"with": float("inf"), "without": float("inf")}
        for _ in range(args.rounds):
            best["with"] = min(best["with"], cpu_seconds(work))
            with rules_off():
                best["without"] = min(best["without"], cpu_seconds(work))
        print(
            f"{name:7s} with the rules {best['with']:7.2f} s CPU, without {best['without']:7.2f} s"
            f"; with / without = {best['with'] / best['without']:.3f}"
        )


if __name__ == "__main__":
    main()
