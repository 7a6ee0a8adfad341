"""`rolloutlog explain`: why the trainer waited before each batch, from the log alone.

The per-step table splits each wait into its causes (`replay.explain`; docs/explain.md
defines each), then one sentence for the run. `--json` prints the same as one object.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from rolloutlog.cli.bad_input import command, fail, reports_bad_input
from rolloutlog.cli.options import FILE, json_option
from rolloutlog.cli.output import emit_json, warn_torn_tail
from rolloutlog.replay.explain import ExplainError, Explanation, explain_log
from rolloutlog.replay.explain_state import CAUSES
from rolloutlog.replay.source import open_log


@command("explain")
@click.argument("log", type=FILE)
@json_option("Print one JSON object: per step, for the run, and the summary.")
@reports_bad_input
def explain_command(log: Path, as_json: bool) -> None:
    """Split the trainer's wait before each batch of LOG into its causes."""
    source = open_log(log)
    try:
        explanation = explain_log(source)
    except ExplainError as error:
        fail(f"{log}: {error}")
    warn_torn_tail(source.torn_tail, log)
    if as_json:
        emit_json(explanation.to_json())
        return
    console = Console()
    console.print(_table(explanation))
    never = [c for c in CAUSES if explanation.totals()[c] <= 0]
    if never:
        click.echo(f"never held: {', '.join(never)}")
    click.echo(explanation.summary())


def _table(explanation: Explanation) -> Table:
    """One row a batch the trainer started: its wait, the seconds of each cause the run had
    (the others are 0 throughout, and left out), and what the step threw away."""
    totals = explanation.totals()
    causes = [c for c in CAUSES if totals[c] > 0]
    table = Table(title="the trainer's wait before each batch (seconds)", title_justify="left")
    for name in ("step", "wait", *causes, "wasted", "wasted s"):
        table.add_column(name, justify="right")
    for s in explanation.steps:
        table.add_row(
            str(s.step),
            f"{s.wait:.1f}",
            *(_seconds(s.causes[c]) for c in causes),
            str(s.wasted_episodes),
            f"{s.wasted_rollout_s:.0f}",
        )
    table.add_row(
        "all",
        f"{explanation.total_wait():.1f}",
        *(_seconds(totals[c]) for c in causes),
        str(sum(s.wasted_episodes for s in explanation.steps)),
        f"{sum(s.wasted_rollout_s for s in explanation.steps):.0f}",
        style="bold",
    )
    return table


def _seconds(value: float) -> str:
    return f"{value:.1f}" if value > 0 else "·"
