"""One simulated run and its `simulate --json` report: replay's summary plus the sim metrics.

The summary is the shadow account's (`core.account`), which observes the reaction loop as
it appends instead of folding its output a second time; it checks every property as it
counts. The report lists what it found with `check=True` (which also runs `validate_event`
on the written events); without it the report's `invariant_violations` is None (not
reported), and the log is still checked in full wherever it is read (`verify`, `replay`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import attrs

from rolloutlog.core.account import Account
from rolloutlog.core.presets import BASES, FIELD, NAMED, RULES, preset_overrides
from rolloutlog.events.errors import LogError
from rolloutlog.events.log_writer import BATCH_EVENTS_MAX, DEFAULT_BATCH_EVENTS, LogWriter
from rolloutlog.events.types import Event
from rolloutlog.events.whole_file import written_whole
from rolloutlog.replay.step_metrics import StepMetrics
from rolloutlog.runtime.sim.scenario import Scenario
from rolloutlog.runtime.sim.simulation import SimResult, SimulationBoundError, simulate

OnStep = Callable[[int], None]  # each shipped step of a run
# shows one policy's run (named, with its scenario): a context around it, and its `OnStep`
Watch = Callable[[str, Scenario], AbstractContextManager[OnStep | None]]


@attrs.frozen
class PolicyRuns:
    """What `run_policies` returns: each policy's `--json` object and result, by name."""

    reports: dict[str, dict[str, Any]]
    results: dict[str, SimResult]

    @property
    def series(self) -> dict[str, list[tuple[float, float]]]:
        """Each policy's wasted-work series, for `--plot`."""
        return {name: result.wasted_series for name, result in self.results.items()}


class PolicyRunError(Exception):
    """A policy's run stopped: by `SimulationBoundError`, or an `OSError` / `LogError`
    writing its log (`error`); names the run, so that a command can say which."""

    def __init__(
        self, name: str, scenario: Scenario, log_path: Path | None, error: Exception
    ) -> None:
        super().__init__(f"{name}: {error}")
        self.name, self.scenario, self.log_path, self.error = name, scenario, log_path, error


def run_policies(
    policies: Mapping[str, Scenario],
    *,
    log_paths: Mapping[str, Path | None] | None = None,
    watch: Watch | None = None,
    check: bool = False,
) -> PolicyRuns:
    """Run each policy's scenario in turn (`run_policy`), its log at `log_paths[name]`,
    each shown by `watch` (e.g. a progress bar); the first failure raises `PolicyRunError`."""
    reports: dict[str, dict[str, Any]] = {}
    results: dict[str, SimResult] = {}
    for name, scenario in policies.items():
        log_path = None if log_paths is None else log_paths[name]
        with nullcontext(None) if watch is None else watch(name, scenario) as on_step:
            try:
                reports[name], results[name] = run_policy(
                    scenario, log_path=log_path, on_step=on_step, check=check
                )
            except SimulationBoundError as error:
                raise PolicyRunError(name, scenario, log_path, error) from error
            except (OSError, LogError) as error:
                if log_path is None:
                    raise
                raise PolicyRunError(name, scenario, log_path, error) from error
    return PolicyRuns(reports, results)


def run_policy(
    scenario: Scenario,
    *,
    log_path: Path | None = None,
    on_step: Callable[[int], None] | None = None,
    check: bool = False,
) -> tuple[dict[str, Any], SimResult]:
    """Simulate `scenario`: its `--json` object (replay summary + sim metrics) and result."""
    account, ages = Account(scenario.run, raise_on_violation=False), StepMetrics(keep_rows=False)
    with _log_writer(log_path, check_events=check) as write:
        result = simulate(scenario, observers=(account, ages), on_events=write, on_step=on_step)
    report = {
        "scenario": scenario.name,
        "policy": policy_name(scenario),
        "seed": scenario.seed,
        "log": str(log_path) if log_path else None,
        **account.summary(),
        "invariant_violations": list(account.violations) if check else None,
        **ages.run_values(),
        **result.metrics,
    }
    return report, result


@contextmanager
def _log_writer(
    path: Path | None, *, check_events: bool
) -> Iterator[Callable[[list[Event]], None] | None]:
    """A function that appends events to the Arrow log at `path` (None: no log).

    The log is written whole (`events.whole_file`): under the output's lock, beside `path`,
    renamed onto it when the run is over, so the log recorded there before stays until the
    new one is complete, and a run that fails (a full disk) leaves nothing behind. A
    simulated log is reproducible from its scenario and seed, so commits stay in the OS
    cache until `close()` fsyncs once. The simulator hands over one world event and
    everything it set off at a time, and a batch is committed only between two such
    reactions, as the live driver does.
    """
    if path is None:
        yield None
        return
    with (
        written_whole(path) as temporary,
        LogWriter(
            temporary,
            mode="overwrite",
            batch_events=BATCH_EVENTS_MAX,
            fsync=False,
            check_events=check_events,
        ) as writer,
    ):
        # The writer is handed a batch's worth at a time, since its per-call checks cost as
        # much as buffering the events.
        pending: list[Event] = []

        def write(events: list[Event]) -> None:
            pending.extend(events)
            if len(pending) >= DEFAULT_BATCH_EVENTS:
                writer.extend(pending)
                writer.commit()
                pending.clear()

        yield write
        writer.extend(pending)


def policy_name(scenario: Scenario) -> str:
    """The preset a scenario's run config matches: a named one, else a base (the field's,
    then rolloutlog's) with the rules it adds; else its staleness policy plus its rules.
    So a field preset runs under its own name (a log per preset with `--compare field`,
    and `whatif` re-runs the name), and a run that some field row describes is named by
    it; a row that sets exactly a named preset's keys is that preset."""
    run = attrs.asdict(scenario.run)  # every key, the field presets' at their defaults too

    def matches(keys: dict[str, Any]) -> bool:
        return all(run[key] == value for key, value in keys.items())

    rules = [rule for rule, keys in RULES.items() if matches(keys)]
    with_rules = (
        "+".join([base, *(r for r in rules if not _implied(RULES[r], base))])
        for base in (*FIELD, *BASES)
    )
    return next(
        (name for name in (*NAMED, *with_rules) if matches(preset_overrides(name))),
        "+".join([scenario.run.staleness, *rules]),
    )


def _implied(keys: dict[str, Any], base: str) -> bool:
    """Whether preset `base` already sets `keys` (a rule it needs no `+RULE` for)."""
    own = preset_overrides(base)
    return all(own.get(key) == value for key, value in keys.items())
