"""Replay a whole log: the columnar fold when it vouches for every row, else the plain fold.

This is what `rolloutlog replay` and `diff` run. The columnar fold (`replay.columnar`) is
tried first; at the first row it does not vouch for it hands over, and the log is folded
again from seq 0 by the plain `LogFold`, which words every error and violation. Either
way the answer is the same (the equivalence suite proves it): the summary, the digest
chain, the violations, and for a bad log the error naming its seq with a summary of
everything before it.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs
import pyarrow as pa

from rolloutlog.core.account import Account
from rolloutlog.core.config import RunConfig
from rolloutlog.core.digest import GENESIS
from rolloutlog.events.errors import EventError, LogError
from rolloutlog.replay.chain import DigestChain
from rolloutlog.replay.columnar import ColumnarFold, NeedsPlainFold
from rolloutlog.replay.fold import BadLog, LogFold, fold_events
from rolloutlog.replay.source import LogSource


@attrs.frozen
class Replay:
    """What replaying a log gave; `error` is set when the log stopped the fold early."""

    summary: dict[str, Any]
    digest: bytes
    digests: DigestChain | None
    events: int  # events applied (all of them, unless `error`)
    error: BadLog | None
    path: Literal["columnar", "plain"]
    handover: str | None  # why the columnar fold handed over to the plain one
    # The run's age split (`StepMetrics.run_values`), read from the columnar fold's columns
    # when `replay_log(age_split=True)` took that path; None otherwise.
    age_split: dict[str, Any] | None = None

    @property
    def violations(self) -> list[str]:
        """The broken properties, each as "seq N (kind): what broke"; empty when all hold."""
        return list(self.summary["invariant_violations"])


def replay_log(
    source: LogSource,
    *,
    keep_digests: bool = False,
    columnar: bool = True,
    check_invariants: bool = True,
    age_split: bool = False,
) -> Replay:
    """Fold `source` from seq 0, checking the properties on every event.

    `columnar=False` forces the plain fold. `check_invariants=False` lets the plain fold
    skip the checks when only digests are wanted (`diff`); the summary then lists none.
    `age_split=True` has the columnar fold read the age split from the columns it decodes
    (`Replay.age_split`), so that a report needs no second pass over a clean log.
    """
    handover = None
    if columnar:
        try:
            return _columnar(source, keep_digests, age_split)
        except NeedsPlainFold as signal:
            handover = str(signal)
    return _plain(source, keep_digests, check_invariants, handover)


def _columnar(source: LogSource, keep_digests: bool, age_split: bool) -> Replay:
    fold: ColumnarFold | None = None
    try:
        for batch in source.batches():
            if fold is None:
                fold = ColumnarFold.from_first_batch(
                    batch, keep_digests=keep_digests, age_split=age_split
                )
            fold.apply_batch(batch)
    except (EventError, LogError) as error:
        # The file stops being readable at a batch boundary; everything before it is exact.
        return _result(fold, error, "columnar", None, keep_digests)
    except pa.ArrowException as error:  # events in memory that make no record batch
        raise NeedsPlainFold(fold.next_seq if fold else 0, f"no record batch ({error})") from error
    if fold is None:
        return _result(fold, None, "columnar", None, keep_digests)
    fold.finish()
    split = None if fold.age_split is None else fold.age_split.run_values()
    return attrs.evolve(_result(fold, None, "columnar", None, keep_digests), age_split=split)


def _plain(
    source: LogSource, keep_digests: bool, check_invariants: bool, handover: str | None
) -> Replay:
    folded = fold_events(
        source.events(),
        check_invariants=check_invariants,
        keep_digests=keep_digests,
        read_errors=True,
    )
    return _result(folded.fold, folded.error, "plain", handover, keep_digests)


def _result(
    fold: LogFold | ColumnarFold | None,
    error: BadLog | None,
    path: Literal["columnar", "plain"],
    handover: str | None,
    keep_digests: bool,
) -> Replay:
    if fold is None:  # nothing was applied: not even a run_started
        summary = Account(RunConfig()).summary()
        digests = DigestChain() if keep_digests else None
        return Replay(summary, GENESIS, digests, 0, error, path, handover)
    return Replay(fold.summary(), fold.digest, fold.digests, fold.next_seq, error, path, handover)
