"""The account's check of `stale_tokens = mask` (docs/contract.md property 1, read per token).

Its own books, not the sink's (`core.sink_mask`): for each completed arrival of a masking
run, the segments it trained with, as `(version, completion tokens)` (handed over by
`core.account.partial`, from the account's own interruption books). Under `mask` no
gradient-bearing token trains past the bound: each trained episode's last segment (`end`)
is within it, and `batch_shipped.masked_tokens` is exactly the tokens of its trained
episodes' segments past it; a stale drop is of an episode whose `end` is past the bound, and
a stale cancellation before an update of one whose next tokens would come from a version
past it (the version it goes on under). It counts the trained tokens that carry gradient and
those masked. A run that drops stale tokens feeds it nothing; a batch that masks tokens
there is refused by the sink's flow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rolloutlog.core.account.books import Books
from rolloutlog.core.account.groups import Generated, Group, age, past_bound
from rolloutlog.core.account.partial import Partial
from rolloutlog.core.account.properties import GRADIENT_BOUND
from rolloutlog.core.config import RunConfig


class Mask:
    """The account's own reckoning of what a masking run masks."""

    def __init__(self, books: Books, config: RunConfig, partial: Partial) -> None:
        self.books = books
        self.partial = partial  # the interruption books: where an episode goes on
        self.pieces: dict[str, Generated] = {}  # completions, until shipped or dropped

    @staticmethod
    def used(config: RunConfig) -> bool:
        return config.stale_tokens == "mask"

    def take(self, episode_id: str, generated: Generated) -> None:
        """A completion in flight, with its segments."""
        self.pieces[episode_id] = generated

    def goes_on_under(self, episode_id: str, stamp: int) -> int:
        """The version an in-flight episode's next tokens come from, as its stale
        cancellation reads it under `mask`."""
        episode = self.partial.segments.get(episode_id)
        if self.partial.weight_update == "interrupt" or (
            episode is not None and episode.interrupted
        ):
            return self.books.version
        return episode.versions[-1] if episode is not None and episode.versions else stamp

    def stale_cancelled(
        self, seq: int, group: Group, cancelled: Sequence[tuple[str, int]], unscheduled: int
    ) -> None:
        """A stale cancellation under `mask` is of work whose next tokens would be stale: each
        member's own (per-episode), or, as per-group cancels a stale group whole, one member's
        or the unscheduled members' (they would go out at the group's stale stamp)."""
        books = self.books
        fresh = [
            episode_id
            for episode_id, stamp in cancelled
            if not group.stale(self.goes_on_under(episode_id, stamp), books.step, books.bound)
        ]
        whole_group_stale = not books.per_episode and (unscheduled or len(fresh) < len(cancelled))
        if fresh and not whole_group_stale:
            version = self.goes_on_under(fresh[0], dict(cancelled)[fresh[0]])
            problem = f"{fresh[0]} would go on under v{version}, within the bound"
            books.fail(seq, "episodes_cancelled", f"{problem}: not stale under mask")

    def dropped(self, seq: int, episode_id: str, reason: str, ages: bool) -> None:
        """A stale drop under `mask` is of an episode whose `end` is past the bound."""
        pieces = self.pieces.pop(episode_id, None)
        if not (reason == "stale" and ages and pieces):
            return
        end = pieces[-1][0]
        if not past_bound(ages, end, self.books.step, self.books.bound):
            problem = f"{episode_id} dropped as stale, but its end v{end} is within the bound"
            self.books.fail(seq, "episode_dropped", problem)

    def shipped(
        self,
        seq: int,
        step: int,
        episode_ids: Sequence[str],
        trained_ids: Sequence[str],
        cut: Mapping[str, tuple[int, int, bool]],
        masked_tokens: int,
        tokens: int,
    ) -> None:
        """Each trained episode's end is within the bound (where the run keeps it) and
        `masked_tokens` are exactly its segments' tokens past it."""
        kind, books, masked = "batch_shipped", self.books, 0
        for episode_id in trained_ids:
            if episode_id not in cut:
                continue  # reported by the sink's flow
            stamp, _, ages = cut[episode_id]
            pieces = self.pieces.get(episode_id, ((stamp, 0),))
            masked += sum(n for v, n in pieces if past_bound(ages, v, step, books.bound))
            end = pieces[-1][0]
            if past_bound(ages, end, step, books.bound) and GRADIENT_BOUND in books.kept:
                problem = f"{episode_id} trains gradient-bearing tokens at age {age(end, step)}"
                books.fail(seq, kind, problem)
        if masked_tokens != masked:
            problem = f"masks {masked_tokens} tokens; its segments past the bound hold {masked}"
            books.fail(seq, kind, problem)
        for episode_id in episode_ids:
            self.pieces.pop(episode_id, None)
        books.run.tokens_trained += tokens
        books.run.tokens_masked += masked_tokens

    def live(self, seq: int) -> None:
        """Arrivals no batch will take (not admitted, or dropped) close their books."""
        if self.pieces:
            for episode_id in [e for e in self.pieces if not self.books.awaits_ship(e)]:
                del self.pieces[episode_id]
