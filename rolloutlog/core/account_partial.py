"""The shadow account's checks of interrupted and resumed episodes (a mixin of
`core.account.Account`; docs/contract.md property 13).

Its own books, not the dispatcher's (`core.dispatcher_partial`): which episodes are
interrupted, the tokens each had at its interruptions, the versions of its segments, the
version inference serves, and what was in flight when an update was announced (less what
its cancellations take): under `weight_update = interrupt` all of it must be interrupted by
the time the update goes live; under `drain` its train work must have arrived, and no
train episode goes out while the update waits. Under `recycle`, the train work in flight
when a batch ships must be interrupted (reason `recycle`) by the time the next version goes
live, each resumes under a later version than it stopped at, and no train episode goes out
while one waits for its resumption. Under `update_pause = "until-live"` no batch ships while
an update is announced and not live, and no train episode goes out then, nor while work it
interrupted waits for its resumption. A resumed episode's tokens are counted once: its
completion carries them all, and its interruptions' counts never fall and never exceed it.
Its rollout age stays that of its dispatch stamp (`start`), which the rest of the account
reads as before.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from rolloutlog.core.account_group import Group
from rolloutlog.core.config import RunConfig
from rolloutlog.core.run_summary import RunSummary


@attrs.define(slots=True)
class Segments:
    """One episode's interruptions: its tokens at each, the versions it went on under."""

    start: int
    tokens: list[int] = attrs.Factory(list)
    versions: list[int] = attrs.Factory(list)
    interrupted: bool = True
    recycled_under: int | None = None  # recycled, not yet resumed: the version live then


class _Books(Protocol):
    """What these checks read and keep of the account."""

    run: RunSummary
    version: int
    inflight: dict[str, Group]
    groups: dict[str, Group]
    weight_update: str
    recycle: bool
    recycling: bool
    live_version: int
    segments: dict[str, Segments]
    at_update: set[str]
    at_ship: set[str]
    spans: dict[str, int]
    queue: dict[str, tuple[int, bool, int]]

    def _fail(self, seq: int, kind: str, problem: str) -> None: ...

    def _generating(self, seq: int, episode_id: str) -> Segments | None: ...

    def _running(self, episode_id: str) -> bool: ...

    def _awaits_ship(self, episode_id: str) -> bool: ...

    def _mask_arrived(self, episode_id: str, completion_tokens: int | None) -> None: ...

    def _mask_live(self) -> None: ...


