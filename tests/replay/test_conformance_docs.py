"""docs/foreign-runs.md's hand-written run: imported and checked as written, each command
prints what the docs show."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rolloutlog.cli import main

DOCS = Path(__file__).resolve().parents[2] / "docs" / "foreign-runs.md"
SECTION = "### A hand-written run, checked"
SHOWN = (
    "verify run.arrow --policy per-episode",
    "verify run.arrow --policy per-episode --t-tolerance 0.05",
    "verify late.arrow --policy per-episode --t-tolerance 0.05",
)


def section() -> str:
    return DOCS.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n## ", 1)[0]


def shown(command: str) -> str:
    """The lines the docs show after `$ rolloutlog COMMAND`, up to the block's end."""
    after = section().split(f"\n$ rolloutlog {command}\n", 1)[1]
    return after.split("```", 1)[0].strip("\n")


def rolloutlog(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    return "\n".join(line.rstrip() for line in result.stdout.splitlines())


@pytest.fixture
def hand_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run.jsonl from the docs, late.jsonl as the docs' sed makes it, both imported."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    log = section().split("```jsonl\n", 1)[1].split("```", 1)[0]
    Path("run.jsonl").write_text(log, encoding="utf-8")
    assert "$ sed 9d run.jsonl > late.jsonl" in section()  # line 9 left out:
    lines = log.splitlines(keepends=True)
    Path("late.jsonl").write_text("".join(lines[:8] + lines[9:]), encoding="utf-8")
    assert rolloutlog("import", "run.jsonl", "-o", "run.arrow") == shown(
        "import run.jsonl -o run.arrow"
    )
    rolloutlog("import", "late.jsonl", "-o", "late.arrow")


@pytest.mark.usefixtures("hand_written")
@pytest.mark.parametrize("command", SHOWN)
def test_the_hand_written_run_prints_what_the_docs_show(command: str) -> None:
    assert rolloutlog(*command.split()) == shown(command)


@pytest.mark.usefixtures("hand_written")
def test_plain_verify_stops_where_the_docs_say() -> None:
    printed = rolloutlog("verify", "run.arrow")
    assert printed.startswith("first divergence at seq 1")
    assert "t944" in printed and "gsm8k/17" in printed
