"""Explicit checks of every event against docs/contract.md § Events.

An event is checked on both sides of the log (a pair assertion, STYLE.md): before it is
written and again after it is read back, so that a bug in a writer, a reader or a hand-made
log is caught at the boundary instead of deep in a replay. Checks raise `EventError` naming
kind, seq and field; there is no `assert`, so they survive `python -O`.

`FIELD_VALUE_TYPES` says what plain value every payload field holds. The Arrow schema and
the JSONL importer are derived from it, so that a field added to `types.py` needs one rule
here and nothing else.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, NoReturn, cast

import attrs

from rolloutlog.events.errors import EventError
from rolloutlog.events.types import (
    CANCEL_REASONS,
    DROP_REASONS,
    EVENT_TYPES,
    INTERRUPT_REASONS,
    UNSEQUENCED,
    WORK_KINDS,
    BatchShipped,
    Event,
    GroupScored,
    RunStarted,
    event_fields,
)

ValueType = Literal["int", "float", "bool", "str", "str_list", "float_list", "json"]
Check = Callable[[Any], str | None]

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
JSON_DEPTH_MAX: Final = 64  # a bound on config nesting: recursion must have a limit


@attrs.frozen
class Rule:
    """What a field holds (`value_type`) and the check of its value (None when fine)."""

    value_type: ValueType
    check: Check
    # Every non-empty ASCII string passes `check` (for a list: every tuple of distinct
    # ones), so a column of only those needs no check per value (`replay.columnar_validate`).
    any_ascii: bool = False


def _shown(value: Any) -> str:
    """The value as JSON would write it (`"x"`, `true`, `null`), cut to stay one short line."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# Each check starts with a fast path for the common, valid value (exact type, in range),
# because every event is checked twice and checks bound the log's throughput.


def integer(low: int = INT64_MIN) -> Rule:
    """An int (never a bool) in `[low, INT64_MAX]`: the log stores it as int64."""

    def check(value: Any) -> str | None:
        if type(value) is int and low <= value <= INT64_MAX:
            return None
        if not _is_int(value):
            return f"expected an integer, got {_shown(value)}"
        if value < low:
            return f"must be >= {low}, got {value}"
        return None if value <= INT64_MAX else f"must fit in int64, got {value}"

    return Rule("int", check)


def number(low: float = -math.inf) -> Rule:
    """A finite int or float `>= low`; NaN is refused because it would not equal itself."""

    def check(value: Any) -> str | None:
        if type(value) is float and low <= value and -math.inf < value < math.inf:
            return None
        if not _is_number(value):
            return f"expected a number, got {_shown(value)}"
        try:
            as_float = float(value)
        except OverflowError:
            return f"is too large for a float64, got {value}"
        if as_float != value or not math.isfinite(as_float):
            return f"must be a finite float64, got {value!r}"
        return None if value >= low else f"must be >= {low}, got {value!r}"

    return Rule("float", check)


def _text_problem(value: Any, non_empty: bool) -> str | None:
    if type(value) is str and value.isascii() and (value or not non_empty):
        return None
    if not isinstance(value, str):
        return f"expected a string, got {_shown(value)}"
    if non_empty and not value:
        return "must not be empty"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"is not valid UTF-8 text: {value!r}"
    return None


def text(non_empty: bool = False) -> Rule:
    """A string that encodes as UTF-8 (Arrow strings are UTF-8); ids must not be empty."""

    def check(value: Any) -> str | None:
        if type(value) is str and value.isascii() and (value or not non_empty):
            return None
        return _text_problem(value, non_empty)

    return Rule("str", check, any_ascii=True)


def one_of(allowed: tuple[str, ...]) -> Rule:
    """A string enum: one of `allowed`."""

    def check(value: Any) -> str | None:
        if value in allowed and isinstance(value, str):
            return None
        return f"must be one of {', '.join(map(repr, allowed))}, got {_shown(value)}"

    return Rule("str", check)


def _flag_problem(value: Any) -> str | None:
    return None if type(value) is bool else f"expected true or false, got {_shown(value)}"


def _ids_problem(value: Any) -> str | None:
    if not isinstance(value, tuple):
        return f"expected a tuple of ids, got {_shown(value)}"
    for item in value:
        problem = _text_problem(item, non_empty=True)
        if problem is not None:
            return f"item {_shown(item)}: {problem}"
    if len(set(value)) != len(value):
        repeated = next(item for item in value if value.count(item) > 1)
        return f"lists {_shown(repeated)} more than once"
    return None


_NUMBER: Final = number()


def _numbers_problem(value: Any) -> str | None:
    if not isinstance(value, tuple):
        return f"expected a tuple of numbers, got {_shown(value)}"
    for item in value:
        problem = _NUMBER.check(item)
        if problem is not None:
            return f"item {_shown(item)}: {problem}"
    return None


def _json_problem(value: Any, depth: int = 0) -> str | None:
    """Why `value` is not plain JSON data that comes back equal after a round trip."""
    if depth > JSON_DEPTH_MAX:
        return f"nests deeper than {JSON_DEPTH_MAX} levels"
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"holds a non-finite number {value!r}"
    if isinstance(value, list):
        return next(filter(None, (_json_problem(item, depth + 1) for item in value)), None)
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            return "has a key that is not a string"
        items = (_json_problem(item, depth + 1) for item in value.values())
        return next(filter(None, items), None)
    return f"holds {type(value).__name__} {_shown(value)}, which JSON cannot hold as it is"


def _config_problem(value: Any) -> str | None:
    if not isinstance(value, dict):
        return f"expected an object, got {_shown(value)}"
    return _json_problem(value)


