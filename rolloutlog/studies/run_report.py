"""One simulated run and its `simulate --json` report: replay's summary plus the sim metrics.

The summary is collected by observing the reaction loop as it appends, not by folding its
output a second time: the loop already holds the states a fold would rebuild. The
invariant checker observes the loop too, on request (`check=True`); so does `validate_event`
on the written events. Without it the report's `invariant_violations` is None (not checked),
and the log is still checked in full wherever it is read (`verify`, `replay`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rolloutlog.core.invariants import InvariantChecker
from rolloutlog.core.loop import Observer, ReactionLoop
from rolloutlog.core.presets import NAMED, RULES, preset_overrides
from rolloutlog.events.log_writer import LogWriter
from rolloutlog.events.types import Event
from rolloutlog.replay.step_metrics import StepMetrics
from rolloutlog.replay.summary import SummaryCollector
from rolloutlog.runtime.sim.scenario import Scenario
from rolloutlog.runtime.sim.simulation import SimResult, simulate


class SummaryObserver:
    """Replay's run summary and the age split (`StepMetrics`), collected from the loop as it
    appends (see `SummaryCollector`)."""

    def __init__(self, group_size: int) -> None:
        self.collector = SummaryCollector(group_size)
        self.ages = StepMetrics()

    def before(self, event: Event, loop: ReactionLoop) -> None:
        self.collector.observe(event, loop.sink_state)
        self.ages.observe(event)

    def observe(self, event: Event, loop: ReactionLoop) -> None:
        """Counted in `before`, which sees the sink state the event arrived at."""

    def settled(self, world_event: Event, loop: ReactionLoop) -> None:
        """Nothing to settle: the summary counts events as they come."""


def run_policy(
    scenario: Scenario,
    *,
    log_path: Path | None = None,
    on_step: Callable[[int], None] | None = None,
    check: bool = False,
) -> tuple[dict[str, Any], SimResult]:
    """Simulate `scenario`: its `--json` object (replay summary + sim metrics) and result."""
    summary = SummaryObserver(scenario.run.group_size)
    checker = InvariantChecker(scenario.run, raise_on_violation=False) if check else None
    observers: tuple[Observer, ...] = (summary,) if checker is None else (summary, checker)
    with _log_writer(log_path, check_events=check) as write:
        result = simulate(scenario, observers=observers, on_events=write, on_step=on_step)
    report = {
        "scenario": scenario.name,
        "policy": policy_name(scenario),
        "seed": scenario.seed,
        "log": str(log_path) if log_path else None,
        **summary.collector.summary([]),
        "invariant_violations": None if checker is None else list(checker.violations),
        **summary.ages.run_values(),
        **result.metrics,
    }
    return report, result


@contextmanager
def _log_writer(
    path: Path | None, *, check_events: bool
) -> Iterator[Callable[[list[Event]], None] | None]:
    """A function that appends events to the Arrow log at `path` (None: no log).

    A simulated log is reproducible from its scenario and seed, so `--log` overwrites, and
    commits stay in the OS cache until `close()` fsyncs once.
    """
    if path is None:
        yield None
        return
    with LogWriter(path, mode="overwrite", fsync=False, check_events=check_events) as writer:

        def write(events: list[Event]) -> None:
            for event in events:
                writer.append(event)

        yield write


def policy_name(scenario: Scenario) -> str:
    """The preset a scenario's run config matches, or its staleness policy plus its rules."""
    run = scenario.run.to_dict()
    for name in NAMED:
        if all(run[key] == value for key, value in preset_overrides(name).items()):
            return name
    rules = [rule for rule, keys in RULES.items() if all(run[k] == v for k, v in keys.items())]
    return "+".join([scenario.run.staleness, *rules])
