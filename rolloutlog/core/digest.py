"""The state digest chain: one short hash per event, each covering the one before it.

digest[n] = blake2b(digest[n-1] ‖ canonical(event n) ‖ fingerprint(state after event n)).
Two runs agree up to seq n iff their digests at n agree, so the first divergent event of
two logs is found by bisection over the chains without comparing whole states.

This module is the one definition of both texts a digest covers:

- the canonical event text, `repr((kind, seq, float(t), *payload))` with the payload in
  field order, lists as tuples and mappings as compact sorted JSON (`canonical`,
  `canonical_values` for a reader that has the values without the object);
- the fingerprint, `repr` of ten counts of the states after the event: the dispatcher's
  step, version, limit, in-flight episodes and open groups, then the sink's step,
  version, queued episodes, open groups and in-flight episodes (`fingerprint`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import attrs

from rolloutlog.core.state import DispatcherState, SinkState
from rolloutlog.events.types import Event, event_fields

GENESIS = bytes(16)
DIGEST_SIZE = 16

_FIELDS: dict[type[Any], tuple[str, ...]] = {}


def _normalise(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return value


def canonical_values(kind: str, seq: int, t: float, values: Sequence[Any]) -> bytes:
    """The canonical bytes of an event given its payload values in field order.

    Fed from event objects or straight from log columns, both give the same bytes, so a
    columnar fold can extend the same chain as the object path.
    """
    return repr((kind, seq, float(t), *map(_normalise, values))).encode()


def canonical(event: Event) -> bytes:
    """The canonical bytes of an event object."""
    cls = type(event)
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = event_fields(cls)
    return canonical_values(event.kind, event.seq, event.t, [getattr(event, n) for n in names])


def fingerprint(dispatcher: DispatcherState, sink: SinkState) -> tuple[int, ...]:
    """The counts of both deciders' states that each digest covers, in the order above."""
    return (
        dispatcher.step,
        dispatcher.version,
        dispatcher.limit,
        len(dispatcher.inflight),
        len(dispatcher.groups),
        sink.step,
        sink.version,
        len(sink.queue),
        len(sink.groups),
        len(sink.inflight),
    )


def chain(previous: bytes, event_bytes: bytes, fingerprint: tuple[int, ...]) -> bytes:
    """The next digest of the chain."""
    hasher = hashlib.blake2b(previous, digest_size=DIGEST_SIZE)
    hasher.update(event_bytes)
    hasher.update(repr(fingerprint).encode())
    return hasher.digest()


def event_payload(event: Event) -> dict[str, Any]:
    """All fields of an event as plain data (for reports and divergence messages)."""
    return {"kind": event.kind, **attrs.asdict(event)}
