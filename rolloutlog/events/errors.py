"""Errors of the event vocabulary and of its durable form.

Every error names where the problem is: the event's kind, seq and field, the JSONL line,
or the seq range of the record batch, so that a user can find it without a debugger.
"""

from __future__ import annotations


class EventError(ValueError):
    """An event broke the contract of docs/contract.md § Events (a type, a range, a relation)."""

    def __init__(self, kind: str, seq: int | None, field: str, problem: str) -> None:
        where = "unsequenced" if seq is None or seq < 0 else f"seq {seq}"
        super().__init__(f"{kind}.{field} ({where}): {problem}")
        self.kind = kind
        self.seq = seq
        self.field = field
        self.problem = problem


class JsonlError(ValueError):
    """A JSONL line could not be imported; the message starts with `line N:`."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")
        self.line = line
        self.problem = problem


class LogError(Exception):
    """A log file cannot be read or written as asked (missing, locked, misused)."""


class LogCorruptError(LogError):
    """A log's bytes are damaged; `first_seq`/`last_seq` bound the damaged batch when known."""

    def __init__(self, message: str, first_seq: int | None = None, last_seq: int | None = None):
        super().__init__(message)
        self.first_seq = first_seq
        self.last_seq = last_seq


class LogTornTailError(LogCorruptError):
    """Strict reading found an incomplete record batch at the end (the writer died mid-write)."""


class LogSeqError(LogError):
    """Sequence numbers are not gap-free from 0; `seq` is the first one that is wrong."""

    def __init__(self, message: str, seq: int) -> None:
        super().__init__(message)
        self.seq = seq


class LogSchemaError(LogError):
    """Not a log this version reads: no schema version, a newer one, or other columns."""


class TornTailWarning(UserWarning):
    """A log ended in an incomplete record batch; the complete batches before it were kept."""
