"""The account's check of `stale_member` other than `cancel`: withhold and run-on.

Under `stale_member = "withhold"` (prime-rl #2960) nothing is cancelled for its age: every
member runs to its end, and at finalize a live-policy train member whose stamp is more than
`max_off_policy_steps` behind the announced version is scored with its group (its reward in
the GRPO baseline) and then dropped with reason `withheld` before any batch takes it. The
check works out on its own which admitted members are owed a withholding when a group is
scored (its own version-age, from the account's books) and checks that exactly those are
withheld, before any other drop or ship; a stale member dropped before its group's scoring,
or a stale cancellation, breaks the rule. It counts `episodes_withheld` and their tokens.
Under `stale_member = "run-on"` (verl's v1 `drop`) a stale cancellation breaks the rule too:
stale work runs to its end and the staleness rule drops it at the sink. A run that cancels
stale work feeds it nothing but the `withheld` drops it refuses.
"""

from __future__ import annotations

from collections.abc import Sequence

from rolloutlog.core.account.books import Books
from rolloutlog.core.account.groups import Group, behind
from rolloutlog.core.config import RunConfig


class Withhold:
    """The account's own reckoning of the members a withholding run must withhold."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        self.member_rule: str = config.stale_member
        self.withholds = config.stale_member == "withhold"  # stale members scored, not shipped
        self.owed: dict[str, int] = {}  # scored, admitted members owed a `withheld` drop -> tokens

    @staticmethod
    def used(config: RunConfig) -> bool:
        return config.stale_member != "cancel"

    def _none_owed(self, seq: int, kind: str) -> None:
        """Nothing may come between a group's scoring and its members' withholding."""
        if self.owed:
            owed = sorted(self.owed)[:5]
            self.books.fail(seq, kind, f"stale members scored but not withheld: {owed}")
            self.owed.clear()

    def scoring(self, seq: int) -> None:
        self._none_owed(seq, "group_scored")

    def shipping(
        self, seq: int, step: int, episode_ids: Sequence[str], trained_ids: Sequence[str]
    ) -> None:
        self._none_owed(seq, "batch_shipped")

    def scored(self, seq: int, group: Group, episode_ids: Sequence[str], admitted: bool) -> None:
        """A group scored: its admitted live-policy members past the bound by version are owed."""
        if not (self.withholds and admitted and group.train and not group.frozen):
            return
        version_now, bound = self.books.version, self.books.bound
        for episode_id in episode_ids:
            _, version, _, tokens = group.arrived[episode_id]
            if behind(version, version_now) > bound:
                self.owed[episode_id] = tokens

    def drop(self, seq: int, episode_id: str, reason: str, group: Group | None) -> None:
        """A drop: a `withheld` one is of a member owed it; any other drop comes after them,
        and under withhold is never of an arrival that had to be scored first."""
        kind, books = "episode_dropped", self.books
        if reason == "withheld":
            tokens = self.owed.pop(episode_id, None)
            if tokens is None:
                books.fail(seq, kind, f"{episode_id} withheld, but not a scored stale member")
                return
            books.run.withheld += 1
            books.run.withheld_tokens += tokens
            return
        self._none_owed(seq, kind)
        if self.withholds and group is not None and reason == "stale":
            _, version, reward, _ = group.arrived[episode_id]
            if reward is not None and behind(version, books.version) > books.bound:
                books.fail(seq, kind, f"{episode_id} dropped before scoring, not withheld")

    def cancelled(
        self, seq: int, group_id: str, group: Group, episode_ids: Sequence[str], reason: str
    ) -> None:
        """Under withhold and run-on (verl-drop) nothing is cancelled for its age."""
        if reason == "stale":
            problem = f"stale cancellation under stale_member={self.member_rule}"
            self.books.fail(seq, "episodes_cancelled", problem)
