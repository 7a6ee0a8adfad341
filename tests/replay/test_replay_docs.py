"""docs/replay.md defines every key that `replay --json` prints."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner
from replay_helpers import small_log

from rolloutlog.cli import main
from rolloutlog.events.log_writer import write_log

DOCS = Path(__file__).resolve().parents[2] / "docs" / "replay.md"


def documented_keys() -> set[str]:
    """The keys named in the first column of the key table of docs/replay.md."""
    text = DOCS.read_text(encoding="utf-8")
    table = text.split("## Every key of `replay --json`", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {key for row in rows for key in re.findall(r"`([^`]+)`", row)}


def test_every_key_of_replay_json_is_defined_in_the_docs(tmp_path: Path) -> None:
    log = tmp_path / "run.arrow"
    write_log(log, small_log())
    result = CliRunner().invoke(main, ["replay", "--json", str(log)])
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)) == documented_keys()
