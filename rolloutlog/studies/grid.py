"""The grid of a sweep: scenarios × presets × `--set` ranges × seeds, one `Cell` per run.

A cell is everything one `simulate --json` run needs, resolved up front (the scenario's
own seed, steps and policy filled in), so that it can be sent to another process or
machine, and so that a results table can tell which cells it already holds.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Hashable, Sequence
from typing import Any, Final

import attrs

from rolloutlog.core.config import ConfigError, parse_overrides
from rolloutlog.runs.simulate import policy_name
from rolloutlog.runtime.sim.scenario import (
    Scenario,
    load_scenario,
    resolve_overrides,
    run_overrides,
)
from rolloutlog.studies.policy_runs import policy_runs

Settings = tuple[tuple[str, Any], ...]
MAX_CELLS: Final = 10_000  # `--max-cells`' default: a grid larger is more likely a typo
MAX_SEED: Final = 2**63 - 1  # the table's seed column is int64
SCALAR_KINDS: Final = frozenset({"number", "boolean", "str"})


@attrs.frozen(kw_only=True)
class Cell:
    """One run of a sweep: a scenario (built-in name or file) under a preset, seed, settings."""

    source: str
    name: str
    digest: str  # `scenario_digest` of the scenario
    preset: str
    seed: int
    steps: int
    settings: Settings = ()
    check: bool = False

    def scenario(self) -> Scenario:
        """The scenario this cell runs, built as `simulate --policy` builds it: `--set`
        values, seed and steps, then the preset, whose keys an explicit `--set` overrides."""
        settings = dict(self.settings)
        scenario = load_scenario(self.source, settings).with_seed(self.seed)
        return scenario.with_steps(self.steps).with_policy(self.preset, run_overrides(settings))

    def key(self, setting_keys: Sequence[str]) -> tuple[Any, ...]:
        """The cell's identity in a results table whose setting columns are `setting_keys`."""
        settings = dict(self.settings)
        return (
            self.name,
            self.preset,
            self.seed,
            self.steps,
            *(settings.get(k) for k in setting_keys),
        )


def parse_seeds(text: str, most: int = MAX_CELLS) -> list[int]:
    """`0-4`, `0,3,7` or a mix (`0-2,9`): distinct seeds in 0..2**63-1 (a seed is an int64
    column of the table), in the order given; more than `most` is refused before any list
    is built, so that a typo like `0-100000000` fails at once instead of filling memory."""
    spans: list[range] = []
    for part in (p.strip() for p in text.split(",")):
        low, dash, high = part.partition("-")
        try:
            span = range(int(low), int(high) + 1) if dash else range(int(low), int(low) + 1)
        except ValueError:
            raise ConfigError(
                f"--seeds {text!r}: {part!r} is not a seed or a range like 0-4"
            ) from None
        if not span or span.start < 0:
            raise ConfigError(f"--seeds {text!r}: {part!r} is an empty or negative range")
        if span[-1] > MAX_SEED:
            raise ConfigError(f"--seeds {text!r}: {span[-1]} is above the largest seed {MAX_SEED}")
        spans.append(span)
    count = sum(len(span) for span in spans)
    if count > most:
        raise ConfigError(f"--seeds {text!r}: {count:,} seeds, more than {_cap(most)}")
    seeds = [seed for span in spans for seed in span]
    twice = _first_repeat(seeds)
    if twice is not None:
        raise ConfigError(f"--seeds {text!r}: names seed {twice} twice")
    return seeds


