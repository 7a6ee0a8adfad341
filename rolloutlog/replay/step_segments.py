"""The per-step split of trained tokens by version age, for `replay.step_metrics`.

An interrupted and resumed train episode (`weight_update = interrupt`, `recycle`) was
generated in segments, one per version (`core.account.tokens`): its tokens at each
`episode_interrupted` close a segment, its completion the last. Per step it keeps
`off_policy/partial_ratio` (the trained episodes of more than one segment, over those
trained) and `off_policy/token_age/mean|max` (the trained completion tokens' ages, each
token at the age of the version that generated it). Only a log that interrupted an episode
reports them (in every row, those before its first interruption too), so every other log
reads as before.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from rolloutlog.core.account.groups import Generated, segment_tokens, token_age
from rolloutlog.core.account.partial import Segments

PARTIAL_RATIO: Final = "off_policy/partial_ratio"
TOKEN_AGE: Final = "off_policy/token_age"
SEGMENT_COLUMNS: Final = (PARTIAL_RATIO, f"{TOKEN_AGE}/mean", f"{TOKEN_AGE}/max")


@attrs.define(slots=True)
class _Tokens:
    """One step's (or the run's) trained episodes, partial ones and tokens by age."""

    trained: int = 0
    partial: int = 0
    tokens: int = 0
    weighted: int = 0  # the sum of every trained token's age
    oldest: int | None = None

    def add(self, generated: Generated, step: int) -> None:
        """An episode generated in `generated`'s segments, trained at `step`."""
        self.trained += 1
        self.partial += len(generated) > 1
        for version, tokens in generated:
            if tokens:
                self._count(token_age(version, step), tokens)

    def add_whole(self, version: int, tokens: int, step: int) -> None:
        """An episode generated whole by `version` (one segment), trained at `step`: `add`
        without the segments' tuples, for nearly every episode of nearly every run."""
        self.trained += 1
        if tokens:
            self._count(token_age(version, step), tokens)

    def _count(self, age: int, tokens: int) -> None:
        self.tokens += tokens
        self.weighted += age * tokens
        self.oldest = age if self.oldest is None else max(self.oldest, age)

    def absorb(self, other: _Tokens) -> None:
        """Count `other`'s episodes too (the run takes a step's whole, once it ships)."""
        self.trained += other.trained
        self.partial += other.partial
        self.tokens += other.tokens
        self.weighted += other.weighted
        if other.oldest is not None:
            self.oldest = other.oldest if self.oldest is None else max(self.oldest, other.oldest)

    def values(self) -> dict[str, Any]:
        return {
            PARTIAL_RATIO: self.partial / self.trained if self.trained else None,
            f"{TOKEN_AGE}/mean": self.weighted / self.tokens if self.tokens else None,
            f"{TOKEN_AGE}/max": self.oldest,
        }


class SegmentSplit:
    """The segments of the train episodes in flight, and the split of what trained."""

    def __init__(self) -> None:
        self.seen = False  # an episode was interrupted: rows and run values carry the split
        self.books: dict[str, Segments] = {}  # interrupted train episodes, until they land
        self.window = _Tokens()
        self.run = _Tokens()

    def interrupted(self, episode_id: str, version: int, tokens: int) -> None:
        books = self.books.setdefault(episode_id, Segments(start=version))
        books.tokens.append(tokens)
        books.interrupted = self.seen = True

    def resumed(self, episode_id: str, version: int) -> None:
        books = self.books.get(episode_id)
        if books is not None:
            books.versions.append(version)
            books.interrupted = False

    def landed(self, episode_id: str, tokens: int | None) -> Generated | None:
        """An arrival (`tokens`: its completion tokens; None for a failure, or where the
        reader has none) or a cancellation (`tokens` None): the segments of an episode that
        was interrupted, else None (whole, or no tokens: `trained` tells them apart)."""
        books = self.books.pop(episode_id, None)
        if tokens is None or books is None:
            return None
        return segment_tokens(books.start, books.versions, books.tokens, tokens)

    def trained(
        self, version: int, tokens: int | None, generated: Generated | None, step: int
    ) -> None:
        """A trained episode dispatched at `version`, with its completion `tokens` (None:
        not known, not counted) and its segments where it was interrupted (`landed`)."""
        if tokens is None:
            return
        if generated is None:
            self.window.add_whole(version, tokens, step)
        else:
            self.window.add(generated, step)

    def shipped(self) -> dict[str, Any]:
        """The step's values (its row's, once the log shows segments); the run counts them,
        and a new step begins."""
        values = self.window.values()
        self.run.absorb(self.window)
        self.window = _Tokens()
        return values

    def run_values(self) -> dict[str, Any]:
        return self.run.values() if self.seen else {}
