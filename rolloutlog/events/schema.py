"""The Arrow form of events: one flat, nullable table with a column per field name.

Every kind shares one schema so that a log is a single Arrow IPC stream that any Arrow
reader (pyarrow, polars, duckdb) can open without knowing rolloutlog. A field name is one
column across kinds (`policy_version`, `episode_ids`, `reason`, `step`); a row leaves the
columns of other kinds null. `seq`, `t` and `kind` are never null.

Conversion is column-wise, because per-row work is what bounds throughput in Python: the
writer builds one Python list per column and calls `pa.array` once per column; the reader
calls `to_pylist()` once per column and builds objects kind by kind. `batch_columns` stops
before the objects, for replays that fold columns directly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import attrgetter
from typing import Any, Final

import attrs
import google_crc32c
import pyarrow as pa
import pyarrow.ipc as ipc

from rolloutlog.events.errors import EventError, LogSchemaError
from rolloutlog.events.types import EVENT_TYPES, WORK_KINDS, Event, event_fields
from rolloutlog.events.validate import FIELD_VALUE_TYPES

# Version 2 renamed group_opened's `live` (the group samples from the policy being trained)
# to `frozen`, its negation; version 3 added batch_shipped's `masked_tokens` (the tokens
# masked past the bound). `upgrade_batch` reads older logs as the current version.
SCHEMA_VERSION: Final = 3
SCHEMA_VERSION_KEY: Final = b"rolloutlog.schema_version"
CHECKSUM_KEY: Final = b"rolloutlog.crc32c"
FIRST_SEQ_KEY: Final = b"rolloutlog.first_seq"
LAST_SEQ_KEY: Final = b"rolloutlog.last_seq"
NOTE_PREFIX: Final = "rolloutlog.note."  # a batch's notes: what a recorder says of its events

# Fixed dictionaries: the writer emits each once per stream, indices stay stable across
# batches and versions (new kinds are appended), and the reader can check them for damage.
KIND_NAMES: Final = tuple(EVENT_TYPES)
# A log written before a kind existed carries a shorter kind dictionary: a prefix of this
# one (kinds are only ever appended), so its codes keep their meaning. run_resumed is the
# first kind added after schema version 1 shipped with 14.
FIRST_KIND_COUNT: Final = 14
KIND_DICTIONARY: Final = pa.array(KIND_NAMES, pa.string())
WORK_DICTIONARY: Final = pa.array(WORK_KINDS, pa.string())
_KIND_CODES: Final = {kind: code for code, kind in enumerate(KIND_NAMES)}
_WORK_CODES: Final = {work: code for code, work in enumerate(WORK_KINDS)}
_ENUM_TYPE: Final = pa.dictionary(pa.int8(), pa.string())

PAYLOAD_FIELDS: Final = {kind: event_fields(cls) for kind, cls in EVENT_TYPES.items()}
FIELD_NAMES: Final = tuple(
    dict.fromkeys(name for names in PAYLOAD_FIELDS.values() for name in names)
)

_ARROW_TYPES: Final = {
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "str": pa.string(),
    "str_list": pa.list_(pa.string()),
    "float_list": pa.list_(pa.float64()),
    "json": pa.string(),  # JSON text: config is open-ended plain data
}


def _column_type(name: str) -> pa.DataType:
    return _ENUM_TYPE if name == "work" else _ARROW_TYPES[FIELD_VALUE_TYPES[name]]


LOG_SCHEMA: Final = pa.schema(
    [
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("t", pa.float64(), nullable=False),
        pa.field("kind", _ENUM_TYPE, nullable=False),
        *(pa.field(name, _column_type(name)) for name in FIELD_NAMES),
    ],
    metadata={SCHEMA_VERSION_KEY: str(SCHEMA_VERSION).encode()},
)
# Version 2 lacks the last column, `masked_tokens`; version 1 also has `live` where later
# versions have `frozen`, at the same place.
_MASKED: Final = "masked_tokens"
_V1_LIVE: Final = "live"
LOG_SCHEMA_V2: Final = LOG_SCHEMA.remove(LOG_SCHEMA.get_field_index(_MASKED)).with_metadata(
    {SCHEMA_VERSION_KEY: b"2"}
)
LOG_SCHEMA_V1: Final = LOG_SCHEMA_V2.set(
    LOG_SCHEMA_V2.get_field_index("frozen"), pa.field(_V1_LIVE, pa.bool_())
).with_metadata({SCHEMA_VERSION_KEY: b"1"})
_SCHEMAS: Final = {1: LOG_SCHEMA_V1, 2: LOG_SCHEMA_V2, SCHEMA_VERSION: LOG_SCHEMA}
READ_VERSIONS: Final = frozenset(_SCHEMAS)
_LIST_FIELDS: Final = frozenset(
    name for name in FIELD_NAMES if FIELD_VALUE_TYPES[name] in ("str_list", "float_list")
)
_JSON_FIELDS: Final = frozenset(name for name in FIELD_NAMES if FIELD_VALUE_TYPES[name] == "json")


def events_to_batch(events: Sequence[Event]) -> pa.RecordBatch:
    """One record batch of `LOG_SCHEMA` holding `events` in order (seqs as they are)."""
    columns: dict[str, list[Any]] = {name: [None] * len(events) for name in FIELD_NAMES}
    rows_by_type: dict[type[Event], list[int]] = {}
    for row, event in enumerate(events):
        rows_by_type.setdefault(type(event), []).append(row)
    for cls, rows in rows_by_type.items():
        members = [events[row] for row in rows]
        for name in PAYLOAD_FIELDS[cls.kind]:
            column = columns[name]
            for row, value in zip(rows, map(attrgetter(name), members), strict=True):
                column[row] = value
    kind_codes = pa.array([_KIND_CODES[event.kind] for event in events], pa.int8())
    arrays = [
        pa.array([event.seq for event in events], pa.int64()),
        pa.array([event.t for event in events], pa.float64()),
        pa.DictionaryArray.from_arrays(kind_codes, KIND_DICTIONARY),
        *(_to_arrow(name, columns[name]) for name in FIELD_NAMES),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=LOG_SCHEMA)


def _to_arrow(name: str, values: list[Any]) -> pa.Array:
    if name == "work":
        codes = [None if value is None else _WORK_CODES[value] for value in values]
        return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int8()), WORK_DICTIONARY)
    if name in _JSON_FIELDS:
        values = [None if value is None else _json_text(value) for value in values]
    return pa.array(values, _column_type(name))


def _json_text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def batch_columns(batch: pa.RecordBatch) -> dict[str, list[Any]]:
    """The batch as plain Python lists, one per column name; null where a kind lacks a field.

    `kind` and `work` are strings, `config` is parsed JSON, list columns hold lists.
    """
    columns: dict[str, list[Any]] = {}
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        if isinstance(column, pa.DictionaryArray):
            # Decoding indices through numpy is ~50x faster than DictionaryArray.to_pylist();
            # a null index becomes -1, which picks the None appended to the labels.
            labels = [*column.dictionary.to_pylist(), None]
            codes = column.indices.fill_null(-1).to_numpy().tolist()
            columns[name] = [labels[code] for code in codes]
        elif name in _JSON_FIELDS:
            columns[name] = json_column(batch, name)
        else:
            columns[name] = column.to_pylist()
    return columns


def json_column(batch: pa.RecordBatch, name: str) -> list[Any]:
    """The parsed values of JSON column `name`; null stays None.

    A cell that is not JSON text raises an `EventError` naming its kind, seq and field: the
    writer never writes one, but another tool can, with checksums that hold.
    """
    values = []
    for row, text in enumerate(batch.column(name).to_pylist()):
        try:
            values.append(None if text is None else json.loads(text))
        except (ValueError, RecursionError) as error:
            problem = "nested too deeply" if isinstance(error, RecursionError) else str(error)
            kind, seq = batch.column("kind")[row].as_py(), batch.column("seq")[row].as_py()
            raise EventError(kind, seq, name, f"not JSON text ({problem})") from error
    return values


def iter_batch_columns(batches: Iterable[pa.RecordBatch]) -> Iterator[dict[str, list[Any]]]:
    """`batch_columns` of each batch, one batch in memory at a time."""
    for batch in batches:
        yield batch_columns(batch)


def columns_to_events(columns: Mapping[str, list[Any]]) -> list[Event]:
    """Events from `batch_columns` output, in row order; built kind by kind, not row by row."""
    kinds = columns["kind"]
    rows_by_kind: dict[str, list[int]] = {}
    for row, kind in enumerate(kinds):
        rows_by_kind.setdefault(kind, []).append(row)
    events: list[Any] = [None] * len(kinds)
    for kind, rows in rows_by_kind.items():
        cls = EVENT_TYPES.get(kind)
        if cls is None:
            raise EventError(str(kind), columns["seq"][rows[0]], "kind", "unknown kind")
        arguments: list[dict[str, Any]] = [{} for _ in rows]
        for name in ("seq", "t", *PAYLOAD_FIELDS[kind]):
            values = _field_values(name, columns[name], rows)
            for keywords, value in zip(arguments, values, strict=True):
                keywords[name] = value
        for row, keywords in zip(rows, arguments, strict=True):
            events[row] = cls(**keywords)
    return events


def _field_values(name: str, column: list[Any], rows: list[int]) -> list[Any]:
    if name in _LIST_FIELDS:
        return [None if column[row] is None else tuple(column[row]) for row in rows]
    return [column[row] for row in rows]


def batch_to_events(batch: pa.RecordBatch) -> list[Event]:
    """The events of one record batch, in row order."""
    return columns_to_events(batch_columns(batch))


def batch_checksum(batch: pa.RecordBatch) -> int:
    """CRC32C of the batch's IPC message body: the bytes a stream writer puts after the header.

    The reader re-serializes each batch it decodes and compares, so damage to the body and
    to the header's buffer layout both show up.
    """
    return int(google_crc32c.value(ipc.read_message(batch.serialize()).body))


@attrs.frozen
class BatchStamp:
    """What each record batch carries in its custom metadata: its seq range and checksum."""

    first_seq: int
    last_seq: int
    checksum: int

    def to_metadata(self) -> dict[bytes, bytes]:
        return {
            FIRST_SEQ_KEY: str(self.first_seq).encode(),
            LAST_SEQ_KEY: str(self.last_seq).encode(),
            CHECKSUM_KEY: f"{self.checksum:08x}".encode(),
        }

    @classmethod
    def from_metadata(cls, metadata: Mapping[bytes, bytes] | None) -> BatchStamp | None:
        """Parse a batch's stamp; None when it is missing or unreadable (a damaged batch)."""
        try:
            found = metadata or {}
            first_seq = int(found[FIRST_SEQ_KEY])
            last_seq = int(found[LAST_SEQ_KEY])
            return cls(first_seq, last_seq, int(found[CHECKSUM_KEY], 16))
        except (KeyError, ValueError):
            return None


