"""The account's check of interrupted and resumed episodes (docs/contract.md property 13).

Its own books, not the dispatcher's (`core.dispatcher_partial`): which episodes are
interrupted, the tokens each had at its interruptions, the versions of its segments, and
what was in flight when an update was announced (less what its cancellations take); the
version inference serves is the shared books' (`Books.live_version`). Under `weight_update
= interrupt` all of what was in flight must be interrupted by the time the update goes
live; under `drain` its train work must have arrived, and no train episode goes out while
the update waits. Under `recycle`, the train work in flight when a batch ships must be
interrupted (reason `recycle`) by the time the next version goes live, each resumes under a
later version than it stopped at, and no train episode goes out while one waits for its
resumption. Under `update_pause = "until-live"` (`UpdatePause`) no batch ships while an
update is announced and not live, and no train episode goes out then, nor while work it
interrupted waits for its resumption. A resumed episode's tokens are counted once: its
completion carries them all, and its interruptions' counts never fall and never exceed it.
Its rollout age stays that of its dispatch stamp (`start`), which the rest of the account
reads.

At each completion it works out the episode's segments once (`segment_tokens`) and hands
them to the checks that read them (`takers`: the token ages, the mask). A run that neither
interrupts, drains, recycles nor masks feeds it nothing but the interruptions it refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from rolloutlog.core.account.books import Books
from rolloutlog.core.account.groups import Generated, Group, segment_tokens
from rolloutlog.core.config import RunConfig


@attrs.define(slots=True)
class Segments:
    """One episode's interruptions: its tokens at each, the versions it went on under."""

    start: int
    tokens: list[int] = attrs.Factory(list)
    versions: list[int] = attrs.Factory(list)
    interrupted: bool = True
    recycled_under: int | None = None  # recycled, not yet resumed: the version live then


