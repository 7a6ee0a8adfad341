"""`rolloutlog info`, `export` and `import`, through click's CliRunner."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rolloutlog.events.log_reader import read_log
from tests.events.log_files import config_cell_log
from tests.invoke import one_line_error, run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "small.arrow"


@pytest.mark.parametrize("command", [[], ["info"], ["export"], ["import"]])
def test_every_command_has_help(command: list[str]) -> None:
    result = run(*command, "--help")
    assert result.exit_code == 0
    assert "Usage: " in result.output


def test_info_prints_the_summary() -> None:
    result = run("info", str(EXAMPLE))
    assert result.exit_code == 0, result.output
    for words in ("schema version", "0..24", "episode_dispatched", "group_size", "closed"):
        assert words in result.stdout


def test_info_json_has_the_documented_keys() -> None:
    result = run("info", "--json", str(EXAMPLE))
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert {
        "events",
        "schema_version",
        "config",
        "counts",
        "first_seq",
        "last_seq",
        "torn_tail",
    } <= set(info)
    assert (info["events"], info["first_seq"], info["last_seq"], info["torn_tail"]) == (
        25,
        0,
        24,
        0,
    )
    assert info["counts"]["episode_completed"] == 8
    assert info["config"]["group_size"] == 4


def test_export_then_import_gives_the_same_log(tmp_path: Path) -> None:
    exported = run("export", str(EXAMPLE))
    assert exported.exit_code == 0, exported.output
    assert exported.stdout == (EXAMPLE.with_suffix(".jsonl")).read_text(encoding="utf-8")
    assert run("export", str(EXAMPLE), "-o", str(tmp_path / "run.jsonl")).exit_code == 0
    imported = run("import", str(tmp_path / "run.jsonl"), "-o", str(tmp_path / "run.arrow"))
    assert imported.exit_code == 0, imported.output
    assert "imported 25 events" in imported.stdout
    assert read_log(tmp_path / "run.arrow") == read_log(EXAMPLE)


def test_import_names_the_bad_line_and_writes_nothing(tmp_path: Path) -> None:
    lines = EXAMPLE.with_suffix(".jsonl").read_text(encoding="utf-8").splitlines()
    lines[16] = lines[16].replace('"reward": 0.5', '"reward": "x"')
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run("import", str(tmp_path / "bad.jsonl"), "-o", str(tmp_path / "run.arrow"))
    assert one_line_error(result).endswith(
        'line 17: episode_completed.reward: expected a number, got "x"'
    )
    assert not (tmp_path / "run.arrow").exists()


def test_import_refuses_to_replace_a_log_unless_forced(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "run.arrow")
    source = str(EXAMPLE.with_suffix(".jsonl"))
    assert "already exists" in one_line_error(
        run("import", source, "-o", str(tmp_path / "run.arrow"))
    )
    assert run("import", source, "-o", str(tmp_path / "run.arrow"), "--force").exit_code == 0


def test_a_missing_or_damaged_log_is_one_clear_line(tmp_path: Path) -> None:
    assert "no such log file" in one_line_error(run("info", str(tmp_path / "missing.arrow")))
    data = bytearray(EXAMPLE.read_bytes())
    data[-100] ^= 0xFF  # in the record batch's body, which the checksum covers
    (tmp_path / "damaged.arrow").write_bytes(data)
    assert "seq 0" in one_line_error(run("info", str(tmp_path / "damaged.arrow")))
    assert "seq 0" in one_line_error(run("export", str(tmp_path / "damaged.arrow")))
    assert one_line_error(run("import", str(tmp_path / "missing.jsonl"), "-o", "x")) == (
        f"rolloutlog: error: {tmp_path / 'missing.jsonl'}: no such file"
    )


def test_a_torn_tail_is_reported_on_stderr_and_refused_with_strict(tmp_path: Path) -> None:
    data = EXAMPLE.read_bytes()
    (tmp_path / "torn.arrow").write_bytes(data[: len(data) - 100])
    result = run("info", "--json", str(tmp_path / "torn.arrow"))
    assert result.exit_code == 0, result.output
    assert "torn tail" in result.stderr
    assert json.loads(result.stdout)["events"] == 0
    assert json.loads(result.stdout)["torn_tail"] > 0
    assert "torn tail" in one_line_error(run("info", "--strict", str(tmp_path / "torn.arrow")))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b"", "line 1: no event: a log opens with run_started"),
        (b"\n\n", "line 1: no event: a log opens with run_started"),
        (b'{"kind": "run_finished", "t": 1.0, "reason": "steps"}\n', "line 1: run_finished: a log"),
        (b"\xff\xfe{}\n", "line 1: not UTF-8 text (byte 1)"),
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", "line 1: invalid JSON: nested too deeply"),
    ],
)
def test_import_names_the_file_and_line_of_a_bad_opening(
    tmp_path: Path, text: bytes, problem: str
) -> None:
    (tmp_path / "in.jsonl").write_bytes(text)
    error = one_line_error(run("import", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o")))
    assert error.startswith(f"rolloutlog: error: {tmp_path / 'in.jsonl'}: {problem}")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.jsonl"]


def test_import_names_the_line_of_a_second_run_started_and_of_an_unknown_version(
    tmp_path: Path,
) -> None:
    lines = EXAMPLE.with_suffix(".jsonl").read_text(encoding="utf-8").splitlines()
    again = lines[0].replace('"seq": 0, ', "")  # seqs may be left out: only the kind is wrong
    (tmp_path / "twice.jsonl").write_text("\n".join([*lines[:5], again]), encoding="utf-8")
    assert one_line_error(run("import", str(tmp_path / "twice.jsonl"), "-o", "x")).endswith(
        "line 6: run_started: a log opens with run_started, and only it"
    )
    newer = lines[0].replace('"schema_version": 3', '"schema_version": 4')
    (tmp_path / "newer.jsonl").write_text("\n".join([newer, *lines[1:]]), encoding="utf-8")
    assert one_line_error(run("import", str(tmp_path / "newer.jsonl"), "-o", "x")).endswith(
        "line 1: run_started.schema_version: this rolloutlog reads versions 1, 2, 3, got 4"
    )


@pytest.mark.parametrize(
    "command",
    [["export"], ["export", "--format", "chrome-trace"], ["metrics"], ["timeline"]],
)
def test_no_output_is_written_over_a_log_not_even_the_one_read(
    tmp_path: Path, command: list[str]
) -> None:
    log = tmp_path / "run.arrow"
    shutil.copy(EXAMPLE, log)
    for output in (log, tmp_path / "other.arrow"):
        shutil.copy(EXAMPLE, tmp_path / "other.arrow")
        result = run(*command, str(log), "-o", str(output))
        assert result.exit_code == 2, result.output
        assert "holds an Arrow log" in result.stderr
    assert log.read_bytes() == (tmp_path / "other.arrow").read_bytes() == EXAMPLE.read_bytes()


def test_a_failed_export_leaves_the_previous_output_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "out.jsonl").write_text("last run's export\n", encoding="utf-8")
    (tmp_path / "notalog.arrow").write_text("not a log\n", encoding="utf-8")
    result = run("export", str(tmp_path / "notalog.arrow"), "-o", str(tmp_path / "out.jsonl"))
    assert "not a rolloutlog log" in one_line_error(result)
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8") == "last run's export\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notalog.arrow", "out.jsonl"]


@pytest.mark.parametrize("text", ["{bad json", "[1,2]", "null"])
def test_a_config_that_is_no_json_object_is_one_clear_line(tmp_path: Path, text: str) -> None:
    log = tmp_path / "config.arrow"
    config_cell_log(log, text)
    html = str(tmp_path / "run.html")
    for command in (
        ["info"],
        ["info", "--json"],
        ["export"],
        ["metrics"],
        ["replay"],
        ["verify"],
        ["show", "--at", "1"],
        ["show", "--group", "g1"],
        ["diff", str(EXAMPLE)],
        ["timeline", "-o", html],
    ):
        line = one_line_error(run(command[0], str(log), *command[1:]))
        assert line.startswith(f"rolloutlog: error: {log}: record batch of seq 0..3: "), line
        assert "run_started.config: " in line, line


def test_a_reader_that_leaves_the_pipe_early_is_no_error(tmp_path: Path) -> None:
    """`rolloutlog export LOG | head` is normal use: no error line when head leaves."""
    log = tmp_path / "run.arrow"
    assert run("simulate", "--scenario", "smoke", "--steps", "30", "--log", str(log)).exit_code == 0
    command = [sys.executable, "-c", "from rolloutlog.cli.main import main; main()"]
    export = subprocess.Popen(
        [*command, "export", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert export.stdout is not None and export.stderr is not None
    export.stdout.read(300)
    export.stdout.close()
    stderr = export.stderr.read()
    assert (export.wait(timeout=60), stderr) == (1, b"")


def test_import_refuses_t_going_back_naming_the_file_and_line(tmp_path: Path) -> None:
    lines = EXAMPLE.with_suffix(".jsonl").read_text(encoding="utf-8").splitlines()
    assert '"t": 3.25' in lines[17]
    lines[17] = lines[17].replace('"t": 3.25', '"t": 0.5')
    (tmp_path / "back.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run("import", str(tmp_path / "back.jsonl"), "-o", str(tmp_path / "run.arrow"))
    assert one_line_error(result) == (
        f"rolloutlog: error: {tmp_path / 'back.jsonl'}: line 18: episode_completed.t: 0.5 is "
        "before the previous event's t, 3.0 (t never goes back)"
    )
    assert not (tmp_path / "run.arrow").exists()
