"""The shadow account's checks of `stale_tokens = mask` (a mixin of `core.account.Account`;
docs/contract.md property 1, read per token).

Its own books, not the sink's (`core.sink_mask`): for each completed arrival of a masking
run, the segments it trained with, as `(version, completion tokens)`, worked out from the
account's own interruption books (`core.account_partial`). Under `mask` no gradient-bearing
token trains past the bound: each trained episode's last segment (`end`) is within it, and
`batch_shipped.masked_tokens` is exactly the tokens of its trained episodes' segments past
it; a stale drop is of an episode whose `end` is past the bound, and a stale cancellation
before an update of one whose next tokens would come from a version past it (the version it
goes on under). It counts the trained tokens that carry gradient and those masked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from rolloutlog.core.account_group import Group, age, past_bound
from rolloutlog.core.account_partial import Segments
from rolloutlog.core.account_properties import GRADIENT_BOUND
from rolloutlog.core.config import RunConfig
from rolloutlog.core.run_summary import RunSummary

# A trained episode's segments: (the version that generated it, its completion tokens).
Pieces = tuple[tuple[int, int], ...]


class _Books(Protocol):
    """What these checks read and keep of the account."""

    run: RunSummary
    bound: int
    step: int
    version: int
    weight_update: str
    kept: frozenset[str]
    inflight: dict[str, Group]
    segments: dict[str, Segments]
    masks: bool
    pieces: dict[str, Pieces]
    per_episode: bool

    def _fail(self, seq: int, kind: str, problem: str) -> None: ...

    def _goes_on_under(self, episode_id: str, stamp: int) -> int: ...

    def _awaits_ship(self, episode_id: str) -> bool: ...


class MaskChecks:
    """`Account`'s own reckoning of what a masking run masks."""

    masks: bool  # the run's `stale_tokens` is `mask`
    pieces: dict[str, Pieces]  # completed arrivals under `mask`, until shipped or dropped

    def _mask_start(self, config: RunConfig) -> None:
        self.masks = config.stale_tokens == "mask"
        self.pieces = {}

    def _mask_arrived(self: _Books, episode_id: str, completion_tokens: int | None) -> None:
        """An in-flight episode arrives: its segments, from the account's books (a failure
        holds the tokens it had at its last interruption)."""
        if not self.masks:
            return
        stamp = self.inflight[episode_id].inflight[episode_id][0]
        books = self.segments.get(episode_id)
        versions = [stamp, *(books.versions if books else ())]
        marks = list(books.tokens) if books else []
        last = completion_tokens if completion_tokens is not None else (marks or [0])[-1]
        pieces, before = [], 0
        for k, version in enumerate(versions):
            upto = marks[k] if k < len(versions) - 1 else last
            pieces.append((version, upto - before))
            before = upto
        self.pieces[episode_id] = tuple(pieces)

    def _goes_on_under(self: _Books, episode_id: str, stamp: int) -> int:
        """The version an in-flight episode's next tokens come from, as its stale
        cancellation reads it under `mask` (its stamp under `drop`)."""
        if not self.masks:
            return stamp
        books = self.segments.get(episode_id)
        if self.weight_update == "interrupt" or (books is not None and books.interrupted):
            return self.version
        return books.versions[-1] if books is not None and books.versions else stamp

    def _mask_cancelled(
        self: _Books,
        seq: int,
        group: Group,
        cancelled: Sequence[tuple[str, int]],
        unscheduled: int,
    ) -> None:
        """A stale cancellation under `mask` is of work whose next tokens would be stale: each
        member's own (per-episode), or, as per-group cancels a stale group whole, one member's
        or the unscheduled members' (they would go out at the group's stale stamp)."""
        fresh = [
            episode_id
            for episode_id, stamp in cancelled
            if not group.stale(self._goes_on_under(episode_id, stamp), self.step, self.bound)
        ]
        whole_group_stale = not self.per_episode and (unscheduled or len(fresh) < len(cancelled))
        if fresh and not whole_group_stale:
            version = self._goes_on_under(fresh[0], dict(cancelled)[fresh[0]])
            problem = f"{fresh[0]} would go on under v{version}, within the bound"
            self._fail(seq, "episodes_cancelled", f"{problem}: not stale under mask")

    def _mask_dropped(self: _Books, seq: int, episode_id: str, reason: str, ages: bool) -> None:
        """A stale drop under `mask` is of an episode whose `end` is past the bound."""
        pieces = self.pieces.pop(episode_id, None)
        if not (self.masks and reason == "stale" and ages and pieces):
            return
        end = pieces[-1][0]
        if not past_bound(ages, end, self.step, self.bound):
            problem = f"{episode_id} dropped as stale, but its end v{end} is within the bound"
            self._fail(seq, "episode_dropped", problem)

    def _mask_shipped(
        self: _Books,
        seq: int,
        step: int,
        episode_ids: Sequence[str],
        trained_ids: Sequence[str],
        cut: Mapping[str, tuple[int, int, bool]],
        masked_tokens: int,
        tokens: int,
    ) -> None:
        """Under `mask`, each trained episode's end is within the bound (where the run keeps
        it) and `masked_tokens` are exactly its segments' tokens past it; under `drop`, none."""
        kind = "batch_shipped"
        if not self.masks:
            if masked_tokens:
                self._fail(seq, kind, f"masks {masked_tokens} tokens; stale_tokens is drop")
            return
        masked = 0
        for episode_id in trained_ids:
            if episode_id not in cut:
                continue  # reported by `on_shipped`
            stamp, _, ages = cut[episode_id]
            pieces = self.pieces.get(episode_id, ((stamp, 0),))
            masked += sum(n for version, n in pieces if past_bound(ages, version, step, self.bound))
            end = pieces[-1][0]
            if past_bound(ages, end, step, self.bound) and GRADIENT_BOUND in self.kept:
                problem = f"{episode_id} trains gradient-bearing tokens at age {age(end, step)}"
                self._fail(seq, kind, problem)
        if masked_tokens != masked:
            self._fail(
                seq,
                kind,
                f"masks {masked_tokens} tokens; its segments past the bound hold {masked}",
            )
        for episode_id in episode_ids:
            self.pieces.pop(episode_id, None)
        self.run.tokens_trained += tokens
        self.run.tokens_masked += masked_tokens

    def _mask_live(self: _Books) -> None:
        """Arrivals no batch will take (not admitted, or dropped) close their books."""
        if self.pieces:
            for episode_id in [e for e in self.pieces if not self._awaits_ship(e)]:
                del self.pieces[episode_id]
