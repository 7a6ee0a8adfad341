"""Fold a recorded log: evolve both deciders, extend the digest chain, feed the account.

Folding applies every recorded event (world and decided) without deciding anything; it is
what `replay` and `show` do. An event the deciders cannot apply (a completion for an
episode never dispatched, a batch for the wrong step, a seq gap) stops the fold with an
`InconsistentLogError` naming its seq, and everything before it stays reported. The
properties and the run summary are the shadow account's (`core.account`), fed each event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from rolloutlog.core.account import Account
from rolloutlog.core.config import ConfigError, RunConfig
from rolloutlog.core.decider import PAIR, HoldsPair, Pair
from rolloutlog.core.digest import GENESIS, canonical, chain
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.events.errors import EventError, LogError
from rolloutlog.events.types import (
    WORLD_KINDS,
    EpisodeCompleted,
    EpisodeFailed,
    Event,
    RunStarted,
)
from rolloutlog.replay.chain import DigestChain
from rolloutlog.replay.time_order import TimeOrder

# What stops a fold before the end of a log: the log's content contradicts itself
# (InconsistentLogError), an event breaks its rules (EventError), or the file cannot be
# read past some point (LogError). All name the seq, and all are the input's fault.
BadLog = InconsistentLogError | EventError | LogError
BAD_LOG_ERRORS = (InconsistentLogError, EventError, LogError)


class LogFold(HoldsPair):
    """The state of a log after each event it has applied, with checks and the summary."""

    def __init__(self, config: RunConfig, *, check_invariants: bool = True) -> None:
        self.config = config
        self.state: Pair = PAIR.initial_state(config)
        self.check_invariants = check_invariants
        self.account = Account(config, raise_on_violation=False)
        self.registry = self.account.registry  # tells a late arrival from a bogus one
        self.time_order = TimeOrder()  # `t` never goes back: checked beside the account
        self.digest = GENESIS
        self.digests: DigestChain | None = None
        self.next_seq = 0
        self._last_world: Event | None = None

    @classmethod
    def from_run_started(cls, event: Event, **options: Any) -> LogFold:
        """A fold configured by the log's first event, which must be `run_started`."""
        if not isinstance(event, RunStarted):
            raise InconsistentLogError(event.seq, event.kind, "a log must start with run_started")
        try:
            config = RunConfig.from_mapping(
                event.config, where="run_started.config", startable=False
            )
        except ConfigError as error:
            raise InconsistentLogError(event.seq, event.kind, str(error)) from error
        return cls(config, **options)

    def keep_digests(self) -> LogFold:
        """Remember every digest (for `diff`'s bisection), not only the last."""
        self.digests = DigestChain()
        return self

    def apply(self, event: Event) -> None:
        """Apply one recorded event; raises `InconsistentLogError` naming its seq.

        Everything that can refuse the event runs before anything is written, so a refused
        event leaves the fold exactly as it was: the report of everything before it.
        """
        if event.seq != self.next_seq:
            raise InconsistentLogError(
                event.seq, event.kind, f"seq gap: expected seq {self.next_seq}"
            )
        if isinstance(event, EpisodeCompleted | EpisodeFailed):
            self._require_dispatched(event)
        PAIR.check(self.state, event)
        if event.kind in WORLD_KINDS and self._last_world:
            self.account.settled(self._last_world)
        PAIR.apply(self.state, event)
        self.digest = chain(self.digest, canonical(event), PAIR.fingerprint(self.state))
        if self.digests is not None:
            self.digests.append(self.digest)
        self.account.observe(event, self)
        self.time_order.event(event.seq, event.kind, event.t)
        if event.kind in WORLD_KINDS:
            self._last_world = event
        self.next_seq += 1

    def _require_dispatched(self, event: EpisodeCompleted | EpisodeFailed) -> None:
        """An arrival must name an episode that was dispatched (late ones included)."""
        if not self.registry.knows(event.episode_id):
            raise InconsistentLogError(
                event.seq, event.kind, f"{event.episode_id} was never dispatched"
            )

    def finish(self) -> None:
        """The log ended: settle the last world event's checks."""
        if self._last_world is not None:
            self.account.settled(self._last_world)
            self._last_world = None

    def summary(self) -> dict[str, Any]:
        """The `replay --json` object for what has been applied so far."""
        summary = self.account.summary(checked=self.check_invariants)
        return self.time_order.listed(summary) if self.check_invariants else summary


@attrs.frozen
class FoldResult:
    """What folding a log gave: the fold (state, summary) and the error that stopped it."""

    fold: LogFold | None
    error: BadLog | None


def fold_events(
    events: Iterable[Event],
    *,
    check_invariants: bool = True,
    keep_digests: bool = False,
    stop_before: int | None = None,
    read_errors: bool = False,
) -> FoldResult:
    """Fold events from the start of a log; stops at the first event that cannot apply.

    `stop_before` folds only the events before that seq (the state *at* a point, or the
    report of everything before a bad event); the end-of-log checks then do not run.
    `read_errors=True` also stops, rather than raises, where `events` cannot be read on
    (an `EventError` or `LogError` from the reader).

    A refused event changes nothing (`LogFold.apply` checks before it writes), and a log
    unreadable past a point was read up to it: either way the result reports exactly
    everything before it, and skips the end-of-log checks, which are for a log that
    ended, not one cut short.
    """
    stops_at = BAD_LOG_ERRORS if read_errors else (InconsistentLogError,)
    fold: LogFold | None = None
    try:
        for event in events:
            if stop_before is not None and event.seq >= stop_before:
                return FoldResult(fold, None)
            if fold is None:
                fold = LogFold.from_run_started(event, check_invariants=check_invariants)
                if keep_digests:
                    fold.keep_digests()
            fold.apply(event)
    except stops_at as error:
        return FoldResult(fold, error)
    if fold is not None:
        fold.finish()
    return FoldResult(fold, None)
