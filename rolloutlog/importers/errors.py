"""Reading another stack's files: one-line errors that name the file, the line and the field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
_NAMES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    float: "a number",
    int: "an integer",
    bool: "a boolean",
}


class ForeignRunError(ValueError):
    """A folder or record the import cannot use; the message is one line naming file and field."""


def field(record: Any, name: str, kind: type[T], where: str) -> T:
    """`record[name]`, of `kind` (an int counts as a float), or refused naming `where`."""
    if not isinstance(record, dict) or name not in record:
        raise ForeignRunError(f"{where}: {name}: missing")
    value = record[name]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)  # type: ignore[return-value]
    if not isinstance(value, kind) or (kind in (int, float) and isinstance(value, bool)):
        raise ForeignRunError(
            f"{where}: {name}: expected {_NAMES.get(kind, kind.__name__)}, got {value!r:.40}"
        )
    return value


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ForeignRunError(f"{path}: not readable JSON ({error})") from error
    if not isinstance(data, dict):
        raise ForeignRunError(f"{path}: expected a JSON object")
    return data


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for each non-empty line."""
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ForeignRunError(f"{path}: line {number}: not JSON ({error.msg})") from error
            if not isinstance(record, dict):
                raise ForeignRunError(f"{path}: line {number}: expected a JSON object")
            yield number, record
