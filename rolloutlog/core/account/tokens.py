"""The per-token age split: trained completion tokens by the age of the version that
generated them (`core.run_summary` reports it).

An episode interrupted and resumed (`weight_update = interrupt`, `recycle`) is generated in
segments, one per version: its first under its dispatch stamp, each next under the version
it resumed under (`core.account.partial` works them out at its arrival). A trained token's
age is the rollout age of its segment's version at the step that trains it (at least 0, as
an episode's is), so an episode's tokens can be younger than the episode. Kept only by a run
whose rule segments episodes; every other run trains each episode's tokens at its own age.
"""

from __future__ import annotations

from collections.abc import Sequence

from rolloutlog.core.account.books import Books
from rolloutlog.core.account.groups import Generated, token_age
from rolloutlog.core.config import RunConfig


class TokenAges:
    """The account's count of trained tokens by age, fed each completion and each batch."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        books.run.segments = self.used(config)
        self.generated: dict[str, Generated] = {}  # arrived, awaiting their batch -> segments

    @staticmethod
    def used(config: RunConfig) -> bool:
        return config.weight_update == "interrupt" or config.recycle

    def take(self, episode_id: str, generated: Generated) -> None:
        """A completion in flight, with its segments."""
        self.generated[episode_id] = generated

    def shipping(
        self, seq: int, step: int, episode_ids: Sequence[str], trained_ids: Sequence[str]
    ) -> None:
        """Count the trained episodes' tokens; forget what this batch cut and what was
        dropped since (no longer queued or in an open group)."""
        generated = self.generated
        if not generated:
            return
        ages = self.books.run.token_ages
        for episode_id in trained_ids:
            for version, tokens in generated.get(episode_id, ()):
                ages[token_age(version, step)] += tokens
        for episode_id in episode_ids:
            generated.pop(episode_id, None)
        for episode_id in [e for e in generated if not self.books.awaits_ship(e)]:
            del generated[episode_id]
