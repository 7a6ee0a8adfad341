"""The upstream-conformance logs: hand-written JSON Lines of what another stack's code
decides, read from its source at a named commit, each with a `#` header that cites
file:line for every decision.

A log file is `rolloutlog import`'s JSON Lines with comment lines (`#` first) added: the
header says which run it is, and why each decision is the source's. `read_field_log`
drops the comments and reads the rest as `import` does (every line checked, `seq`
assigned in order), so the decisions are verified exactly as `rolloutlog verify` would.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from rolloutlog.events.jsonl import import_lines
from rolloutlog.events.types import Event
from rolloutlog.replay.conformance import Conformance, check_conformance
from rolloutlog.replay.source import MemoryLog

LOGS = Path(__file__).resolve().parent / "logs"

# A citation of the source: a file name with its extension, a colon and a line (or range).
CITATION = re.compile(r"[\w./-]+\.(?:py|yaml):\d+")


def log_path(preset: str, case: str) -> Path:
    """The log of `case` for `preset`: logs/PRESET.CASE.jsonl (one folder: a folder named for
    a stack, `areal/`, would read as that stack's package to the docs' path check)."""
    return LOGS / f"{preset}.{case}.jsonl"


def header(path: Path) -> str:
    """The log's comment lines, without their `#`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return "\n".join(line[1:].strip() for line in lines if line.startswith("#"))


def read_field_log(path: Path) -> list[Event]:
    """The log's events, as `rolloutlog import` reads the lines that are not comments."""
    with path.open("rb") as lines:
        kept = [line for line in lines if not line.startswith(b"#") and line.strip()]
    return [attrs.evolve(event, seq=seq) for seq, event in enumerate(import_lines(kept))]


def verdict(preset: str, case: str) -> Conformance:
    """`rolloutlog verify LOG --policy PRESET` (no time tolerance) on the log of `case`."""
    return check_conformance(MemoryLog(read_field_log(log_path(preset, case))), preset)


def cited_lines(path: Path) -> list[str]:
    """The file:line citations in the log's header."""
    return CITATION.findall(header(path))