class Partial:
    """The account's mirror of interruptions and resumptions."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        self.weight_update: str = config.weight_update
        self.recycle: bool = config.recycle
        self.recycling = False  # a batch shipped under `recycle`, the next version not yet live
        self.segments: dict[str, Segments] = {}  # interrupted at least once, until they leave
        self.at_update: set[str] = set()  # in flight, not frozen, when the update was announced
        self.at_ship: set[str] = set()  # train work generating at the last ship (`recycle`)
        self.spans: dict[str, int] = {}  # arrived resumed episodes -> end − start, until cut
        self.takers: tuple[Callable[[str, Generated], None], ...] = ()  # read the segments

    @staticmethod
    def used(config: RunConfig) -> bool:
        freezes = config.weight_update == "freeze"
        return not freezes or config.recycle or config.stale_tokens == "mask"

    def interrupted(self, seq: int, episode_id: str, tokens: int, reason: str) -> None:
        kind, rule, books = "episode_interrupted", self.weight_update, self.books
        recycled = reason == "recycle" and self.recycle
        if not recycled and (rule != "interrupt" or reason != "update"):
            return books.fail(seq, kind, f"reason {reason!r} under weight_update {rule!r}")
        group = books.inflight.get(episode_id)
        if group is None:
            return books.fail(seq, kind, f"{episode_id} is not in flight")
        if recycled and not self.recycling:
            return books.fail(seq, kind, "recycled, but no batch shipped since the last update")
        if recycled and not group.train:
            return books.fail(seq, kind, f"{episode_id} is eval work, never recycled")
        if not recycled and group.frozen:
            return books.fail(seq, kind, f"{episode_id} is from a frozen source")
        if not recycled and books.live_version >= books.version:
            problem = f"no weight update under way (v{books.version} is live)"
            return books.fail(seq, kind, problem)
        episode = self._generating(seq, episode_id)
        if episode is None:
            return None
        if episode.tokens and tokens < episode.tokens[-1]:
            problem = f"{episode_id} has {tokens} tokens, fewer than {episode.tokens[-1]} before"
            return books.fail(seq, kind, problem)
        episode.tokens.append(tokens)
        episode.interrupted = True
        episode.recycled_under = books.live_version if recycled else None
        self.at_update.discard(episode_id)
        self.at_ship.discard(episode_id)
        return None

    def _generating(self, seq: int, episode_id: str) -> Segments | None:
        """The books of an in-flight episode, None (reported) if it is interrupted."""
        stamp = self.books.inflight[episode_id].inflight[episode_id][0]
        episode = self.segments.setdefault(episode_id, Segments(start=stamp, interrupted=False))
        if episode.interrupted:
            self.books.fail(seq, "episode_interrupted", f"{episode_id} is interrupted")
            return None
        return episode

    def continued(self, seq: int, episode_id: str, version: int) -> None:
        """`episode_resumed`: an interrupted episode goes on under the version live."""
        kind, books = "episode_resumed", self.books
        episode = self.segments.get(episode_id)
        if episode is None or not episode.interrupted or episode_id not in books.inflight:
            return books.fail(seq, kind, f"{episode_id} was not interrupted")
        live = books.live_version
        if version != live:
            problem = f"resumed under v{version}, but inference serves v{live}"
            return books.fail(seq, kind, problem)
        if episode.recycled_under is not None and version <= episode.recycled_under:
            return books.fail(seq, kind, f"{episode_id} recycled and resumed under v{version}")
        episode.versions.append(version)
        episode.interrupted = False
        episode.recycled_under = None
        return None

    def arriving(self, seq: int, kind: str, episode_id: str, tokens: int | None) -> None:
        """An arrival (`tokens`: its completion tokens; None for a failure): of an episode in
        flight, resumed if it was interrupted, and holding every token it had. A completion's
        segments go to the checks that read them."""
        episode = self.segments.pop(episode_id, None)
        group = self.books.inflight.get(episode_id)
        if group is None:
            return
        if tokens is not None and self.takers:
            stamp = group.inflight[episode_id][0]
            versions = episode.versions if episode is not None else ()
            cuts = episode.tokens[: len(versions)] if episode is not None else ()
            generated = segment_tokens(stamp, versions, cuts, tokens)
            for take in self.takers:
                take(episode_id, generated)
        if episode is None:
            return
        if episode.interrupted:
            self.books.fail(seq, kind, f"{episode_id} is interrupted and was not resumed")
        elif tokens is not None and tokens < episode.tokens[-1]:
            problem = f"{episode_id} completes with {tokens} tokens, had {episode.tokens[-1]}"
            self.books.fail(seq, kind, problem)
        elif episode.versions:
            self.spans[episode_id] = episode.versions[-1] - episode.start

    def _running(self, episode_id: str) -> bool:
        """Whether an in-flight episode is generating (not interrupted)."""
        episode = self.segments.get(episode_id)
        return episode is None or not episode.interrupted

    def announcing(self) -> None:
        """`version_pending`: what is in flight now (not what its reaction dispatches) and
        not cancelled must be interrupted (`interrupt`: all not from a frozen source) or
        have arrived (`drain`: the train work) before the update goes live."""
        inflight = self.books.inflight
        if self.weight_update == "interrupt":
            self.at_update = {
                e for e, group in inflight.items() if not group.frozen and self._running(e)
            }
        elif self.weight_update == "drain":
            self.at_update = {e for e, group in inflight.items() if group.train}

    def dispatching(self, seq: int, group: Group) -> None:
        """Under `drain`, no train episode goes out while an update waits; under `recycle`,
        while a recycled episode waits for its resumption."""
        books = self.books
        if self.weight_update == "drain" and books.live_version < books.version:
            problem = f"train dispatch while v{books.version} waits for the work in flight"
            books.fail(seq, "episode_dispatched", problem)
        waiting = [
            e
            for e, b in self.segments.items()
            if b.recycled_under is not None and e in books.inflight
        ]
        if waiting:
            problem = f"train dispatch before the recycled {sorted(waiting)[:3]} resumed"
            books.fail(seq, "episode_dispatched", problem)

    def live(self, seq: int) -> None:
        """`version_live`: nothing announced in flight is left uninterrupted; the books of
        episodes no longer in flight (cancelled) are closed."""
        books = self.books
        left = sorted(e for e in self.at_update if e in books.inflight)
        if left:
            how = "uninterrupted" if self.weight_update == "interrupt" else "undrained"
            books.fail(seq, "version_live", f"in flight {how} at the update: {left[:3]}")
        unrecycled = sorted(e for e in self.at_ship if e in books.inflight)
        if unrecycled:
            problem = f"in flight unrecycled since the ship: {unrecycled[:3]}"
            books.fail(seq, "version_live", problem)
        self.at_update, self.at_ship, self.recycling = set(), set(), False
        segments = self.segments
        for episode_id in [e for e in segments if e not in books.inflight]:
            del segments[episode_id]
        for episode_id in [e for e in self.spans if not books.awaits_ship(e)]:  # dropped
            del self.spans[episode_id]

    def shipping(
        self, seq: int, step: int, episode_ids: Sequence[str], trained_ids: Sequence[str]
    ) -> None:
        """The partial ratio and the largest span count what trains. Under `recycle` the
        train work generating now must be aborted before the next version goes live."""
        if self.recycle:
            self.recycling = True
            self.at_ship = {
                e for e, group in self.books.inflight.items() if group.train and self._running(e)
            }
        spans, run = self.spans, self.books.run
        if spans:
            for episode_id in trained_ids:
                span = spans.get(episode_id)
                if span is not None:
                    run.trained_partial += 1
                    run.largest_span = max(run.largest_span, span)
            for episode_id in episode_ids:
                spans.pop(episode_id, None)


class UpdatePause:
    """`update_pause = "until-live"`: nothing goes out while an update is announced and not
    live, and no train episode while work the update interrupted waits for its resumption
    (read from the interruptions' books, `Partial`)."""

    def __init__(self, books: Books, partial: Partial) -> None:
        self.books = books
        self.partial = partial

    @staticmethod
    def used(config: RunConfig) -> bool:
        return config.update_pause == "until-live"

    def _paused(self, seq: int, kind: str) -> bool:
        """Reported if an update is under way (announced, not live)."""
        books = self.books
        if books.live_version < books.version:
            books.fail(seq, kind, f"{kind} while v{books.version} is not live (update_pause)")
            return True
        return False

    def admitted(self, seq: int, kind: str) -> None:
        """A train dispatch."""
        if self._paused(seq, kind):
            return
        inflight = self.books.inflight
        if any(b.interrupted and e in inflight for e, b in self.partial.segments.items()):
            self.books.fail(seq, kind, f"{kind} before the work the update interrupted resumed")

    def ships(self, seq: int, step: int, episode_ids: Sequence[str]) -> None:
        self._paused(seq, "batch_shipped")