def parse_set_ranges(items: Sequence[str]) -> dict[str, list[Any]]:
    """`--set key=v1,v2,...` options to qualified keys (`run.key`, `world.key`) and values.

    Each value is read like `simulate --set` reads one (TOML, bare words as strings). The
    values of one key are single values, all numbers or all of one type, so that they make
    one column, and distinct, so that no cell runs twice.
    """
    ranges: dict[str, list[Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip() or not raw.strip():
            raise ConfigError(f"--set {item!r}: expected key=value[,value...]")
        parts = raw.split(",")
        empty = [str(n) for n, part in enumerate(parts, 1) if not part.strip()]
        if empty:
            raise ConfigError(f"--set {item!r}: value {', '.join(empty)} of {len(parts)} is empty")
        values = [parse_overrides([f"{key}={v}"])[key.strip()] for v in parts]
        (qualified,) = resolve_overrides({key.strip(): None})
        if qualified in ranges:
            raise ConfigError(f"--set {item!r}: {qualified} is set twice")
        kinds = {value_kind(value) for value in values}
        if kinds - SCALAR_KINDS:
            raise ConfigError(
                f"--set {item!r}: a value to sweep is a number, true/false or a word, "
                f"not a {(kinds - SCALAR_KINDS).pop()}"
            )
        if len(kinds) > 1:
            raise ConfigError(f"--set {item!r}: mixes {' and '.join(sorted(kinds))} values")
        twice = _first_repeat(values)
        if twice is not None:
            raise ConfigError(f"--set {item!r}: names {twice!r} twice")
        ranges[qualified] = values
    return ranges


def value_kind(value: Any) -> str:
    """What kind of column a value makes: number (int or float), boolean, str, ..."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def _first_repeat(values: Sequence[Hashable]) -> Hashable | None:
    """The first value equal to an earlier one (4 and 4.0 alike: a table holds one cell)."""
    seen: set[Hashable] = set()
    for value in values:
        if value in seen:
            return value
        seen.add(value)
    return None


def _cap(most: int) -> str:
    return f"the {most:,} cells a sweep may run (--max-cells)"


def expand(
    scenarios: Sequence[str],
    presets: Sequence[str] | None,
    seeds: Sequence[int] | None,
    ranges: dict[str, list[Any]],
    steps: int | None,
    *,
    check: bool = False,
    most_cells: int = MAX_CELLS,
) -> list[Cell]:
    """Every cell of the grid, each checked by building its scenario (errors name the cell).

    Without presets a scenario runs under its own policy; without seeds, its own seed;
    without steps, its own steps. Refused: a grid of more than `most_cells` cells (before
    any is made), two scenarios of one name (a table knows a cell by the scenario's name),
    and two presets that a `--set` makes one policy (as `simulate --compare` refuses them).
    """
    factors = {
        "scenario": len(scenarios),
        "preset": len(presets or [None]),
        "--set combination": math.prod(len(values) for values in ranges.values()),
        "seed": len(seeds or [None]),
    }
    count = math.prod(factors.values())
    if count > most_cells:
        shown = " × ".join(f"{n:,} {what}{'' if n == 1 else 's'}" for what, n in factors.items())
        raise ConfigError(f"the grid has {count:,} cells ({shown}), more than {_cap(most_cells)}")
    cells: list[Cell] = []
    combos = [
        tuple(zip(ranges, values, strict=True)) for values in itertools.product(*ranges.values())
    ]
    for source, base in _scenarios(scenarios).items():
        digest = scenario_digest(base)
        for settings in combos:
            for preset in presets or [policy_name(base)]:
                first, *others = [
                    Cell(
                        source=source,
                        name=base.name,
                        digest=digest,
                        preset=preset,
                        seed=seed,
                        steps=steps or base.steps,
                        settings=settings,
                        check=check,
                    )
                    for seed in seeds or [base.seed]
                ]
                _require_valid(first)  # the seed changes nothing a check could refuse
                cells += [first, *others]
            if presets:
                explicit = dict(settings)
                with_sets = load_scenario(source, explicit)
                policy_runs(with_sets, presets, run_overrides(explicit), "--compare")
    return cells


def _scenarios(sources: Sequence[str]) -> dict[str, Scenario]:
    """Each scenario by its source, refusing a source given twice or two of one name."""
    loaded: dict[str, Scenario] = {}
    by_name: dict[str, str] = {}
    for source in sources:
        if source in loaded:
            raise ConfigError(f"--scenario {source}: given twice")
        base = load_scenario(source)
        if base.name in by_name:
            raise ConfigError(
                f"--scenario {by_name[base.name]} and --scenario {source} are both named "
                f"{base.name!r}; a results table knows a cell by its scenario's name: "
                "rename the file"
            )
        loaded[source], by_name[base.name] = base, source
    return loaded


def scenario_digest(scenario: Scenario) -> str:
    """A fingerprint of what a scenario runs, apart from what a cell sets itself (seed,
    steps) and its description: its run and world keys and its recorded world. A table
    keeps it per row, so that resuming can tell an edited or other scenario of the name."""
    run = {k: v for k, v in scenario.run.to_dict().items() if k != "seed"}
    trace = None if scenario.trace is None else scenario.trace.to_mapping()
    text = json.dumps(
        {"run": run, "world": scenario.world.to_dict(), "trace": trace}, sort_keys=True
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _require_valid(cell: Cell) -> None:
    try:
        cell.scenario()
    except ConfigError as error:
        shown = " ".join(f"--set {k}={v}" for k, v in cell.settings)
        raise ConfigError(f"scenario {cell.source} under {cell.preset} {shown}: {error}") from None
