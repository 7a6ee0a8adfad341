"""What the commands that run policies share: `--compare`'s parsing, each run's progress,
and the one line that says which run failed (the same in `simulate`, `whatif`, `sweep`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import click

from rolloutlog.cli.bad_input import BadInput, os_problem
from rolloutlog.cli.progress import progress
from rolloutlog.core.config import ConfigError
from rolloutlog.core.presets import FIELD_SET, NAMED, field_set, parse_policy_list
from rolloutlog.runs.simulate import OnStep, PolicyRunError, PolicyRuns, policy_name, run_policies
from rolloutlog.runtime.sim.scenario import Scenario
from rolloutlog.runtime.sim.simulation import SimulationBoundError


def field_help() -> str:
    """What `field` stands for, in the help of every command that takes a policy list."""
    return f"{FIELD_SET!r} runs the field's set: {', '.join(field_set())}"


def parse_policies(text: str, option: str) -> list[str]:
    """`--compare P1,P2` (or `--policy`): the presets, or a usage error listing them."""
    try:
        presets = parse_policy_list(text)
    except ConfigError as error:
        raise click.BadParameter(
            f"{error} (presets: {', '.join(NAMED)}; {field_help()})", param_hint=option
        ) from None
    return presets


def one_policy(text: str, others: str = "") -> str:
    """`--policy`: exactly one preset (`others` says which option runs several)."""
    presets = parse_policies(text, "--policy")
    if len(presets) > 1:
        raise click.BadParameter(
            f"{text!r} names {len(presets)} presets; --policy runs one{others}",
            param_hint="--policy",
        )
    return presets[0]


def checked_tolerance(seconds: float | None) -> float:
    """`--t-tolerance SECONDS` (default 0): how late a decision may be recorded."""
    if seconds is None:
        return 0.0
    if not seconds >= 0 or seconds == float("inf"):
        raise click.BadParameter(
            f"must be a number of seconds >= 0, got {seconds!r}", param_hint="--t-tolerance"
        )
    return seconds


def run_shown(
    policies: Mapping[str, Scenario],
    *,
    log_paths: Mapping[str, Path | None] | None = None,
    check: bool,
    quiet: bool = False,
) -> PolicyRuns:
    """`run_policies`, each run's shipped steps shown on stderr (`cli.progress`); a run
    that fails is one line naming it."""

    @contextmanager
    def watch(name: str, scenario: Scenario) -> Iterator[OnStep]:
        with progress("step", scenario.steps, quiet=quiet, first=name) as update:
            yield lambda step: update(step, name)

    try:
        return run_policies(policies, log_paths=log_paths, watch=watch, check=check)
    except PolicyRunError as failed:
        error, path = failed.error, failed.log_path
        if isinstance(error, SimulationBoundError):
            raise bound_error(failed.scenario, error) from error
        raise BadInput(f"--log {path}: {os_problem(error, path)}") from error


def bound_error(scenario: Scenario, error: SimulationBoundError) -> BadInput:
    """The one line for a run that makes no progress, naming the run it stopped."""
    where = f"scenario {scenario.name!r}, policy {policy_name(scenario)}, seed {scenario.seed}"
    return BadInput(f"{where}: {error}")
