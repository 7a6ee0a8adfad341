"""The event rules of `events.validate`, applied to whole columns for the columnar fold.

The plain path checks every event object with `validate_event` as the reader builds it.
The columnar fold builds no objects, so it applies the same rules (`FIELD_RULES`) per
column of a record batch: every row of a kind carries each field of that kind (no null),
integers are in range (their min and max are checked), floats are finite and in range, and
strings, lists and JSON are checked once per distinct value. A batch that fails is not
folded here: the fold hands the log to the plain path, whose reader raises the exact
`EventError`. Relations inside one event (an id listed twice, one advantage per member)
and the kind-specific enums are refused by the fold itself as it applies the event.
"""

from __future__ import annotations

import json
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rolloutlog.events.schema import FIELD_NAMES, KIND_NAMES, PAYLOAD_FIELDS
from rolloutlog.events.validate import FIELD_RULES, Rule, number

# Which kinds carry a field: a bool table indexed by kind code, so that the rows that must
# hold a value are one numpy lookup away.
_CARRIED_BY: Final = {
    name: np.array([name in PAYLOAD_FIELDS[kind] for kind in KIND_NAMES]) for name in FIELD_NAMES
}
_T_RULE: Final = number(low=0.0)  # `t` is seconds since the run started, as validate_event says


def batch_is_valid(batch: pa.RecordBatch) -> bool:
    """True when every event of `batch` would pass `validate_event`'s field rules."""
    kind_column = batch.column("kind")
    if kind_column.null_count or batch.column("t").null_count:
        return False
    kinds = kind_column.indices.to_numpy()
    if not _floats_ok(_T_RULE, batch.column("t")):
        return False
    kinds_here = np.unique(kinds)
    for name in FIELD_NAMES:
        column = batch.column(name)
        nulls = column.null_count
        if nulls == len(column):  # most of the 32: a field of no kind in the batch
            if _CARRIED_BY[name][kinds_here].any():
                return False
            continue
        if nulls and not _present(column, _CARRIED_BY[name][kinds]):
            return False
        if not _values_ok(FIELD_RULES[name], column):
            return False
    return True


def _present(column: pa.Array, required: np.ndarray[Any, Any]) -> bool:
    """No row whose kind carries this field leaves it null."""
    return not bool(np.any(required & ~_valid_rows(column)))


def _valid_rows(column: pa.Array) -> np.ndarray[Any, Any]:
    """Which rows hold a value, read from the validity bitmap: `is_null().to_numpy()`
    builds its bools through Python objects, about 0.5 µs a row, on every column."""
    if isinstance(column, pa.DictionaryArray):
        if column.dictionary.null_count:  # a null label: let Arrow say which rows are null
            valid: np.ndarray[Any, Any] = column.is_valid().to_numpy(zero_copy_only=False)
            return valid
        column = column.indices
    bitmap = np.frombuffer(column.buffers()[0], dtype=np.uint8)
    bits = np.unpackbits(bitmap, count=column.offset + len(column), bitorder="little")
    return bits[column.offset :].view(bool)


def _values_ok(rule: Rule, column: pa.Array) -> bool:
    value_type = rule.value_type
    if value_type == "int":
        low, high = pc.min_max(column).values()
        return rule.check(low.as_py()) is None and rule.check(high.as_py()) is None
    if value_type == "float":
        return _floats_ok(rule, column)
    if value_type == "bool":
        return True
    if value_type == "str":  # a problem is a text, None is none: `any` finds the first
        return _any_ascii(rule, column) or not any(map(rule.check, _distinct(column)))
    if value_type in ("str_list", "float_list"):
        items = pc.list_flatten(column)
        return _any_ascii(rule, items) or rule.check(tuple(_distinct(items))) is None
    if value_type == "json":
        return all(_json_ok(rule, text) for text in _distinct(column))
    return False  # a value type this module does not know yet: let the plain path decide


def _any_ascii(rule: Rule, column: pa.Array) -> bool:
    """A rule that any non-empty ASCII string passes, over a column of only those: true
    without a look at each distinct value (ids are about one distinct value a row)."""
    if not rule.any_ascii:
        return False
    if isinstance(column, pa.DictionaryArray):
        column = column.dictionary
    column = column.drop_null()
    ascii_only = pc.all(pc.string_is_ascii(column)).as_py() is not False
    return ascii_only and (len(column) == 0 or pc.min(pc.binary_length(column)).as_py() > 0)


def _floats_ok(rule: Rule, column: pa.Array) -> bool:
    """Finite everywhere (NaN and infinities fail) and within the rule's range."""
    if not pc.all(pc.is_finite(column)).as_py():
        return False
    low, high = pc.min_max(column).values()
    return rule.check(low.as_py()) is None and rule.check(high.as_py()) is None


def _distinct(column: pa.Array) -> list[Any]:
    return [value for value in pc.unique(column).to_pylist() if value is not None]


def _json_ok(rule: Rule, text: str) -> bool:
    try:
        return rule.check(json.loads(text)) is None
    except ValueError:
        return False
