"""Write a scenario as a TOML file that `load_scenario` reads back (a fitted world, saved).

The standard library reads TOML but does not write it; a scenario needs only strings,
numbers, booleans, flat arrays and tables, so this writer covers exactly that. `None`
values are left out (TOML has no null; the loader's defaults restore them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from rolloutlog.runtime.sim.scenario import Scenario

ITEMS_PER_LINE = 12


def scenario_toml(scenario: Scenario) -> str:
    """The scenario file text: description, steps, seed, `[run]`, `[world]`, `[trace]`."""
    lines = [
        f"description = {_value(scenario.description)}",
        f"steps = {scenario.steps}",
        f"seed = {scenario.seed}",
    ]
    run = {k: v for k, v in scenario.run.to_dict().items() if k != "seed"}
    lines += _table("run", run)
    lines += _table("world", scenario.world.to_dict())
    if scenario.trace is not None:
        trace = scenario.trace.to_mapping()
        lines += _table("trace", {"seed": trace.pop("seed")})
        for name, columns in trace.items():
            lines += _table(f"trace.{name}", columns)
    return "\n".join(lines) + "\n"


def _table(name: str, values: Mapping[str, Any]) -> list[str]:
    lines = ["", f"[{name}]"]
    lines += [f"{key} = {_value(value)}" for key, value in values.items() if value is not None]
    return lines


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON string escapes are TOML's
    if isinstance(value, list | tuple):
        items = [_value(item) for item in value]
        if len(items) <= ITEMS_PER_LINE:
            return "[" + ", ".join(items) + "]"
        rows = [items[i : i + ITEMS_PER_LINE] for i in range(0, len(items), ITEMS_PER_LINE)]
        return "[\n" + "".join("  " + ", ".join(row) + ",\n" for row in rows) + "]"
    raise TypeError(f"cannot write {type(value).__name__} {value!r} as TOML")