def check_schema(schema: pa.Schema) -> int:
    """The log's schema version; refuses a non-rolloutlog schema, a newer version, other columns."""
    raw = (schema.metadata or {}).get(SCHEMA_VERSION_KEY)
    if raw is None:
        raise LogSchemaError(
            "not a rolloutlog log: the Arrow schema has no rolloutlog.schema_version"
        )
    try:
        version = int(raw)
    except ValueError as error:
        raise LogSchemaError(f"unreadable rolloutlog.schema_version {raw!r}") from error
    if version > SCHEMA_VERSION:
        raise LogSchemaError(
            f"schema_version {version} is newer than this rolloutlog reads "
            f"({SCHEMA_VERSION}); upgrade rolloutlog to read this log"
        )
    expected = _SCHEMAS.get(version)
    if expected is None:
        raise LogSchemaError(f"schema_version {version} is not a version rolloutlog wrote")
    if not schema.equals(expected, check_metadata=False):
        raise LogSchemaError(f"schema_version {version}: {_schema_difference(schema, expected)}")
    return version


def upgrade_batch(batch: pa.RecordBatch, version: int) -> pa.RecordBatch:
    """A record batch of schema `version` (as `check_schema` accepted it) as one of `LOG_SCHEMA`.

    Version 1's `live` becomes `frozen`, its negation (null stays null: other kinds' rows);
    before version 3 nothing was masked, so `batch_shipped.masked_tokens` reads 0 (null in
    other kinds' rows); and `run_started.schema_version` reads as the version the events
    now are in, so that they export, import and re-record as a current log.
    """
    if version == SCHEMA_VERSION:
        return batch
    # Imported here: pyarrow.compute costs a tenth of a second at start-up, and only a log
    # of an older schema needs it (`simulate` and a current log never do).
    import pyarrow.compute as pc

    columns = batch.columns
    if version == 1:
        frozen = LOG_SCHEMA.get_field_index("frozen")
        columns[frozen] = pc.invert(columns[frozen])
    shipped = pc.equal(batch.column("kind").cast(pa.string()), "batch_shipped")
    columns.insert(
        LOG_SCHEMA.get_field_index(_MASKED),
        pc.if_else(shipped, pa.scalar(0, pa.int64()), pa.scalar(None, pa.int64())),
    )
    recorded = LOG_SCHEMA.get_field_index("schema_version")
    columns[recorded] = pc.if_else(
        pc.is_null(columns[recorded]), columns[recorded], pa.scalar(SCHEMA_VERSION, pa.int64())
    )
    return pa.RecordBatch.from_arrays(columns, schema=LOG_SCHEMA)


