"""`rolloutlog explain`: why the trainer waited before each batch, from the log alone.

The per-step table splits each wait into its causes (`replay.explain`; docs/explain.md
defines each), then one sentence for the run. `--json` prints the same as one object.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import click
from rich.console import Console
from rich.table import Table

from rolloutlog.cli.bad_input import command, fail, reports_bad_input
from rolloutlog.cli.foreign import log_of
from rolloutlog.cli.options import NamedPath, json_option, seed_option
from rolloutlog.cli.output import emit_json, warn_torn_tail
from rolloutlog.cli.progress import phase
from rolloutlog.core.config import ConfigError
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.events.log_reader import LogReader, read_log
from rolloutlog.events.schema import iter_batch_columns
from rolloutlog.importers import IMPORT_NOTE
from rolloutlog.replay.explain import ExplainError, Explanation, explain_log
from rolloutlog.replay.explain_state import CAUSES
from rolloutlog.replay.explain_story import Story
from rolloutlog.replay.source import LogFile, open_log
from rolloutlog.runtime.sim.simulation import SimulationBoundError
from rolloutlog.studies.counterfactual import REMOVALS, counterfactual
from rolloutlog.studies.whatif.fit import FitError

# What an import's records cannot show, by source (docs/foreign-runs.md says what each
# import reconstructs and assumes).
BLIND: Final = {
    "prime-rl": (
        (
            "pause",
            "a version goes live the moment the trainer publishes it (the update's length "
            "is not written), so the weight update shows as no wait",
        ),
        (
            "gate",
            "dispatch times are the environment's start: when the gate held work back "
            "is not written",
        ),
        ("wasted", "cancelled members are not written: their rollout seconds count none"),
    ),
    "areal": (
        (
            "pause",
            "a version goes live the moment it is announced (the update's length is not "
            "written), so the weight update shows as no wait",
        ),
        (
            "every cause",
            "batches and version times are reconstructed as AReaL's prepare_batch and "
            "trainer make them (neither is written), so each wait rests on that "
            "reconstruction; without config.yaml no batch ships and there is no wait to split",
        ),
    ),
}


@command("explain")
@click.argument("log", type=NamedPath(path_type=Path))  # a log, or a run's folder
@click.option("--step", type=click.IntRange(min=1), help="The chain of events behind step N.")
@click.option("--episode", metavar="ID", help="One rollout's life, each decision with its rule.")
@click.option(
    "--without",
    type=click.Choice(list(REMOVALS)),
    help="Re-decide the run on whatif's fitted world with this cause removed: how much "
    "earlier each step would ship.",
)
@seed_option("Seed of the draws for work the recorded run never finished (--without).", 0)
@json_option("Print one JSON object: per step, for the run, and the summary.")
@reports_bad_input
def explain_command(
    log: Path,
    step: int | None,
    episode: str | None,
    without: str | None,
    seed: int,
    as_json: bool,
) -> None:
    """Split the trainer's wait before each batch of LOG into its causes; or tell the story
    of one step (--step N) or one rollout (--episode ID); or re-decide the run without one
    cause (--without CAUSE). LOG may be a prime-rl or AReaL run folder: it is imported
    first (docs/foreign-runs.md)."""
    if sum(option is not None for option in (step, episode, without)) > 1:
        fail("--step, --episode and --without each answer one question: give one of them")
    log = log_of(log)
    if without is not None:
        _tell_without(log, without, seed, as_json)
        return
    source = open_log(log)
    _say_what_the_import_cannot_know(source.reader)
    try:
        if episode is not None:
            _tell_episode(log, source, episode, as_json)
            return
        with phase(f"explaining {log}"):
            explanation = explain_log(source, trace_step=step)
        if step is not None:
            _tell_step(log, source, explanation, step, as_json)
            return
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


def _say_what_the_import_cannot_know(reader: LogReader) -> None:
    """For a log imported from another stack, a line on stderr naming the causes that
    its records cannot show (`BLIND`)."""
    for note in reader.notes(IMPORT_NOTE)[:1]:
        source = json.loads(note).get("source", "")
        for cause, why in BLIND.get(source, ()):
            click.echo(f"rolloutlog: imported from {source}: {cause}: {why}", err=True)


def _tell_without(log: Path, cause: str, seed: int, as_json: bool) -> None:
    """The fitted world re-decided as recorded and without `cause`: each step's gain."""
    try:
        found = counterfactual(read_log(log), cause, seed=seed)
    except FitError as error:
        fail(f"{log}: cannot fit a world: {error}")
    except (ConfigError, InconsistentLogError, SimulationBoundError) as error:
        fail(f"{log}: --without {cause}: the fitted world cannot run it: {error}")
    if as_json:
        emit_json(found.to_json())
        return
    click.echo(f"without {cause}: {found.removed}")
    click.echo(f"world: {found.world}")
    table = Table(title="when each step would ship (seconds)", title_justify="left")
    for name in ("step", "re-run as recorded", "without", "earlier by"):
        table.add_column(name, justify="right")
    for step, t, earlier in found.steps():
        shown = ("never", "") if earlier is None else (f"{t - earlier:.1f}", f"{earlier:.1f}")
        table.add_row(str(step), f"{t:.1f}", *shown)
    Console().print(table)
    gain, steps = found.gain_s(), len(found.baseline)
    if gain is None:
        click.echo(f"without {cause} the run does not ship its {steps} steps")
    elif steps:
        total = found.baseline[max(found.baseline)]
        click.echo(
            f"without {cause} the run would ship its {steps} steps {gain:.1f} s sooner "
            f"({gain / total:.1%} of {total:.1f} s, the recorded policy re-run on that world)"
        )


