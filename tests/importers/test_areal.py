"""`import --from areal` on folders in the shape AReaL 1.0.4 writes (tests.importers.areal_run)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.events.log_reader import read_log
from rolloutlog.events.types import (
    EpisodeCompleted,
    EpisodeFailed,
    EpisodesCancelled,
    GroupScored,
    VersionPending,
)
from rolloutlog.importers import import_areal
from rolloutlog.record import read_foreign_ids
from tests.importers.areal_run import RUN, write_run
from tests.invoke import bad_input
from tests.record.clean import replay_problems


def test_the_import_keeps_outcomes_and_rewards_and_announces_no_version(tmp_path: Path) -> None:
    log = tmp_path / "run.arrow"
    note = import_areal(write_run(tmp_path / "areal", RUN), log)
    assert replay_problems(log) == []
    events = read_log(log)
    theirs = read_foreign_ids(log)
    completed = {theirs[e.episode_id]: e for e in events if isinstance(e, EpisodeCompleted)}
    assert {k: e.reward for k, e in completed.items()} == {
        "0/0": 1.0, "1/1": 0.0, "2/2": 0.0, "5/5": 1.0, "5/6": 0.0, "6/7": 1.0,
    }  # fmt: skip
    assert completed["5/5"].prompt_tokens == 40 and completed["5/5"].completion_tokens == 100
    failed = {theirs[e.episode_id] for e in events if isinstance(e, EpisodeFailed)}
    assert failed == {"3/3", "4/4"}  # returned nothing; raised
    scored = {theirs[e.group_id]: e.admitted for e in events if isinstance(e, GroupScored)}
    assert scored["2"] is False and scored["0"] is True and scored["5"] is True
    shutdown = [e for e in events if isinstance(e, EpisodesCancelled)]
    assert [(theirs[e.group_id], e.reason) for e in shutdown] == [("7", "shutdown")]
    # Without config.yaml the batch size is unknown: no batch ships, so no version may be
    # announced (a version follows its batch).
    assert [e for e in events if isinstance(e, VersionPending)] == []
    assert any(fact.startswith("no batch ships, no version") for fact in note["assumed"])


def test_import_from_areal_on_the_command_line(tmp_path: Path) -> None:
    run, log = write_run(tmp_path / "areal", RUN), tmp_path / "run.arrow"
    result = CliRunner().invoke(main, ["import", "--from", "areal", str(run), "-o", str(log)])
    assert result.exit_code == 0, result.output
    assert "rolloutlog: assumed: no batch ships, no version is announced" in result.stderr


def test_whatif_takes_an_areal_folder_straight_away(tmp_path: Path) -> None:
    run = write_run(tmp_path / "areal", RUN)
    result = CliRunner().invoke(
        main, ["whatif", str(run), "--json", "--steps", "2", "--world", "replay"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["recorded"]["episodes_dispatched"] == len(RUN)


def test_whatif_on_a_folder_of_neither_stack_is_one_line(tmp_path: Path) -> None:
    line = bad_input(["whatif", str(tmp_path)])
    assert line == (
        f"rolloutlog: error: {tmp_path}: neither a prime-rl run (no configs/orchestrator.json) "
        "nor an AReaL run (no sessions*.jsonl)"
    )


def test_a_folder_without_a_session_trace_is_one_line(tmp_path: Path) -> None:
    line = bad_input(["import", "--from", "areal", str(tmp_path), "-o", str(tmp_path / "x")])
    assert line == (
        f"rolloutlog: error: {tmp_path}: not an AReaL run: no sessions*.jsonl under it "
        "(SessionTracerConfig.enabled)"
    )


def test_an_accepted_session_without_its_dump_is_named(tmp_path: Path) -> None:
    run = write_run(tmp_path / "areal", RUN)
    (run / "exp/trial/rollout/0/1.jsonl").unlink()
    sessions = run / "logs/user/exp/trial/session_tracer/sessions-r0.jsonl"
    line = bad_input(["import", "--from", "areal", str(run), "-o", str(tmp_path / "x")])
    assert line == (
        f"rolloutlog: error: {sessions}: line 2: task_id: task 1 sample 0 has no rollout dump "
        "(dump_to_file)"
    )


def test_a_session_without_a_status_is_named(tmp_path: Path) -> None:
    run = write_run(tmp_path / "areal", RUN)
    sessions = run / "logs/user/exp/trial/session_tracer/sessions-r0.jsonl"
    lines = sessions.read_text().splitlines()
    record = json.loads(lines[0])
    del record["status"]
    sessions.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    line = bad_input(["import", "--from", "areal", str(run), "-o", str(tmp_path / "x")])
    assert line == f"rolloutlog: error: {sessions}: line 1: status: missing"


def test_a_session_twice_is_named_with_both_places(tmp_path: Path) -> None:
    run = write_run(tmp_path / "areal", RUN)
    sessions = run / "logs/user/exp/trial/session_tracer/sessions-r0.jsonl"
    other = sessions.with_name("sessions-r1.jsonl")
    other.write_text(sessions.read_text().splitlines()[0] + "\n")
    line = bad_input(["import", "--from", "areal", str(run), "-o", str(tmp_path / "x")])
    assert line == (
        f"rolloutlog: error: {other}: line 1: session_id: session 0 of task 0 is also at "
        f"{sessions}: line 1"
    )