# One rule per payload field name: a name means the same thing (and is one Arrow column)
# in every kind that has it. `_KIND_RULES` narrows a shared name for one kind.
FIELD_RULES: Final[Mapping[str, Rule]] = {
    "config": Rule("json", _config_problem),
    "seed": integer(),
    "schema_version": integer(low=1),
    "code_version": text(),
    "group_id": text(non_empty=True),
    "work": one_of(WORK_KINDS),
    "env": text(),
    "task_id": text(),
    "group_size": integer(low=1),
    "policy_version": integer(low=0),
    "step": integer(low=1),
    "frozen": Rule("bool", _flag_problem),
    "episode_id": text(non_empty=True),
    "member": integer(low=0),
    "reward": number(),
    "prompt_tokens": integer(low=0),
    "completion_tokens": integer(low=0),
    "error": text(),
    "episode_ids": Rule("str_list", _ids_problem, any_ascii=True),
    "unscheduled": integer(low=0),
    "reason": text(non_empty=True),
    "version": integer(low=0),
    "max_inflight": integer(low=0),
    "n": integer(low=0),
    "age": integer(low=0),
    "advantages": Rule("float_list", _numbers_problem),
    "admitted": Rule("bool", _flag_problem),
    "trained_ids": Rule("str_list", _ids_problem, any_ascii=True),
    "tokens": integer(low=0),
    "masked_tokens": integer(low=0),
}
_KIND_RULES: Final[Mapping[tuple[str, str], Rule]] = {
    ("episodes_cancelled", "reason"): one_of(CANCEL_REASONS),
    ("episode_dropped", "reason"): one_of(DROP_REASONS),
    ("episode_interrupted", "reason"): one_of(INTERRUPT_REASONS),
}
FIELD_VALUE_TYPES: Final[Mapping[str, ValueType]] = {
    name: rule.value_type for name, rule in FIELD_RULES.items()
}

_SEQ_RULE: Final = integer(low=UNSEQUENCED)
_T_RULE: Final = number(low=0.0)


def _payload_checks(cls: type[Event]) -> tuple[tuple[str, Check], ...]:
    """The checks of one kind: seq, t, then payload fields; a field without a rule fails import."""
    missing = [name for name in event_fields(cls) if name not in FIELD_RULES]
    if missing:
        raise LookupError(f"validate.py has no rule for {cls.kind}.{missing[0]}")
    payload = (
        (name, _KIND_RULES.get((cls.kind, name), FIELD_RULES[name]).check)
        for name in event_fields(cls)
    )
    return (("seq", _SEQ_RULE.check), ("t", _T_RULE.check), *payload)


_CHECKS: Final[dict[type[Any], tuple[tuple[str, Check], ...]]] = {
    cls: _payload_checks(cls) for cls in EVENT_TYPES.values()
}


def validate_event(event: object) -> None:
    """Raise `EventError` unless `event` is a well-formed event of a known kind.

    Checks types (an int is never a bool, a float is finite), ranges (counts are
    non-negative, steps start at 1) and relations between fields of one event. Whether the
    event fits the log before it (a known group, a gap-free seq) is for the log and the
    deciders to check.
    """
    checks = _CHECKS.get(type(event))
    if checks is None:
        raise EventError("?", None, "kind", f"not an event: {type(event).__name__}")
    for name, check in checks:
        problem = check(getattr(event, name))
        if problem is not None:
            _refuse(cast(Event, event), name, problem)
    relation = _RELATIONS.get(type(event))
    related = None if relation is None else relation(event)
    if related is not None:
        _refuse(cast(Event, event), *related)


def t_order_problem(previous: float, t: float) -> str | None:
    """`t` never goes back: every driver stamps an event with its clock when it appends
    it (a decided event with its world event's `t`), so a log's `t` never decreases. The
    one wording of the rule: `import` refuses a line that breaks it, `replay` reports it as
    a violation."""
    if t < previous:
        return f"{t!r} is before the previous event's t, {previous!r} (t never goes back)"
    return None


def _refuse(event: Event, field: str, problem: str) -> NoReturn:
    seq = event.seq if _is_int(event.seq) else None
    raise EventError(event.kind, seq, field, problem)


def _opening_problem(event: RunStarted) -> tuple[str, str] | None:
    if event.seq in (UNSEQUENCED, 0):
        return None
    return ("seq", f"run_started always has seq 0, got {event.seq}")


def _scored_problem(event: GroupScored) -> tuple[str, str] | None:
    """Advantages pair with members; only eval or empty groups have none and are not admitted."""
    if (event.advantages or event.admitted) and len(event.advantages) != len(event.episode_ids):
        return (
            "advantages",
            f"expected one per episode_ids ({len(event.episode_ids)}), got {len(event.advantages)}",
        )
    if event.admitted and not event.episode_ids:
        return ("admitted", "a group with no scored member cannot be admitted")
    return None


def _shipped_problem(event: BatchShipped) -> tuple[str, str] | None:
    """What is trained is a subset of what was cut: pruning only removes; masking only
    takes gradient from tokens trained."""
    cut = set(event.episode_ids)
    untrained = [ident for ident in event.trained_ids if ident not in cut]
    if untrained:
        return ("trained_ids", f"{_shown(untrained[0])} is not in episode_ids")
    if event.masked_tokens > event.tokens:
        return ("masked_tokens", f"{event.masked_tokens} is more than tokens ({event.tokens})")
    return None


_RELATIONS: Final[dict[type[Any], Callable[[Any], tuple[str, str] | None]]] = {
    RunStarted: _opening_problem,
    GroupScored: _scored_problem,
    BatchShipped: _shipped_problem,
}