class PartialChecks:
    """`Account`'s mirror of interruptions and resumptions."""

    weight_update: str
    recycle: bool
    recycling: bool  # a batch shipped under `recycle`, the next version not yet live
    live_version: int
    segments: dict[str, Segments]  # episodes interrupted at least once, until they leave
    at_update: set[str]  # in flight, not frozen, when the update under way was announced
    at_ship: set[str]  # train work generating when the last batch shipped, under `recycle`
    spans: dict[str, int]  # arrived resumed episodes -> end − start, until cut or dropped
    update_pause: bool  # `update_pause = "until-live"`

    def _partial_start(self, config: RunConfig) -> None:
        self.update_pause = config.update_pause == "until-live"
        self.weight_update = config.weight_update
        self.recycle = config.recycle
        self.recycling = False
        self.live_version = 0
        self.segments = {}
        self.at_update = set()
        self.at_ship = set()
        self.spans = {}

    def on_interrupted(self: _Books, seq: int, episode_id: str, tokens: int, reason: str) -> None:
        kind, rule = "episode_interrupted", self.weight_update
        recycled = reason == "recycle" and self.recycle
        if not recycled and (rule != "interrupt" or reason != "update"):
            return self._fail(seq, kind, f"reason {reason!r} under weight_update {rule!r}")
        group = self.inflight.get(episode_id)
        if group is None:
            return self._fail(seq, kind, f"{episode_id} is not in flight")
        if recycled and not self.recycling:
            return self._fail(seq, kind, "recycled, but no batch shipped since the last update")
        if recycled and not group.train:
            return self._fail(seq, kind, f"{episode_id} is eval work, never recycled")
        if not recycled and group.frozen:
            return self._fail(seq, kind, f"{episode_id} is from a frozen source")
        if not recycled and self.live_version >= self.version:
            return self._fail(seq, kind, f"no weight update under way (v{self.version} is live)")
        books = self._generating(seq, episode_id)
        if books is None:
            return None
        if books.tokens and tokens < books.tokens[-1]:
            problem = f"{episode_id} has {tokens} tokens, fewer than {books.tokens[-1]} before"
            return self._fail(seq, kind, problem)
        books.tokens.append(tokens)
        books.interrupted = True
        books.recycled_under = self.live_version if recycled else None
        self.at_update.discard(episode_id)
        self.at_ship.discard(episode_id)
        return None

    def _generating(self: _Books, seq: int, episode_id: str) -> Segments | None:
        """The books of an in-flight episode, None (reported) if it is interrupted."""
        books = self.segments.setdefault(
            episode_id,
            Segments(start=self.inflight[episode_id].inflight[episode_id][0], interrupted=False),
        )
        if books.interrupted:
            self._fail(seq, "episode_interrupted", f"{episode_id} is interrupted")
            return None
        return books

    def on_continued(self: _Books, seq: int, episode_id: str, version: int) -> None:
        """`episode_resumed`: an interrupted episode goes on under the version live."""
        kind = "episode_resumed"
        books = self.segments.get(episode_id)
        if books is None or not books.interrupted or episode_id not in self.inflight:
            return self._fail(seq, kind, f"{episode_id} was not interrupted")
        live = self.live_version
        if version != live:
            return self._fail(seq, kind, f"resumed under v{version}, but inference serves v{live}")
        if books.recycled_under is not None and version <= books.recycled_under:
            return self._fail(seq, kind, f"{episode_id} recycled and resumed under v{version}")
        books.versions.append(version)
        books.interrupted = False
        books.recycled_under = None
        return None

    def _partial_arrival(
        self: _Books, seq: int, kind: str, episode_id: str, tokens: int | None
    ) -> None:
        """An arrival (`tokens`: its completion tokens; None for a failure) of an episode in
        flight: resumed if it was interrupted, and holding every token it had."""
        if episode_id in self.inflight:
            self._mask_arrived(episode_id, tokens)
        books = self.segments.pop(episode_id, None)
        if books is None or episode_id not in self.inflight:
            return
        if books.interrupted:
            self._fail(seq, kind, f"{episode_id} is interrupted and was not resumed")
        elif tokens is not None and tokens < books.tokens[-1]:
            problem = f"{episode_id} completes with {tokens} tokens, had {books.tokens[-1]}"
            self._fail(seq, kind, problem)
        elif books.versions:
            self.spans[episode_id] = books.versions[-1] - books.start

    def _partial_announced(self: _Books) -> None:
        """`version_pending`: what is in flight now (not what its reaction dispatches) and
        not cancelled must be interrupted (`interrupt`: all not from a frozen source) or
        have arrived (`drain`: the train work) before the update goes live."""
        if self.weight_update == "interrupt":
            self.at_update = {
                e for e, group in self.inflight.items() if not group.frozen and self._running(e)
            }
        elif self.weight_update == "drain":
            self.at_update = {e for e, group in self.inflight.items() if group.train}

    def _running(self: _Books, episode_id: str) -> bool:
        """Whether an in-flight episode is generating (not interrupted)."""
        books = self.segments.get(episode_id)
        return books is None or not books.interrupted

    def _partial_dispatched(self: _Books, seq: int, group_id: str) -> None:
        """Under `drain`, no train episode goes out while an update waits; under `recycle`,
        while a recycled episode waits for its resumption."""
        group = self.groups.get(group_id)
        if group is None or not group.train:
            return
        if self.weight_update == "drain" and self.live_version < self.version:
            problem = f"train dispatch while v{self.version} waits for the work in flight"
            self._fail(seq, "episode_dispatched", problem)
        waiting = [
            e
            for e, b in self.segments.items()
            if b.recycled_under is not None and e in self.inflight
        ]
        if waiting:
            problem = f"train dispatch before the recycled {sorted(waiting)[:3]} resumed"
            self._fail(seq, "episode_dispatched", problem)

    def _paused_by_update(self: _Books, seq: int, kind: str, dispatch: bool) -> None:
        """Under `update_pause`, nothing goes out while an update is announced and not live,
        and no train `dispatch` while work it interrupted waits for its resumption."""
        if self.live_version < self.version:
            self._fail(seq, kind, f"{kind} while v{self.version} is not live (update_pause)")
        elif dispatch and any(
            b.interrupted and e in self.inflight for e, b in self.segments.items()
        ):
            self._fail(seq, kind, f"{kind} before the work the update interrupted resumed")

    def on_live(self: _Books, seq: int, version: int) -> None:
        """`version_live`: nothing announced in flight is left uninterrupted; the books of
        episodes no longer in flight (cancelled) are closed."""
        left = sorted(e for e in self.at_update if e in self.inflight)
        if left:
            how = "uninterrupted" if self.weight_update == "interrupt" else "undrained"
            self._fail(seq, "version_live", f"in flight {how} at the update: {left[:3]}")
        unrecycled = sorted(e for e in self.at_ship if e in self.inflight)
        if unrecycled:
            self._fail(
                seq, "version_live", f"in flight unrecycled since the ship: {unrecycled[:3]}"
            )
        self.at_update, self.at_ship, self.recycling = set(), set(), False
        self.live_version = version
        segments = self.segments
        for episode_id in [e for e in segments if e not in self.inflight]:
            del segments[episode_id]
        for episode_id in [e for e in self.spans if not self._awaits_ship(e)]:  # dropped
            del self.spans[episode_id]
        self._mask_live()

    def _awaits_ship(self: _Books, episode_id: str) -> bool:
        return episode_id in self.queue or episode_id.rpartition("/")[0] in self.groups

    def _partial_shipped(
        self: _Books, episode_ids: tuple[str, ...], trained_ids: tuple[str, ...]
    ) -> None:
        """The partial ratio and the largest span count what trains (what a batch masks is
        `core.account_mask`'s). Under `recycle` the train work generating now must be
        aborted before the next version goes live."""
        if self.recycle:
            self.recycling = True
            self.at_ship = {
                e for e, group in self.inflight.items() if group.train and self._running(e)
            }
        spans, run = self.spans, self.run
        if spans:
            for episode_id in trained_ids:
                span = spans.get(episode_id)
                if span is not None:
                    run.trained_partial += 1
                    run.largest_span = max(run.largest_span, span)
            for episode_id in episode_ids:
                spans.pop(episode_id, None)
