"""What the account alone costs: CPU seconds to feed a recorded log's event objects to
`core.account.Account` and settle each world event's reactions, as `replay`'s plain fold
and the simulator's observer do, without the deciders or the digest.

The events are read once before the clock starts; the best of N rounds is printed, with
the violations found (0 on a consistent log). Run it against another revision's account
with PYTHONPATH at that revision's tree (`benchmarks/paired.py` unpacks one), on the same
log, to compare the two (benchmarks/RESULTS.md):

    .venv/bin/python benchmarks/account.py [LOG] [--rounds N]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rolloutlog.core.account import Account
from rolloutlog.core.config import RunConfig
from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.types import WORLD_KINDS, Event

DEFAULT_LOG = Path(__file__).resolve().parents[1] / "examples" / "simulated.arrow"


def fed(events: list[Event], config: RunConfig) -> tuple[float, int]:
    """(CPU seconds, violations) of one account fed `events`."""
    account = Account(config, raise_on_violation=False)
    last: Event | None = None
    start = time.process_time()
    for event in events:
        if event.kind in WORLD_KINDS:
            if last is not None:
                account.settled(last)
            last = event
        account.feed(event)
    if last is not None:
        account.settled(last)
    return time.process_time() - start, len(account.violations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", nargs="?", type=Path, default=DEFAULT_LOG)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    events = list(LogReader(options.log))
    config = RunConfig.from_mapping(events[0].config, startable=False)  # type: ignore[attr-defined]
    rounds = [fed(events, config) for _ in range(options.rounds)]
    seconds = min(spent for spent, _ in rounds)
    print(
        f"{options.log.name}: {len(events)} events, account best of {options.rounds}: "
        f"{seconds:.3f} s CPU ({seconds / len(events) * 1e6:.2f} µs per event), "
        f"violations {rounds[-1][1]}"
    )


if __name__ == "__main__":
    main()
