"""Which policy each preset runs once `--set` has had its say; `simulate` and `sweep` share it.

An explicit `--set` of a policy key wins over a preset (`Scenario.with_policy`), so two
presets can end up running the same policy: `--set staleness=per-group --compare
per-episode,per-group` runs per-group twice. Both commands refuse that, naming the two
presets and the `--set` options that made them one, rather than run one policy twice under
two labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from rolloutlog.core.config import ConfigError
from rolloutlog.core.presets import preset_overrides
from rolloutlog.runs.simulate import policy_name
from rolloutlog.runtime.sim.scenario import Scenario


@attrs.frozen
class PolicyRun:
    """A preset applied to a scenario, and the policy it actually runs."""

    preset: str
    policy: str
    scenario: Scenario
    sets: str  # the explicit `--set` options of the preset's keys ("" when none)


def policy_runs(
    base: Scenario, presets: Sequence[str], explicit: Mapping[str, Any], option: str
) -> list[PolicyRun]:
    """`base` under each preset with the `explicit` run keys winning over the preset's;
    errors start with `option` (`--compare`, `--policy`) and name the preset."""
    runs: dict[str, PolicyRun] = {}
    for preset in presets:
        try:
            scenario = base.with_policy(preset, explicit)
        except ConfigError as error:
            raise ConfigError(f"{option} {preset}: {error}") from error
        name = policy_name(scenario)
        keys = preset_overrides(preset)
        sets = " ".join(f"--set {k}={_toml(v)}" for k, v in explicit.items() if k in keys)
        if name in runs:
            why = f" under {sets}" if sets else ""  # else the presets name one policy two ways
            raise ConfigError(
                f"{option}: presets {runs[name].preset} and {preset} both run {name}{why}"
            )
        runs[name] = PolicyRun(preset, name, scenario, sets)
    return list(runs.values())


def _toml(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