def _tell_step(
    log: Path, source: LogFile, explanation: Explanation, step: int, as_json: bool
) -> None:
    """The spans of step `step`'s wait, then what the step threw away, rule by rule."""
    found = [s for s in explanation.steps if s.step == step]
    if not found:
        started = f"1–{explanation.steps[-1].step}" if explanation.steps else "none"
        fail(f"{log}: step {step}: the trainer never started it (steps started: {started})")
    wait = found[0]
    thrown = Story(step=step).read(iter_batch_columns(source.batches()))
    spans = merged(explanation.spans)
    if as_json:
        emit_json(
            {
                "step": step,
                "shipped_at": wait.shipped_at,
                **wait.columns(),
                "spans": [{"from": a, "to": b, "cause": c, "what": w} for a, b, c, w in spans],
                "thrown_away": thrown,
            }
        )
        return
    click.echo(
        f"step {step}: shipped at {wait.shipped_at:.2f} s; the trainer waited {wait.wait:.2f} s "
        f"for it, from {wait.wait_from:.2f} s to {wait.wait_to:.2f} s"
    )
    for start, end, cause, what in spans:
        click.echo(f"{start:10.2f}–{end:<10.2f} {cause:<10} {what}")
    click.echo(
        f"what step {step} threw away ({wait.wasted_episodes} episodes, "
        f"{wait.wasted_rollout_s:.1f} rollout seconds):"
    )
    for line in thrown:
        click.echo(line)


def _tell_episode(log: Path, source: LogFile, episode: str, as_json: bool) -> None:
    story = Story(episode_id=episode)
    lines = story.read(iter_batch_columns(source.batches()))
    if not story.seen:
        fail(f"{log}: episode {episode}: never dispatched in this log")
    if as_json:
        emit_json({"episode_id": episode, "story": lines})
        return
    click.echo(f"the life of {episode}")
    for line in lines:
        click.echo(line)


def merged(spans: list[tuple[float, float, str, str]]) -> list[tuple[float, float, str, str]]:
    """Spans in a row with the same cause and numbers as one."""
    out: list[tuple[float, float, str, str]] = []
    for start, end, cause, what in spans:
        if out and out[-1][2:] == (cause, what) and out[-1][1] == start:
            out[-1] = (out[-1][0], end, cause, what)
        else:
            out.append((start, end, cause, what))
    return out


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