def upgrade_json(data: dict[str, Any], version: int) -> dict[str, Any]:
    """One JSON event object of schema `version` as the current version: `upgrade_batch`'s rules."""
    if version == SCHEMA_VERSION:
        return data
    upgraded = dict(data)
    if upgraded.get("kind") == "run_started":
        upgraded["schema_version"] = SCHEMA_VERSION
    if upgraded.get("kind") == "batch_shipped":
        upgraded.setdefault(_MASKED, 0)
    opened = upgraded.get("kind") == "group_opened"
    if version == 1 and opened and isinstance(upgraded.get(_V1_LIVE), bool):
        upgraded["frozen"] = not upgraded.pop(_V1_LIVE)
    return upgraded


def known_kinds(dictionary: pa.Array) -> int | None:
    """How many kinds a log's kind dictionary names, or None if it is not a prefix of ours."""
    count = len(dictionary)
    if FIRST_KIND_COUNT <= count <= len(KIND_NAMES) and dictionary.equals(KIND_DICTIONARY[:count]):
        return count
    return None


def _schema_difference(schema: pa.Schema, wanted: pa.Schema) -> str:
    for expected in wanted:
        index = schema.get_field_index(expected.name)
        if index < 0:
            return f"column {expected.name!r} is missing"
        if not schema.field(index).equals(expected):
            return f"column {expected.name!r} is {schema.field(index)}, expected {expected}"
    return f"columns differ: {schema.names} (expected {wanted.names})"
