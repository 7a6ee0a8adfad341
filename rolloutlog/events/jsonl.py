"""The JSON Lines form of a log: one event per line, for people, diffs and other tools.

Each line is one object with `kind`, `seq`, `t` and the field names of docs/contract.md; tuples
are JSON arrays. Floats are written with Python's shortest round-trip repr, so they come
back bit for bit, and a log survives export → import unchanged (docs/contract.md, property 6).

Import checks every line before anything is built on it (JSON syntax, a known kind, no
unknown or missing field, then `validate_event`) and names the line and field of the first
problem, as in `line 17: episode_completed.reward: expected a number, got "x"`. `seq` may
be left out (the log writer assigns it); when present it must count up from 0 by one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, Final, TextIO

from rolloutlog.events.errors import EventError, JsonlError
from rolloutlog.events.schema import READ_VERSIONS, SCHEMA_VERSION, upgrade_json
from rolloutlog.events.types import EVENT_TYPES, UNSEQUENCED, Event, event_fields
from rolloutlog.events.validate import FIELD_VALUE_TYPES, t_order_problem, validate_event

_COMMON: Final = ("kind", "seq", "t")


def event_to_json(event: Event) -> dict[str, Any]:
    """The event as plain JSON data: `kind`, `seq`, `t`, then its fields (tuples as lists)."""
    data: dict[str, Any] = {"kind": event.kind, "seq": event.seq, "t": event.t}
    for name in event_fields(type(event)):
        value = getattr(event, name)
        data[name] = list(value) if isinstance(value, tuple) else value
    return data


def write_jsonl(events: Iterable[Event], out: TextIO) -> int:
    """Write one JSON object per line to `out`; returns the number of events written."""
    count = 0
    for event in events:
        out.write(json.dumps(event_to_json(event), ensure_ascii=False, allow_nan=False))
        out.write("\n")
        count += 1
    return count


def read_jsonl(lines: Iterable[str]) -> Iterator[Event]:
    """Events from JSON lines (a text file works), each checked; blank lines are skipped.

    An export of an older log (its `run_started` names an older `schema_version`) is read
    as the current version, by `schema.upgrade_json`.
    """
    return (event for _, event in _numbered_events(lines))


def import_lines(lines: Iterable[bytes]) -> Iterator[Event]:
    """The events of a whole log's JSON lines, as a file opened in binary mode gives them:
    `read_jsonl`'s checks, and each line UTF-8, and the log's opening (one `run_started`,
    first, of a schema version this rolloutlog reads) and `t` never going back, every
    problem named by its line."""
    opening, previous_t = True, 0.0
    for number, event in _numbered_events(_decoded(lines)):
        if (event.kind == "run_started") != opening:
            raise JsonlError(number, f"{event.kind}: a log opens with run_started, and only it")
        backwards = t_order_problem(previous_t, event.t)
        if backwards is not None:
            raise JsonlError(number, f"{event.kind}.t: {backwards}")
        opening, previous_t = False, event.t
        yield event
    if opening:
        raise JsonlError(1, "no event: a log opens with run_started")


def _decoded(lines: Iterable[bytes]) -> Iterator[str]:
    for number, line in enumerate(lines, start=1):
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError as error:
            raise JsonlError(number, f"not UTF-8 text (byte {error.start + 1})") from error


def _numbered_events(lines: Iterable[str]) -> Iterator[tuple[int, Event]]:
    """(line number, event) for each line that holds one."""
    expected_seq = 0
    version = SCHEMA_VERSION
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        data = _parse(line, number)
        if isinstance(data, dict):
            if data.get("kind") == "run_started":
                version = _recorded_version(data.get("schema_version"), number)
            data = upgrade_json(data, version)
        event = event_from_json(data, number)
        if "seq" in data and event.seq != expected_seq:
            raise JsonlError(
                number,
                f"{event.kind}.seq: expected {expected_seq} (seqs count up from 0 by one), "
                f"got {event.seq}",
            )
        expected_seq += 1
        yield number, event


def _recorded_version(value: Any, line: int) -> int:
    """The version a run_started line names; one that is no int is left to validation."""
    if type(value) is not int:
        return SCHEMA_VERSION
    if value not in READ_VERSIONS:
        raise JsonlError(
            line,
            f"run_started.schema_version: this rolloutlog reads versions "
            f"{', '.join(map(str, sorted(READ_VERSIONS)))}, got {value}",
        )
    return value


def event_from_json(data: Any, line: int) -> Event:
    """Build and check one event from parsed JSON; `line` is named in every error."""
    if not isinstance(data, dict):
        raise JsonlError(line, f"expected a JSON object, got {type(data).__name__}")
    kind = data.get("kind")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise JsonlError(
            line, f"kind: unknown kind {json.dumps(kind)}; known: {', '.join(EVENT_TYPES)}"
        )
    names = ("t", *event_fields(cls))
    unknown = [key for key in data if key not in _COMMON and key not in names]
    missing = [name for name in names if name not in data]
    if unknown or missing:
        problem = "unknown field" if unknown else "missing field"
        raise JsonlError(line, f"{kind}.{(unknown or missing)[0]}: {problem}")
    values = {name: _from_json(name, data[name]) for name in names}
    event = cls(seq=data.get("seq", UNSEQUENCED), **values)
    try:
        validate_event(event)
    except EventError as error:
        raise JsonlError(line, f"{error.kind}.{error.field}: {error.problem}") from error
    return event


def _from_json(name: str, value: Any) -> Any:
    """JSON's types to the event's: arrays become tuples, integers in float fields floats."""
    value_type = "float" if name == "t" else FIELD_VALUE_TYPES[name]
    if value_type == "float":
        return _as_float(value)
    if value_type in ("str_list", "float_list") and isinstance(value, list):
        return (
            tuple(_as_float(item) for item in value) if value_type == "float_list" else tuple(value)
        )
    return value


def _as_float(value: Any) -> Any:
    """An integer in a float field is that float when exact; otherwise validation says why."""
    if not isinstance(value, int) or isinstance(value, bool):
        return value
    try:
        as_float = float(value)
    except OverflowError:
        return value
    return as_float if as_float == value else value


def _parse(line: str, number: int) -> Any:
    """Strict JSON: NaN and Infinity are refused, and so is a key given twice."""
    try:
        return json.loads(line, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise JsonlError(number, f"invalid JSON: {error.msg} (column {error.colno})") from error
    except ValueError as error:
        raise JsonlError(number, f"invalid JSON: {error}") from error
    except RecursionError as error:
        raise JsonlError(number, "invalid JSON: nested too deeply") from error


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        repeated = next(key for key, _ in pairs if sum(k == key for k, _ in pairs) > 1)
        raise ValueError(f"key {json.dumps(repeated)} appears twice")
    return data
