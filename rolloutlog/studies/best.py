"""`sweep --best`: the best configuration per scenario under a constraint the user writes.

    max trained_per_hour where discarded <= 0.25*per-episode
    min wasted where trained_per_hour >= per-episode and max_trained_age <= 2

Grammar (words separated by spaces; `and` joins conditions):

    BEST      := ("max" | "min") METRIC ["where" CONDITION ("and" CONDITION)*]
    CONDITION := METRIC ("<=" | "<" | ">=" | ">") BOUND
    BOUND     := NUMBER | [NUMBER "*"] PRESET

A METRIC is any numeric column of the results table, or a short name: trained_per_hour,
discarded, wasted, idle, mean_age (see `ALIASES`). A configuration is a preset and its
`--set` values within one scenario and step count; its figure is the mean over the seeds
it ran. A PRESET bound is that metric of the same configuration under the named preset
(same scenario, steps and settings, same seeds): `discarded <= 0.25*per-episode` keeps
what discards at most a quarter of what per-episode discards.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

import attrs

from rolloutlog.core.presets import preset_overrides

ALIASES: Final = {
    "trained_per_hour": "trained_episodes_per_hour",
    "discarded": "finished_rollouts_discarded",
    "wasted": "rollout_seconds_wasted",
    "idle": "trainer_idle_fraction",
    "mean_age": "mean_trained_age",
}
OPERATORS: Final = {
    "<=": lambda a, b: a <= b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    ">": lambda a, b: a > b,
}
Key = tuple[str, str, int, tuple[tuple[str, Any], ...]]  # scenario, preset, steps, settings
_CONDITION = re.compile(r"^(?P<metric>\S+?)\s*(?P<op><=|>=|<|>)\s*(?P<bound>\S+)$")
_BOUND = re.compile(r"^(?:(?P<factor>[0-9.eE+-]+)\*)?(?P<preset>[A-Za-z][\w+-]*)$")


class BestSyntaxError(ValueError):
    """A `--best` text that the grammar does not accept; the message names the part."""


@attrs.frozen
class Condition:
    metric: str
    op: str
    number: float | None = None  # a plain number bound
    factor: float = 1.0  # or factor * (metric of the same configuration under `preset`)
    preset: str | None = None

    def describe(self) -> str:
        bound = f"{self.number:g}" if self.preset is None else f"{self.factor:g}*{self.preset}"
        return f"{self.metric} {self.op} {bound}"


@attrs.frozen
class Objective:
    direction: str  # max | min
    metric: str
    conditions: tuple[Condition, ...] = ()

    def describe(self) -> str:
        text = f"{self.direction} {self.metric}"
        if self.conditions:
            text += " where " + " and ".join(c.describe() for c in self.conditions)
        return text


def parse_best(text: str, columns: Sequence[str]) -> Objective:
    """Parse a `--best` text; metrics must name numeric columns of the results table."""
    # Single spaces and one at the end, so that a `where` ending the text splits off too.
    head, where, tail = (" ".join(text.split()) + " ").partition(" where ")
    words = head.split()
    if len(words) != 2 or words[0] not in ("max", "min"):
        raise BestSyntaxError(f"--best {text!r}: must start with 'max METRIC' or 'min METRIC'")
    conditions = []
    if where:
        if not tail.strip():
            raise BestSyntaxError(
                f"--best {text!r}: the 'where' clause is empty; e.g. 'where discarded <= 10'"
            )
        for part in re.split(r"\s+and\s+", tail.strip()):
            conditions.append(_condition(part, text, columns))
    return Objective(words[0], _metric(words[1], text, columns), tuple(conditions))


def _metric(name: str, text: str, columns: Sequence[str]) -> str:
    column = ALIASES.get(name, name)
    if column not in columns:
        raise BestSyntaxError(
            f"--best {text!r}: unknown metric {name!r}; short names: {', '.join(ALIASES)}, "
            "or any numeric column of the results"
        )
    return column


def _condition(part: str, text: str, columns: Sequence[str]) -> Condition:
    match = _CONDITION.match(part.strip())
    if match is None:
        raise BestSyntaxError(f"--best {text!r}: {part!r} is not 'METRIC <=|<|>=|> BOUND'")
    metric, op, bound = _metric(match["metric"], text, columns), match["op"], match["bound"]
    try:
        return Condition(metric, op, number=float(bound))
    except ValueError:
        pass
    preset = _BOUND.match(bound)
    if preset is None:
        raise BestSyntaxError(f"--best {text!r}: bound {bound!r} is not NUMBER or [NUMBER*]PRESET")
    try:
        factor = float(preset["factor"]) if preset["factor"] else 1.0
        preset_overrides(preset["preset"])
    except ValueError as error:
        raise BestSyntaxError(f"--best {text!r}: bound {bound!r}: {error}") from None
    return Condition(metric, op, factor=factor, preset=preset["preset"])


@attrs.frozen
class Configuration:
    """A preset and its settings in one scenario, with its figures averaged over seeds."""

    scenario: str
    preset: str
    steps: int
    settings: tuple[tuple[str, Any], ...]
    seeds: int
    means: Mapping[str, float | None]


def configurations(
    rows: Sequence[Mapping[str, Any]], setting_keys: Sequence[str]
) -> list[Configuration]:
    """Group rows by scenario, preset, steps and settings; numeric columns averaged over seeds."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        settings = tuple((k, row.get(k)) for k in setting_keys if row.get(k) is not None)
        groups.setdefault((row["scenario"], row["preset"], row["steps"], settings), []).append(row)
    found = []
    for (scenario, preset, steps, settings), members in groups.items():
        means = {key: _mean([m.get(key) for m in members]) for key in metric_columns(members[0])}
        found.append(Configuration(scenario, preset, steps, settings, len(members), means))
    return found


