"""`rolloutlog replay / verify / show / diff`: replay's reports on a recorded log.

Every command prints rich tables for people and, with `--json`, one JSON object for
machines. Exit status: 0 when all is well, 1 when the log breaks a property (`replay`),
diverges from today's deciders (`verify`) or from the other log (`diff`), and 2 for bad
input (an unreadable or inconsistent log, an unknown id): one line on stderr naming the
seq, after the report of everything before it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import click
from rich.console import Console
from rich.table import Table

from rolloutlog.cli.bad_input import command, fail
from rolloutlog.cli.options import (
    FILE,
    json_option,
)
from rolloutlog.cli.output import (
    emit_json,
    key_values,
    note_being_written,
    warn_no_event,
    warn_torn_tail,
    warn_unstartable_config,
)
from rolloutlog.cli.policies import checked_tolerance, one_policy
from rolloutlog.cli.progress import phase
from rolloutlog.core.digest import event_payload
from rolloutlog.events.errors import EventError, LogError
from rolloutlog.events.types import Event
from rolloutlog.replay.conformance import RULES, check_conformance
from rolloutlog.replay.diff import diff_logs, event_at
from rolloutlog.replay.fold import fold_events
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import LogFile, open_log
from rolloutlog.replay.state_view import state_at
from rolloutlog.replay.step_metrics import run_age_split
from rolloutlog.replay.timeline import Moment, episode_timeline, group_timeline
from rolloutlog.replay.verify import check_import, import_unchecked, is_import, verify_log

OK, DIFFERS = 0, 1  # bad input exits 2 (cli.bad_input)
AS_JSON = json_option("Print one JSON object.")


def _open(path: Path) -> LogFile:
    try:
        source = open_log(path)
    except LogError as error:
        fail(str(error))
    note_being_written(source, path)
    warn_unstartable_config(source, path)
    return source


# --- replay ------------------------------------------------------------------------------


@command("replay")
@click.argument("log", type=FILE)
@AS_JSON
@click.option("--plain", is_flag=True, help="Use the plain object fold (slower; same answer).")
def replay_command(log: Path, as_json: bool, plain: bool) -> None:
    """Fold LOG, check every property on every event and print the run summary."""
    source = _open(log)
    with phase(f"replaying {log}"):
        replay = replay_log(source, columnar=not plain, age_split=True)
    warn_torn_tail(source.torn_tail, log)
    if replay.error is None:  # else the error says where the log stops
        warn_no_event(replay.events, log)
    split = run_age_split(source) if replay.age_split is None else replay.age_split
    violations = replay.violations  # the account's, then `t` going back (`time_order`)
    summary = {**replay.summary, **split}
    if as_json:
        error = None if replay.error is None else str(replay.error)
        emit_json({**summary, "digest": replay.digest.hex(), "error": error})
    elif replay.events or replay.error is None:  # bad input before any event: the error alone
        _print_summary(summary, replay.digest.hex(), stopped=replay.error is not None)
    if replay.error is not None:
        fail(str(replay.error))
    raise SystemExit(DIFFERS if violations else OK)


def _print_summary(summary: dict[str, Any], digest: str, *, stopped: bool) -> None:
    """The summary table and the properties' verdict; `stopped`: bad input ended the fold
    early, so the verdict covers only the events before it (the error follows on stderr)."""
    console = Console()
    rows = [(key, value) for key, value in summary.items() if key != "invariant_violations"]
    table = key_values("replay", [*rows, ("final digest", digest)])
    console.print(table)
    violations = summary["invariant_violations"]
    if violations:
        console.print(f"[bold red]{len(violations)} invariant violations[/]")
        for violation in violations[:20]:
            console.print(f"  {violation}", markup=False)
    elif stopped:
        events = summary["events"]
        console.print(f"[yellow]stopped at seq {events}: no property broken before it[/]")
    elif summary["events"] == 0:  # warned on stderr: nothing was checked
        console.print("[yellow]no event: no property was checked[/]")
    else:
        console.print("[green]every property holds on every event[/]")


# --- verify ------------------------------------------------------------------------------


@command("verify")
@click.argument("log", type=FILE)
@click.option(
    "--policy",
    metavar="PRESET",
    help="Check a log another orchestrator wrote against PRESET: its tasks, times and "
    "outcomes as recorded, every decision re-decided, each reaction in any order across "
    "groups (docs/foreign-runs.md).",
)
@click.option(
    "--t-tolerance",
    type=float,
    metavar="SECONDS",
    help="With --policy: how much later than its world event a decision may be recorded "
    "(default 0).",
)
@AS_JSON
def verify_command(log: Path, policy: str | None, t_tolerance: float | None, as_json: bool) -> None:
    """Re-decide LOG from its world events; exit 1 at the first decided event that differs.

    With --policy, exit 1 at the first decision that does not conform to the preset.
    """
    if is_import(_open(log)):
        _verify_import(_open(log), log, as_json)
    if policy is None:
        if t_tolerance is not None:
            fail("--t-tolerance: only with --policy")
    else:
        preset, tolerance = one_policy(policy), checked_tolerance(t_tolerance)
        _conform(_open(log), log, preset, tolerance, as_json)
    source = _open(log)
    with phase(f"verifying {log}"):
        verdict = verify_log(source)
    _warn_read(source, log, verdict.events, verdict.error)
    divergence = verdict.divergence
    if as_json:
        emit_json(
            {
                "ok": verdict.ok,
                "events": verdict.events,
                "divergence": None if divergence is None else divergence.to_json(),
                "error": None if verdict.error is None else str(verdict.error),
            }
        )
    elif divergence is not None:
        _print_divergence(divergence.seq, divergence.expected, divergence.recorded)
        _print_counters(divergence.state, f"state before seq {divergence.seq}")
        _print_groups(divergence.state["groups"], "the groups involved")
    elif verdict.error is None and verdict.events == 0:  # warned on stderr
        Console().print("[yellow]no event: no decision was checked[/]")
    elif verdict.error is None:
        Console().print(f"[green]verified {verdict.events} events: every decision matches[/]")
    if verdict.error is not None:
        fail(f"{verdict.error} (after {verdict.events} matching events)")
    raise SystemExit(OK if verdict.ok else DIFFERS)


def _warn_read(source: LogFile, log: Path, events: int, error: object) -> None:
    """What a verdict warns of on stderr: a torn tail; no event, unless an error says why."""
    warn_torn_tail(source.torn_tail, log)
    if error is None:
        warn_no_event(events, log)


def _verify_import(source: LogFile, log: Path, as_json: bool) -> None:
    """`verify` on another stack's imported run: what the import knows, checked; what it
    reconstructed, said in one line and not checked (exit 1 only on what is checked)."""
    with phase(f"checking the import {log}"):
        verdict = check_import(source)
    unchecked = import_unchecked(source)
    _warn_read(source, log, verdict.checked, verdict.error)
    if as_json:
        emit_json(
            {
                "ok": verdict.ok,
                "imported": True,
                "checked": verdict.checked,
                "problems": verdict.problems,
                "unchecked": unchecked,
                "error": None if verdict.error is None else str(verdict.error),
            }
        )
    else:
        for problem in verdict.problems:
            Console().print(f"[red]{problem}[/]")
        if verdict.ok:
            Console().print(
                f"[green]imported run: {verdict.checked} stale cancellations, drops and "
                "batches hold, and the log replays clean[/]"
            )
        click.echo(f"rolloutlog: {unchecked}", err=True)
    if verdict.error is not None:
        fail(str(verdict.error))
    raise SystemExit(OK if verdict.ok else DIFFERS)


def _conform(source: LogFile, log: Path, policy: str, tolerance: float, as_json: bool) -> None:
    """`verify --policy`: the conformance verdict, as `verify` reports its own."""
    with phase(f"checking {log} against {policy}"):
        verdict = check_conformance(source, policy, t_tolerance=tolerance)
    _warn_read(source, log, verdict.events, verdict.error)
    broken = verdict.nonconformity
    if as_json:
        emit_json(
            {
                "ok": verdict.ok,
                "policy": policy,
                "t_tolerance": tolerance,
                "events": verdict.events,
                "nonconformity": None if broken is None else broken.to_json(),
                "error": None if verdict.error is None else str(verdict.error),
            }
        )
    elif broken is not None:
        title = f"first nonconformity at seq {broken.seq}: {broken.rule}"
        names = (f"expected ({policy})", "recorded (the log)")
        expected = broken.expected  # placed at the seq it is compared at: the log's
        shown = None if expected is None else attrs.evolve(expected, seq=broken.seq)
        _print_divergence(broken.seq, shown, broken.recorded, names, title=title)
        Console().print(f"{RULES[broken.rule]} (in the reaction to seq {broken.cause})")
    elif verdict.error is None and verdict.events:
        Console().print(
            f"[green]{verdict.events} events conform to {policy}: every reaction holds "
            "the preset's decisions[/]"
        )
    if verdict.error is not None:
        fail(f"{log}: {verdict.error} (after {verdict.events} conforming events)")
    raise SystemExit(OK if verdict.ok else DIFFERS)


def _print_divergence(
    seq: int,
    left: Event | None,
    right: Event | None,
    names: Any = None,
    *,
    title: str | None = None,
) -> None:
    left_name, right_name = names or ("expected (today's deciders)", "recorded (the log)")
    table = Table(title=title or f"first divergence at seq {seq}", title_justify="left")
    table.add_column("field", style="bold")
    table.add_column(left_name)
    table.add_column(right_name)
    ours, theirs = _payload(left), _payload(right)
    console = Console()
    marker = "" if console.is_terminal else "> "  # a differing row is red on a terminal
    for key in dict.fromkeys([*ours, *theirs]):
        a, b = ours.get(key, ""), theirs.get(key, "")
        field, style = (key, "") if a == b else (marker + key, "bold red")
        table.add_row(field, _cell(a), _cell(b), style=style)
    console.print(table)


def _payload(event: Event | None) -> dict[str, Any]:
    return {"kind": "(nothing)"} if event is None else event_payload(event)


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


# --- show --------------------------------------------------------------------------------


@command("show")
@click.argument("log", type=FILE)
@click.option("--at", "at_seq", type=click.IntRange(min=0), help="The state after this seq.")
@click.option("--group", "group_id", help="The timeline of this group (g12).")
@click.option("--episode", "episode_id", help="The timeline of this episode (g12/3).")
@AS_JSON
def show_command(
    log: Path, at_seq: int | None, group_id: str | None, episode_id: str | None, as_json: bool
) -> None:
    """Show the state of LOG at a seq, or the timeline of one group or episode."""
    if sum(x is not None for x in (at_seq, group_id, episode_id)) != 1:
        raise click.UsageError("give exactly one of --at, --group, --episode")
    source = _open(log)
    try:
        with phase(f"reading {log}"):
            if at_seq is not None:
                _show_state(source, at_seq, as_json)
            else:
                _show_timeline(source, group_id, episode_id, as_json)
    except (EventError, LogError) as error:
        fail(str(error))
    finally:  # also before the error: "past the end" may be past a torn tail
        warn_torn_tail(source.torn_tail, log)


def _show_state(source: Any, seq: int, as_json: bool) -> None:
    result = fold_events(source.events(), check_invariants=False, stop_before=seq + 1)
    if result.error is not None:
        fail(f"the log is inconsistent before seq {seq}: {result.error}")
    if result.fold is None or result.fold.next_seq <= seq:
        count = 0 if result.fold is None else result.fold.next_seq
        fail(f"seq {seq} is past the end of the log ({count} events)")
    event = event_at(source, seq)
    state = {"event": None if event is None else event_payload(event), **state_at(result.fold)}
    if as_json:
        emit_json(state)
    else:
        _print_state(state)


def _print_state(state: dict[str, Any]) -> None:
    event = state["event"] or {"kind": "?"}
    _print_counters(state, f"after seq {state['seq']}: {event['kind']} {_brief(event)}")
    _print_groups(state["open_groups"], f"{len(state['open_groups'])} open groups")
    queue = state["queue"]
    Console().print(
        f"queue: {queue['episodes']} episodes, {queue['tokens']} tokens, "
        f"ages {queue['age_histogram']}",
        markup=False,
    )


def _print_counters(state: dict[str, Any], title: str) -> None:
    console = Console()
    console.print(title, style="bold", markup=False)
    console.print(
        f"step {state['step']}  version {state['policy_version']}  "
        f"permits {state['permits_held']}/{state['max_inflight']}  "
        f"gated {state['gated']}  finished {state['finished']}"
    )


def _print_groups(groups: list[dict[str, Any] | None], title: str) -> None:
    if not any(groups):
        return
    table = Table(title=title, title_justify="left")
    for column in ("group", "work", "G", "dispatched", "unscheduled", "cancelled", "members"):
        table.add_column(column)
    for group in filter(None, groups):
        members = " ".join(_member(m) for m in group["members"])
        counts = (group["size"], group["dispatched"], group["unscheduled"], group["cancelled"])
        table.add_row(group["group_id"], group["work"], *map(str, counts), members)
    Console().print(table)


def _member(member: dict[str, Any]) -> str:
    age = "" if member["age"] is None else f" age {member['age']}"
    return f"{member['member']}:{member['state']}{age}"


def _brief(payload: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={_cell(v)}" for k, v in payload.items() if k not in ("kind", "seq", "t", "config")
    )


def _show_timeline(
    source: Any, group_id: str | None, episode_id: str | None, as_json: bool
) -> None:
    if group_id is not None:
        target, moments = group_id, group_timeline(source, group_id)
    else:
        target, moments = str(episode_id), episode_timeline(source, str(episode_id))
    if not moments:  # in `timeline --group`'s words
        what = "group" if group_id is not None else "episode"
        fail(f"{source.reader.path}: no {what} {target!r} in the log")
    if as_json:
        emit_json({"target": target, "timeline": [moment.to_json() for moment in moments]})
        return
    _print_timeline(target, moments)


def _print_timeline(target: str, moments: list[Moment]) -> None:
    table = Table(title=f"timeline of {target}", title_justify="left")
    for column in ("seq", "t", "step", "age", "kind", "details"):
        table.add_column(column)
    for moment in moments:
        payload = event_payload(moment.event)
        age = "" if moment.age is None else str(moment.age)
        cells = (str(payload["seq"]), f"{payload['t']:g}", str(moment.step), age)
        table.add_row(*cells, payload["kind"], _brief(payload))
    Console().print(table)


# --- diff --------------------------------------------------------------------------------


@command("diff")
@click.argument("a", type=FILE)
@click.argument("b", type=FILE)
@AS_JSON
@click.option(
    "--ignore-config",
    is_flag=True,
    help="Leave run_started's config out: compare the decisions of two runs set up apart.",
)
def diff_command(a: Path, b: Path, as_json: bool, ignore_config: bool) -> None:
    """The first event where logs A and B diverge, by bisection over their digest chains."""
    source_a, source_b = _open(a), _open(b)
    with phase(f"comparing {a} and {b}"):
        result = diff_logs(source_a, source_b, ignore_config=ignore_config)
    warn_torn_tail(source_a.torn_tail, a)
    warn_torn_tail(source_b.torn_tail, b)
    if as_json:
        emit_json(result.to_json())
    elif result.seq is not None:
        _print_divergence(result.seq, result.a, result.b, names=(str(a), str(b)))
    elif result.error is None:
        same = "the same events but for the config" if ignore_config else "the same digest chain"
        Console().print(f"[green]identical: {result.a_events} events, {same}[/]")
    if result.error is not None:
        name, error = result.error
        fail(_naming(a if name == "a" else b, error))
    raise SystemExit(OK if result.seq is None else DIFFERS)


def _naming(log: Path, error: Exception) -> str:
    """The error led by the log it is about, once: the reader names the file in most of its
    errors (a damaged batch, not a log), not in all (a schema or seq error), the fold never."""
    message = str(error)
    return message if message.startswith(f"{log}: ") else f"{log}: {message}"
