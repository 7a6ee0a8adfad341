"""`rolloutlog replay / verify / show / diff` through click's CliRunner: output, exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import attrs
import pyarrow.ipc as ipc
import pytest
from click.testing import CliRunner, Result

from rolloutlog.cli import main
from rolloutlog.events.log_writer import write_log
from rolloutlog.events.schema import LOG_SCHEMA, BatchStamp, events_to_batch
from rolloutlog.events.types import Event
from tests.invoke import one_line_error, run
from tests.replay.replay_helpers import small_log

SUMMARY_KEYS = {
    "events",
    "steps_shipped",
    "groups_opened",
    "groups_finalized",
    "groups_partial",
    "episodes_dispatched",
    "episodes_completed",
    "episodes_failed",
    "episodes_late",
    "episodes_cancelled",
    "episodes_dropped_stale",
    "episodes_scored",
    "episodes_trained",
    "episodes_pruned_zero_adv",
    "max_trained_age",
    "mean_trained_age",
    "trained_age_histogram",
    "invariant_violations",
}


def written(tmp_path: Path, log: list[Event], name: str = "run.arrow") -> Path:
    path = tmp_path / name
    write_log(path, log)
    return path


def tampered(index_of: str, **changes: object) -> tuple[list[Event], int]:
    log = small_log()
    index = next(i for i, e in enumerate(log) if e.kind == index_of)
    log[index] = attrs.evolve(log[index], **changes)
    return log, index


@pytest.mark.parametrize("command", ["replay", "verify", "show", "diff"])
def test_every_command_has_help(command: str) -> None:
    result = run(command, "--help")
    assert result.exit_code == 0 and "--json" in result.output


def test_replay_json_has_every_documented_key(tmp_path: Path) -> None:
    result = run("replay", "--json", written(tmp_path, small_log()))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert set(summary) >= SUMMARY_KEYS
    assert (summary["events"], summary["invariant_violations"]) == (len(small_log()), [])
    assert summary["episodes_cancelled"]["shutdown"] == 2


def test_replay_prints_a_table(tmp_path: Path) -> None:
    result = run("replay", written(tmp_path, small_log()))
    assert result.exit_code == 0
    assert "episodes_trained" in result.stdout and "every property holds" in result.stdout


def test_replay_exits_1_on_a_violation(tmp_path: Path) -> None:
    log = small_log()
    log.insert(9, log.pop(14))  # run_finished early: dispatch after it (and only one)
    log = [attrs.evolve(e, seq=i) for i, e in enumerate(log)]
    result = run("replay", "--json", written(tmp_path, log))
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["invariant_violations"]


def test_replay_reports_what_came_before_bad_input(tmp_path: Path) -> None:
    log, index = tampered("batch_shipped", step=2)
    result = run("replay", "--json", written(tmp_path, log))
    line = one_line_error(result)
    assert f"seq {index} (batch_shipped)" in line
    summary = json.loads(result.stdout)
    assert summary["events"] == index and summary["error"] == line.removeprefix(
        "rolloutlog: error: "
    )


def test_replay_tables_say_where_bad_input_stopped_the_checks(tmp_path: Path) -> None:
    log, index = tampered("batch_shipped", step=2)
    result = run("replay", written(tmp_path, log))
    one_line_error(result)
    assert "every property holds" not in result.stdout
    assert f"stopped at seq {index}: no property broken before it" in result.stdout


def test_replay_of_a_missing_or_damaged_file_is_one_line(tmp_path: Path) -> None:
    assert "no such log file" in one_line_error(run("replay", tmp_path / "missing.arrow"))
    damaged = tmp_path / "damaged.arrow"
    damaged.write_bytes(b"not a log at all")
    result = run("replay", damaged)
    assert "not a rolloutlog log" in one_line_error(result)
    assert result.stdout == ""  # no event was read: no table of zeros, no verdict


def test_verify_passes_and_fails_at_the_tampered_seq(tmp_path: Path) -> None:
    assert run("verify", written(tmp_path, small_log(), "good.arrow")).exit_code == 0
    log, index = tampered("episode_dispatched", policy_version=3)
    result = run("verify", "--json", written(tmp_path, log))
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["divergence"]["seq"] == index
    assert report["divergence"]["expected"]["policy_version"] == 0
    assert report["divergence"]["recorded"]["policy_version"] == 3
    assert report["divergence"]["state"]["seq"] == index - 1
    human = run("verify", tmp_path / "run.arrow")
    assert human.exit_code == 1 and f"seq {index}" in human.stdout


def test_show_state_and_timelines(tmp_path: Path) -> None:
    path = written(tmp_path, small_log())
    state = json.loads(run("show", path, "--at", 9, "--json").stdout)
    assert state["event"]["kind"] == "episode_dispatched" and state["permits_held"] == 2
    assert [g["group_id"] for g in state["open_groups"]] == ["g2"]
    assert run("show", path, "--at", 9).exit_code == 0
    group = json.loads(run("show", path, "--group", "g1", "--json").stdout)
    assert [m["seq"] for m in group["timeline"]] == [1, 2, 3, 4, 7, 8, 10]
    episode = run("show", path, "--episode", "g2/1")
    assert episode.exit_code == 0 and "episodes_cancelled" in episode.stdout


def test_show_refuses_what_is_not_there(tmp_path: Path) -> None:
    path = written(tmp_path, small_log())
    assert "past the end" in one_line_error(run("show", path, "--at", 999))
    assert one_line_error(run("show", path, "--group", "g42")).endswith(
        f"{path}: no group 'g42' in the log"  # as `timeline --group g42` says it
    )
    for episode in ("g1/7", "g42/0"):  # g1 exists, with two members
        assert one_line_error(run("show", path, "--episode", episode)).endswith(
            f"{path}: no episode '{episode}' in the log"
        )
    assert run("show", path).exit_code == 2  # a usage error: one of --at/--group/--episode


def test_diff_names_the_first_divergent_event(tmp_path: Path) -> None:
    a = written(tmp_path, small_log(), "a.arrow")
    assert run("diff", a, a).exit_code == 0
    log, index = tampered("episode_completed", reward=0.5)
    result = run("diff", "--json", a, written(tmp_path, log, "b.arrow"))
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert (report["seq"], report["a"]["reward"], report["b"]["reward"]) == (index, 1.0, 0.5)


def test_diff_ignore_config_compares_two_policies_past_their_configs(tmp_path: Path) -> None:
    log = tmp_path / "run.arrow"
    args = ["--scenario", "smoke", "--compare", "per-episode,per-group", "--log", log]
    assert run("simulate", *args).exit_code == 0
    a, b = tmp_path / "run.per-episode.arrow", tmp_path / "run.per-group.arrow"
    assert json.loads(run("diff", "--json", a, b).stdout)["seq"] == 0
    past = run("diff", "--json", "--ignore-config", a, b)
    assert past.exit_code == 1
    report = json.loads(past.stdout)
    assert report["seq"] > 0 and report["a"] != report["b"]
    assert run("diff", "--ignore-config", a, a).exit_code == 0


def test_the_fields_that_differ_are_marked_when_the_output_is_no_terminal(tmp_path: Path) -> None:
    a = written(tmp_path, small_log(), "a.arrow")
    log, _ = tampered("episode_completed", reward=0.5)
    result = run("diff", a, written(tmp_path, log, "b.arrow"))
    marked = [line.split("│")[1].strip() for line in result.stdout.splitlines() if "> " in line]
    assert marked == ["> reward"]


def test_diff_with_a_file_that_is_no_log_or_is_damaged_prints_the_error_alone(
    tmp_path: Path,
) -> None:
    a = written(tmp_path, small_log(), "a.arrow")
    text = tmp_path / "text.arrow"
    text.write_text("hello\n")
    damaged = tmp_path / "damaged.arrow"
    with ipc.new_stream(str(damaged), LOG_SCHEMA) as stream:
        stamp = BatchStamp(0, len(small_log()) - 1, checksum=0)
        stream.write_batch(events_to_batch(small_log()), custom_metadata=stamp.to_metadata())
    for bad, problem in ((text, "not a rolloutlog log"), (damaged, "checksum mismatch")):
        for pair in ((a, bad), (bad, a)):
            result = run("diff", *pair)
            line = one_line_error(result)
            assert result.stdout == "", result.stdout  # no "(nothing)" where it stopped
            assert problem in line and line.count(str(bad)) == 1, line


def test_diff_names_the_log_that_stopped_in_front_of_the_fold_error(tmp_path: Path) -> None:
    log, index = tampered("batch_shipped", step=2)
    b = written(tmp_path, log, "b.arrow")
    result = run("diff", written(tmp_path, small_log(), "a.arrow"), b)
    line = one_line_error(result)
    assert line == f"rolloutlog: error: {b}: seq {index} (batch_shipped): expected step 1"
    assert f"first divergence at seq {index}" in result.stdout  # the step differs: shown


def torn(tmp_path: Path, log: list[Event], name: str) -> Path:
    """`log` written in commits of 5 events, its last commit cut short: a torn tail."""
    path = tmp_path / name
    write_log(path, log, batch_events=5)
    path.write_bytes(path.read_bytes()[:-40])
    return path


def torn_tail_warnings(result: Result) -> list[str]:
    """The logs named by the torn tail warnings on stderr, in order."""
    found = re.findall(r"^rolloutlog: warning: (.*): torn tail: ", result.stderr, re.MULTILINE)
    return list(found)


def test_show_and_diff_warn_of_a_torn_tail(tmp_path: Path) -> None:
    cut = torn(tmp_path, small_log(), "cut.arrow")
    past_the_end = run("show", cut, "--at", 99)
    assert torn_tail_warnings(past_the_end) == [str(cut)]
    assert "past the end of the log (15 events)" in past_the_end.stderr.splitlines()[-1]
    assert torn_tail_warnings(run("show", cut, "--group", "g1")) == [str(cut)]
    full = written(tmp_path, small_log())
    assert torn_tail_warnings(run("diff", full, cut)) == [str(cut)]
    log, index = tampered("episode_completed", reward=0.5)
    cut_too = torn(tmp_path, log, "cut_too.arrow")
    both = run("diff", cut, cut_too)  # differ before either tail: each read up to seq `index`
    assert both.exit_code == 1 and f"first divergence at seq {index}" in both.stdout
    assert torn_tail_warnings(both) == [str(cut), str(cut_too)]


def test_a_log_without_events_is_no_error_but_is_said_to_hold_nothing(tmp_path: Path) -> None:
    """A writer opened and closed (or a run that died before run_started) leaves a valid
    empty log: the verdicts hold vacuously, and stderr says that nothing was checked."""
    empty = tmp_path / "empty.arrow"
    write_log(empty, [])
    for command in ("replay", "verify"):
        result = CliRunner().invoke(main, [command, str(empty)])
        assert result.exit_code == 0, result.output
        assert "the log holds no event (not even run_started)" in result.stderr
        assert "no event: no" in result.stdout
        assert "every property holds" not in result.stdout
        assert "every decision matches" not in result.stdout
    full = tmp_path / "full.arrow"
    write_log(full, small_log())
    result = CliRunner().invoke(main, ["verify", str(full)])
    assert "holds no event" not in result.stderr
