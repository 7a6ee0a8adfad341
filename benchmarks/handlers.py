"""What dispatching an event to its handler costs: a `match` on the event classes, or a
table keyed by the exact class (`core.handlers.Handlers`).

Both call the same do-nothing handler per kind, over the events of a simulated log
(`examples/simulated.arrow` by default), in the order the deciders see them, so the
figure is the dispatch alone, on the real mix of kinds. Prints the time per event of each
and their ratio; the deciders use whichever costs less (benchmarks/RESULTS.md).

    .venv/bin/python benchmarks/handlers.py [LOG] [--rounds N]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from rolloutlog.core.handlers import Handlers
from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    LimitSet,
    RunFinished,
    VersionPending,
)


def _noop(state: list[int], event: Event) -> None:
    state[0] += 1


# The sink's apply table: ten kinds, in the order the sink lists them.
KINDS: tuple[type[Event], ...] = (
    EpisodeCompleted,
    EpisodeFailed,
    EpisodeDispatched,
    EpisodesCancelled,
    EpisodeDropped,
    GroupScored,
    BatchShipped,
    GroupOpened,
    VersionPending,
    RunFinished,
)
HANDLERS: Handlers[list[int], None] = Handlers()
for kind in KINDS:
    HANDLERS.on(kind, _noop)
TABLE = HANDLERS.by_kind


def by_table(state: list[int], event: Event) -> None:
    handler = TABLE.get(type(event))  # as the deciders' check and apply do
    if handler is not None:
        handler(state, event)


def by_match(state: list[int], event: Event) -> None:
    match event:
        case EpisodeCompleted():
            _noop(state, event)
        case EpisodeFailed():
            _noop(state, event)
        case EpisodeDispatched():
            _noop(state, event)
        case EpisodesCancelled():
            _noop(state, event)
        case EpisodeDropped():
            _noop(state, event)
        case GroupScored():
            _noop(state, event)
        case BatchShipped():
            _noop(state, event)
        case GroupOpened():
            _noop(state, event)
        case VersionPending():
            _noop(state, event)
        case RunFinished():
            _noop(state, event)
        case LimitSet():
            pass
        case _:
            pass


def _time(dispatch: Callable[[list[int], Event], None], events: list[Event]) -> float:
    state = [0]
    start = time.process_time()
    for event in events:
        dispatch(state, event)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", nargs="?", type=Path, default=Path("examples/simulated.arrow"))
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    events = list(LogReader(args.log))
    table = matched = 0.0
    for _ in range(args.rounds):  # interleaved, so that a load change hits both alike
        table += _time(by_table, events)
        matched += _time(by_match, events)
    per = 1e9 / (len(events) * args.rounds)
    print(f"{len(events):,} events x {args.rounds} rounds")
    print(f"table: {table * per:6.1f} ns/event")
    print(f"match: {matched * per:6.1f} ns/event")
    print(f"match / table = {matched / table:.2f}")


if __name__ == "__main__":
    main()
