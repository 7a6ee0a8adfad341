"""docs/log-format.md's recording example, run as written: its log replays clean."""

from __future__ import annotations

from pathlib import Path

import pytest

from rolloutlog.events.log_reader import LogReader, read_log
from rolloutlog.record import read_foreign_ids
from tests.record.clean import replay_problems

DOCS = Path(__file__).resolve().parents[2] / "docs" / "log-format.md"


def example() -> str:
    section = DOCS.read_text(encoding="utf-8").split("## Recording your own orchestrator", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_recording_example_replays_clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    exec(example(), {})  # writes run.arrow
    assert replay_problems(tmp_path / "run.arrow") == []
    info = LogReader(tmp_path / "run.arrow").info()
    section = DOCS.read_text(encoding="utf-8").split("## Recording your own orchestrator", 1)[1]
    assert f"with no violation: {info.events} events, 2 steps shipped" in section
    events = read_log(tmp_path / "run.arrow")
    kinds = [e.kind for e in events]
    assert kinds[-3:] == ["run_finished", "episodes_cancelled", "group_scored"]
    foreign = read_foreign_ids(tmp_path / "run.arrow")
    assert foreign["g1/0"] == "a-0" and foreign["g2"] == "b" and foreign["g4/0"] == "d-0"
