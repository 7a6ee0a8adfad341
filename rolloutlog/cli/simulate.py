"""`rolloutlog simulate`: the project's main job, a seeded what-if study of staleness policies.

The policies run with `runs.simulate.run_policies`: each is the simulate driver
(`rolloutlog.runtime.sim`) with replay's run summary observing its loop (and the invariant
checker with `--check`), so the report carries every key of `replay --json` plus the
simulator's own metrics, without holding the log in memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from rolloutlog.cli.bad_input import BadInput, command, os_problem
from rolloutlog.cli.options import (
    NEW_LOG,
    PLOT_HELP,
    check_option,
    file_option,
    json_option,
    plot_option,
    seed_option,
    set_option,
    steps_option,
)
from rolloutlog.cli.output import emit_json, say_next
from rolloutlog.cli.policies import field_help, one_policy, parse_policies, run_shown
from rolloutlog.cli.rank_by import (
    learning_model,
    print_ranking,
    rank_by_option,
    with_predictions,
)
from rolloutlog.cli.sim_report import print_report
from rolloutlog.core.config import ConfigError
from rolloutlog.core.presets import NAMED
from rolloutlog.events.errors import LogError
from rolloutlog.runs.simulate import policy_name
from rolloutlog.runtime.sim.plot import plot_runs
from rolloutlog.runtime.sim.scenario import (
    Scenario,
    load_scenario,
    parse_set_options,
    run_overrides,
    scenario_names,
)
from rolloutlog.studies.compare_plot import plot_compare
from rolloutlog.studies.policy_runs import policy_runs


def policy_log_path(log: Path | None, policy: str, compare: bool) -> Path | None:
    """With `--compare`, `run.arrow` becomes `run.per-episode.arrow`, one log per policy."""
    if log is None or not compare:
        return log
    return log.with_name(f"{log.stem}.{policy}{log.suffix}")


def _scenario(
    name: str, overrides: tuple[str, ...], seed: int | None, steps: int | None
) -> tuple[Scenario, dict[str, Any]]:
    """The scenario with `--set`, `--seed` and `--steps` applied, and the `--set` run keys."""
    try:
        qualified = parse_set_options(overrides)
        scenario = load_scenario(name, qualified)
        if seed is not None:
            scenario = scenario.with_seed(seed)
        if steps is not None:
            scenario = scenario.with_steps(steps)
    except ConfigError as error:
        raise click.UsageError(str(error)) from error
    return scenario, run_overrides(qualified)


def _policies(
    base: Scenario, presets: list[str] | None, explicit: dict[str, Any], option: str
) -> dict[str, Scenario]:
    """The scenario to run for each preset, by the name of the policy it actually runs.

    An explicit `--set` of a policy key wins over the preset, and a note on stderr says
    so; two presets that `--set` makes the same policy are refused (`policy_runs`).
    """
    if presets is None:
        return {policy_name(base): base}
    try:
        runs = policy_runs(base, presets, explicit, option)
    except ConfigError as error:
        raise click.UsageError(str(error)) from error
    for run in runs:
        if run.sets and run.policy != run.preset:  # else only the rules' order differs
            click.echo(
                f"rolloutlog: note: {run.sets} wins over preset {run.preset}: runs {run.policy}",
                err=True,
            )
    return {run.policy: run.scenario for run in runs}


@command("simulate")
@click.option(
    "--scenario",
    default="default",
    show_default=True,
    help=f"A built-in ({', '.join(scenario_names())}) or a TOML file.",
)
@set_option(
    "overrides", "KEY=VALUE", "Override run.KEY / world.KEY (or an unambiguous KEY); repeatable."
)
@click.option(
    "--policy",
    metavar="PRESET",
    help=f"Policy preset ({', '.join(NAMED)}, or BASE+RULE+...; default: the scenario's).",
)
@click.option(
    "--compare",
    metavar="P1,P2",
    help=f"Run these policy presets on the same seeded world, side by side ({field_help()}).",
)
@seed_option("World and task seed.")
@steps_option("Batches to ship.")
@file_option(
    "--log", kind=NEW_LOG, help="Write the Arrow log here (with --compare: NAME.POLICY.SUFFIX)."
)
@click.option("--force", is_flag=True, help="Replace an existing --log file.")
@plot_option(f"{PLOT_HELP[:-1]}; with --compare, trained/h against discarded beside them.")
@json_option("Print the report as JSON.")
@check_option("Check the invariants on every event (and every written event's values).")
@rank_by_option()
def simulate_command(
    scenario: str,
    overrides: tuple[str, ...],
    policy: str | None,
    compare: str | None,
    seed: int | None,
    steps: int | None,
    log: Path | None,
    force: bool,
    plot: Path | None,
    as_json: bool,
    check: bool,
    rank_by: str | None,
) -> None:
    """Simulate a seeded world in virtual time and report what each staleness policy costs."""
    if policy is not None and compare is not None:
        raise click.UsageError("--policy and --compare exclude each other")
    base, explicit = _scenario(scenario, overrides, seed, steps)
    if compare is not None:
        policies = _policies(base, parse_policies(compare, "--compare"), explicit, "--compare")
    elif policy is not None:
        policies = _policies(
            base, [one_policy(policy, " (--compare runs several)")], explicit, "--policy"
        )
    else:
        policies = _policies(base, None, explicit, "")
    log_paths = {name: policy_log_path(log, name, compare is not None) for name in policies}
    for log_path in log_paths.values():
        if log_path is not None and log_path.exists() and not force:
            raise BadInput(f"--log {log_path}: already exists (pass --force to replace it)")
    runs = run_shown(policies, log_paths=log_paths, check=check)
    title = f"scenario {base.name!r}, seed {base.seed}, {base.steps} steps"
    if plot is not None:
        try:
            draw = plot_compare if compare is not None else plot_runs
            draw(runs.reports, runs.series, plot, title)
        except (OSError, RuntimeError, LogError) as error:
            raise BadInput(f"--plot {plot}: {os_problem(error, plot)}") from error
    _print(runs.reports, title, as_json=as_json, compare=compare is not None, rank_by=rank_by)
    written = next((path for path in log_paths.values() if path is not None), None)
    if written is not None:
        say_next(
            f"rolloutlog verify {written}",
            f"rolloutlog timeline {written} -o {written.with_suffix('.html')}",
            f"rolloutlog whatif {written}",
        )


def _print(
    runs: Mapping[str, Mapping[str, Any]],
    title: str,
    *,
    as_json: bool,
    compare: bool,
    rank_by: str | None,
) -> None:
    if as_json:
        ranked = with_predictions(runs, rank_by, learning_model())
        payload: Any = ranked if compare else next(iter(ranked.values()))
        emit_json(payload)
        return
    console = Console()
    print_report(runs, title, console)
    if rank_by is not None:
        print_ranking(runs, rank_by, console, learning_model())
