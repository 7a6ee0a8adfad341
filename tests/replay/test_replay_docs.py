"""docs/replay.md defines every key that `replay --json` prints, and its worked example
prints what the docs show."""

from __future__ import annotations

import json
import re
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.events.log_reader import read_log
from rolloutlog.events.log_writer import write_log
from tests.replay.replay_helpers import small_log

DOCS = Path(__file__).resolve().parents[2] / "docs" / "replay.md"
# What the docs show of the worked example's runs; tables are rich's, 80 columns wide.
SHOWN_TABLES = (
    "verify edited.arrow",
    "show run.arrow --at 14",
    "show run.arrow --episode g3/1",
    "diff run.arrow edited.arrow",
)


def documented_keys(*, optional: bool = False) -> set[str]:
    """The keys named in the first column of the key table of docs/replay.md (with
    `optional`, only those whose definition says "only": a rule's own figures)."""
    text = DOCS.read_text(encoding="utf-8")
    table = text.split("## Every key of `replay --json`", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in table.splitlines() if line.startswith("| `")]
    return {
        key
        for name, meaning in rows
        if not optional or re.search(r"\bonly\b", meaning)
        for key in re.findall(r"`([^`]+)`", name)
    }


def test_every_key_of_replay_json_is_defined_in_the_docs(tmp_path: Path) -> None:
    log = tmp_path / "run.arrow"
    write_log(log, small_log())
    result = CliRunner().invoke(main, ["replay", "--json", str(log)])
    assert result.exit_code == 0, result.output
    keys = set(json.loads(result.stdout))
    assert keys == documented_keys() - (documented_keys(optional=True) - keys)
    assert keys >= documented_keys() - documented_keys(optional=True)


def shown(command: str) -> str:
    """What docs/replay.md shows `rolloutlog COMMAND` printing: the lines after its prompt,
    up to the next prompt or the end of the block."""
    text = DOCS.read_text(encoding="utf-8")
    after = text.split(f"\n$ rolloutlog {command}", 1)[1].split("\n", 1)[1]
    return after.split("```", 1)[0].split("\n$ ", 1)[0].strip("\n")


@pytest.fixture
def worked_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run.arrow from the docs' own script, and edited.arrow: seq 9 not admitted (its sed)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    text = DOCS.read_text(encoding="utf-8").split("## A worked example", 1)[1]
    exec(text.split("```python\n", 1)[1].split("```", 1)[0], {})  # writes run.arrow
    log = read_log("run.arrow")
    assert log[9].kind == "group_scored"
    log[9] = attrs.evolve(log[9], admitted=False)
    write_log("edited.arrow", log)


@pytest.mark.usefixtures("worked_example")
def test_the_worked_example_prints_what_the_docs_show() -> None:
    result = CliRunner().invoke(main, ["replay", "run.arrow", "--json"])
    replay = json.loads(result.stdout)
    pairs = re.findall(r'"([^"]+)": (\{[^}]*\}|\[[^]]*\]|"[^"]*"|[-\w.]+)', shown("replay"))
    assert len(pairs) > 10 and {key: replay[key] for key, _ in pairs} == {
        key: json.loads(value) for key, value in pairs
    }
    for command in SHOWN_TABLES:
        result = CliRunner().invoke(main, command.split())
        printed = "\n".join(line.rstrip() for line in result.stdout.splitlines())
        assert printed == shown(command), command


@pytest.mark.usefixtures("worked_example")
def test_the_worked_example_prints_the_metrics_row_the_docs_show() -> None:
    """The row in full; the header as abridged there (`...` stands for the columns between)."""
    header, row = CliRunner().invoke(main, ["metrics", "run.arrow"]).stdout.splitlines()
    shown_header, shown_row = shown("metrics run.arrow").splitlines()
    head, tail = shown_header.split(",...,")
    assert row == shown_row
    assert header.startswith(head + ",") and header.endswith("," + tail)
