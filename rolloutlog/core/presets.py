"""Named staleness-policy presets, for `simulate --compare` and `--policy`.

A preset is a base policy and optional rules joined by `+`: `per-episode`, `per-group`,
`per-episode+capacity`, `per-episode+straggler+oldest-first`, ... `all` is
`per-episode+capacity+straggler+oldest-first`. A preset sets every policy key, so that a
scenario's own choice of, say, `admission` never leaks into a comparison.
"""

from __future__ import annotations

from typing import Any

from rolloutlog.core.config import ConfigError

BASES = ("per-episode", "per-group")
RULES: dict[str, dict[str, Any]] = {
    "capacity": {"admission": "capacity"},
    "straggler": {"straggler_cut": True},
    "oldest-first": {"batch_order": "oldest-first"},
}
ALIASES = {"all": "per-episode+capacity+straggler+oldest-first"}
NAMED = ("per-group", "per-episode", "per-episode+capacity", "per-episode+straggler", "all")
_OFF: dict[str, Any] = {"admission": "none", "straggler_cut": False, "batch_order": "fifo"}


def preset_overrides(name: str) -> dict[str, Any]:
    """The config keys that preset `name` sets; unknown parts are refused by name."""
    base, *rules = ALIASES.get(name, name).split("+")
    if base not in BASES:
        raise ConfigError(
            f"policy {name!r}: must start with one of {', '.join(BASES)} (or be 'all')"
        )
    overrides: dict[str, Any] = {"staleness": base, **_OFF}
    for n, rule in enumerate(rules):
        if rule not in RULES:
            raise ConfigError(
                f"policy {name!r}: unknown rule {rule!r}; known rules: {', '.join(RULES)}"
            )
        if rule in rules[:n]:
            raise ConfigError(f"policy {name!r}: names rule {rule!r} twice")
        overrides.update(RULES[rule])
    return overrides


def parse_policy_list(text: str) -> list[str]:
    """A comma-separated list of presets, each checked; duplicates are refused."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise ConfigError("policy list is empty; for example per-episode,per-group")
    for name in names:
        preset_overrides(name)
    if len(set(names)) != len(names):
        raise ConfigError(f"policy list {text!r} names a policy twice")
    return names
