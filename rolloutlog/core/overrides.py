"""`--set KEY=VALUE` keys, qualified once for every command that takes them.

A command's settings come in sections (`run` and `world` for the simulator, `run` and
`live` for training); `section.key` names one explicitly, a bare `key` names the one
section that has it. The same setting given twice (`batch_size` and `run.batch_size`) is
refused rather than letting one value silently win, and so is a key the command keeps
for itself (the run seed, which `--seed` sets).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rolloutlog.core.config import ConfigError


def qualify_overrides(
    overrides: Mapping[str, Any],
    sections: Mapping[str, frozenset[str]],
    *,
    reserved: Mapping[str, str] | None = None,
) -> dict[tuple[str, str], Any]:
    """Each override under its `(section, key)`; `reserved` maps `section.key` to why
    `--set` may not give it. Refusals (`ConfigError`) name the `--set` options."""
    qualified: dict[tuple[str, str], Any] = {}
    named: dict[tuple[str, str], str] = {}
    for key, value in overrides.items():
        where = qualify(key, sections, reserved or {})
        if where in qualified:
            raise ConfigError(
                f"--set {named[where]} and --set {key}: two values for {where[0]}.{where[1]}; "
                "give one"
            )
        qualified[where], named[where] = value, key
    return qualified


def qualify(
    key: str, sections: Mapping[str, frozenset[str]], reserved: Mapping[str, str]
) -> tuple[str, str]:
    """`(section, key)` of one `--set` key; `ConfigError` when unknown or ambiguous."""
    section, dot, name = key.partition(".")
    if not dot:
        owners = [s for s, keys in sections.items() if key in keys]
        if len(owners) > 1:
            raise ConfigError(
                f"--set {key}: ambiguous, name " + " or ".join(f"{s}.{key}" for s in owners)
            )
        if not owners:
            known = "; ".join(f"{s} keys: {_list(keys)}" for s, keys in sections.items())
            raise ConfigError(f"--set {key}: unknown key; {known}")
        section, name = owners[0], key
    elif section not in sections:
        raise ConfigError(
            f"--set {key}: the section must be " + " or ".join(f"`{s}`" for s in sections)
        )
    elif name not in sections[section]:
        raise ConfigError(
            f"--set {key}: unknown key; known {section} keys: {_list(sections[section])}"
        )
    why = reserved.get(f"{section}.{name}")
    if why is not None:
        raise ConfigError(f"--set {key}: {why}")
    return section, name


def _list(keys: frozenset[str]) -> str:
    return ", ".join(sorted(keys))
