"""Scenarios: a named world plus run configuration, as TOML files.

A scenario file has top-level `description`, `steps` and `seed`, a `[run]` table of
`RunConfig` keys and a `[world]` table of `WorldConfig` keys; a world fitted to a log adds
a `[trace]` table (`runtime.sim.trace.Trace`). Built-in scenarios live next
to this module in `scenarios/`; any other path is read as a file. Overrides
(`--set key=value`) name `run.key`, `world.key`, or an unqualified key that exists in
exactly one of the two tables; setting `batch_size` or `token_batch_size` clears the
other. Everything is validated by the core's `build_config`, so every refusal names the
key.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import attrs

from rolloutlog.core.config import ConfigError, RunConfig, apply_overrides, parse_overrides
from rolloutlog.core.overrides import qualify_overrides
from rolloutlog.core.presets import preset_overrides
from rolloutlog.events.validate import INT64_MAX
from rolloutlog.runtime.sim.trace import Trace, refuse_unread_world_keys
from rolloutlog.runtime.sim.world_config import WORLD_KEYS, WorldConfig

RUN_KEYS = frozenset(f.name for f in attrs.fields(RunConfig))
SECTIONS = {"run": RUN_KEYS, "world": WORLD_KEYS}  # what `--set` may name
RESERVED = {
    "run.seed": "the run seed is no setting (simulate takes --seed; whatif keeps the "
    "recorded run's)"
}
TOP_LEVEL_KEYS = frozenset({"description", "steps", "seed", "run", "world", "trace"})
DEFAULT_STEPS = 100


@attrs.frozen(kw_only=True)
class Scenario:
    """A world and a run configuration, ready to simulate; `run.seed` is the scenario seed."""

    name: str
    description: str
    steps: int
    seed: int
    run: RunConfig
    world: WorldConfig
    trace: Trace | None = None  # a recorded world (`rolloutlog whatif --save-world`)

    def with_policy(self, policy: str, explicit: Mapping[str, Any] | None = None) -> Scenario:
        """The same world, under a policy preset (`core.presets`) that sets every policy key.

        `explicit` run keys (`--set`) win over the preset's: a preset never silently
        discards what the user set. `policy_name` then names the policy actually run.
        """
        return self.with_run(**{**preset_overrides(policy), **(explicit or {})})

    def with_run(self, **keys: Any) -> Scenario:
        """The same world, with these run configuration keys changed."""
        run = RunConfig.from_mapping(apply_overrides(self.run.to_dict(), keys), "run")
        return attrs.evolve(self, run=run)

    def with_seed(self, seed: int) -> Scenario:
        """The same scenario drawn from another seed (world streams and task source alike)."""
        return attrs.evolve(self, seed=seed, run=attrs.evolve(self.run, seed=seed))

    def with_steps(self, steps: int) -> Scenario:
        """The same scenario, run for `steps` shipped batches."""
        if steps < 1:
            raise ConfigError(f"steps: must be >= 1 (got {steps})")
        return attrs.evolve(self, steps=steps)


def scenario_names() -> list[str]:
    """The names of the built-in scenarios."""
    folder = resources.files(__package__).joinpath("scenarios")
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_scenario(name_or_path: str, overrides: Mapping[str, Any] | None = None) -> Scenario:
    """A built-in scenario by name, or a TOML file by path, with `overrides` applied."""
    text, source, name = _read(name_or_path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{source}: not valid TOML: {error}") from error
    return scenario_from_mapping(data, name=name, source=source, overrides=overrides)


def scenario_from_mapping(
    data: Mapping[str, Any],
    *,
    name: str = "custom",
    source: str = "scenario",
    overrides: Mapping[str, Any] | None = None,
) -> Scenario:
    """Build a scenario from parsed TOML (or any plain data), then apply `overrides`."""
    unknown = sorted(set(data) - TOP_LEVEL_KEYS)
    if unknown:
        raise ConfigError(
            f"{source}: unknown top-level key {unknown[0]!r}; "
            f"known: {', '.join(sorted(TOP_LEVEL_KEYS))}"
        )
    run = dict(_table(data, "run", source))
    world = dict(_table(data, "world", source))
    if "seed" in run:
        raise ConfigError(f"{source}[run].seed: the run seed is the scenario seed; set `seed`")
    run_overrides: dict[str, Any] = {}
    world_overrides: dict[str, Any] = {}
    for key, value in resolve_overrides(overrides or {}).items():
        section, _, field = key.partition(".")
        (run_overrides if section == "run" else world_overrides)[field] = value
    if "trace" in data:
        shared = world_overrides.get("inference", world.get("inference")) == "shared"
        refuse_unread_world_keys(world_overrides, shared=shared)
    world.update(world_overrides)
    run = apply_overrides(run, run_overrides)
    seed = _integer(data.get("seed", 0), f"{source}.seed", low=0, high=INT64_MAX)
    steps = _integer(data.get("steps", DEFAULT_STEPS), f"{source}.steps", low=1)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"{source}.description: must be a string (got {description!r})")
    return Scenario(
        name=name,
        description=description,
        steps=steps,
        seed=seed,
        run=RunConfig.from_mapping({**run, "seed": seed}, where=f"{source}[run]"),
        world=WorldConfig.from_mapping(world, where=f"{source}[world]"),
        trace=Trace.from_mapping(_table(data, "trace", source), f"{source}[trace]")
        if "trace" in data
        else None,
    )


def resolve_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Qualify every override key as `run.key` or `world.key`; refuse unknown or ambiguous."""
    qualified = qualify_overrides(overrides, SECTIONS, reserved=RESERVED)
    return {f"{section}.{key}": value for (section, key), value in qualified.items()}


def run_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The run keys among qualified overrides, unqualified (`run.batch_size` -> `batch_size`)."""
    return {k.partition(".")[2]: v for k, v in overrides.items() if k.startswith("run.")}


def parse_set_options(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """`--set key=value` strings to qualified overrides (TOML values, bare strings allowed)."""
    return resolve_overrides(parse_overrides(items))


def _table(data: Mapping[str, Any], section: str, source: str) -> Mapping[str, Any]:
    table = data.get(section, {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{source}[{section}]: must be a table (got {table!r})")
    return table


def _integer(value: Any, key: str, *, low: int, high: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ConfigError(f"{key}: must be an integer >= {low} (got {value!r})")
    if high is not None and value > high:
        raise ConfigError(f"{key}: must be at most {high}, the log's int64 (got {value})")
    return value


def _read(name_or_path: str) -> tuple[str, str, str]:
    """The text of a scenario, where it came from (for messages), and its name."""
    if name_or_path in scenario_names():
        folder = resources.files(__package__).joinpath("scenarios")
        text = folder.joinpath(f"{name_or_path}.toml").read_text(encoding="utf-8")
        return text, f"scenario {name_or_path!r}", name_or_path
    path = Path(name_or_path)
    if not path.is_file():
        raise ConfigError(
            f"scenario {name_or_path!r}: neither a built-in scenario "
            f"({', '.join(scenario_names())}) nor a file"
        )
    try:
        return path.read_text(encoding="utf-8"), str(path), path.stem
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text (byte {error.start + 1})") from error