def metric_columns(row: Mapping[str, Any]) -> list[str]:
    """The columns of a row that a configuration averages and `--best` may name: numbers,
    and nulls (a figure a run may leave out)."""
    return [key for key, value in row.items() if _is_number(value) or value is None]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _mean(values: list[Any]) -> float | None:
    if any(not _is_number(v) for v in values):
        return None
    return statistics.fmean(values)


@attrs.frozen
class Choice:
    """The best configuration of a scenario (None when no configuration meets the constraint)."""

    scenario: str
    best: Configuration | None
    candidates: int


def best_per_scenario(found: Sequence[Configuration], objective: Objective) -> list[Choice]:
    """Per scenario, the configuration that meets every condition and is best by the metric."""
    index = {(c.scenario, c.preset, c.steps, c.settings): c for c in found}
    require_bound_presets(objective, index)
    choices = []
    for scenario in dict.fromkeys(c.scenario for c in found):
        mine = [c for c in found if c.scenario == scenario]
        meeting = [
            c
            for c in mine
            if c.means.get(objective.metric) is not None
            and all(_meets(c, condition, index) for condition in objective.conditions)
        ]
        sign = 1.0 if objective.direction == "max" else -1.0
        best = max(
            meeting, key=lambda c: sign * float(c.means[objective.metric] or 0.0), default=None
        )
        choices.append(Choice(scenario, best, len(mine)))
    return choices


def require_bound_presets(objective: Objective, keys: Collection[Key]) -> None:
    """Refuse a PRESET bound for a configuration (`Key`) whose like under that preset is not
    among `keys`: a sweep checks its grid's cells so before it runs any."""
    for scenario, _, steps, settings in keys:
        for condition in objective.conditions:
            if (
                condition.preset is not None
                and (scenario, condition.preset, steps, settings) not in keys
            ):
                raise BestSyntaxError(
                    f"--best: {condition.describe()} needs preset {condition.preset!r}, which "
                    f"this sweep does not run on scenario {scenario!r}"
                    + (f" with {_settings_text(settings)}" if settings else "")
                    + " (add it to --compare)"
                )


def _meets(config: Configuration, condition: Condition, index: Mapping[Key, Configuration]) -> bool:
    value = config.means.get(condition.metric)
    if value is None:
        return False
    if condition.preset is None:
        bound = condition.number
    else:
        base = index[(config.scenario, condition.preset, config.steps, config.settings)]
        base_value = base.means.get(condition.metric)
        bound = None if base_value is None else condition.factor * base_value
    return bound is not None and bool(OPERATORS[condition.op](value, bound))


def _settings_text(settings: tuple[tuple[str, Any], ...]) -> str:
    return " ".join(f"{k}={v}" for k, v in settings)
