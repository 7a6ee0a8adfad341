"""The shadow account's withhold checks (a mixin of `core.account.Account`).

Under `stale_member = "withhold"` (prime-rl #2960) nothing is cancelled for its age: every
member runs to its end, and at finalize a live-policy train member whose stamp is more than
`max_off_policy_steps` behind the announced version is scored with its group (its reward in
the GRPO baseline) and then dropped with reason `withheld` before any batch takes it. The
account works out on its own which admitted members are owed a withholding when a group is
scored (its own version-age, from its own books) and checks that exactly those are
withheld, before any other drop or ship; a stale member dropped before its group's scoring,
or a stale cancellation, breaks the rule. It counts `episodes_withheld` and their tokens.
Under `stale_member = "run-on"` (verl's v1 `drop`) a stale cancellation breaks the rule too:
stale work runs to its end and the staleness rule drops it at the sink.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rolloutlog.core.account_group import Group, behind
from rolloutlog.core.config import RunConfig
from rolloutlog.core.run_summary import RunSummary


class _Books(Protocol):
    """What these checks read and keep of the account."""

    run: RunSummary
    config: RunConfig
    bound: int
    version: int
    withholds: bool
    runs_on: bool
    to_withhold: dict[str, int]

    def _fail(self, seq: int, kind: str, problem: str) -> None: ...


class WithholdChecks:
    """`Account`'s own reckoning of the members a withholding run must withhold."""

    withholds: bool  # the run's `stale_member` is `withhold` (`Account.__init__` sets these)
    runs_on: bool  # it is not `cancel`: withhold, or run-on (verl-drop)
    to_withhold: dict[str, int]  # scored, admitted members owed a `withheld` drop -> tokens

    def _withhold_owed(self: _Books, seq: int, kind: str) -> None:
        """Nothing may come between a group's scoring and its members' withholding."""
        if self.to_withhold:
            owed = sorted(self.to_withhold)[:5]
            self._fail(seq, kind, f"stale members scored but not withheld: {owed}")
            self.to_withhold.clear()

    def _withhold_scored(
        self: _Books, group: Group, episode_ids: Sequence[str], admitted: bool
    ) -> None:
        """A group scored: its admitted live-policy members past the bound by version are owed."""
        if not (self.withholds and admitted and group.train and not group.frozen):
            return
        for episode_id in episode_ids:
            _, version, _, tokens = group.arrived[episode_id]
            if behind(version, self.version) > self.bound:
                self.to_withhold[episode_id] = tokens

    def _withhold_dropped(
        self: _Books, seq: int, episode_id: str, reason: str, group: Group | None
    ) -> None:
        """A drop: a `withheld` one is of a member owed it; any other drop comes after them,
        and under withhold is never of an arrival that had to be scored first."""
        kind = "episode_dropped"
        if reason == "withheld":
            tokens = self.to_withhold.pop(episode_id, None)
            if tokens is None:
                self._fail(seq, kind, f"{episode_id} withheld, but not a scored stale member")
                return
            self.run.withheld += 1
            self.run.withheld_tokens += tokens
            return
        WithholdChecks._withhold_owed(self, seq, kind)
        if self.withholds and group is not None and reason == "stale":
            _, version, reward, _ = group.arrived[episode_id]
            if reward is not None and behind(version, self.version) > self.bound:
                self._fail(seq, kind, f"{episode_id} dropped before scoring, not withheld")

    def _withhold_cancelled(self: _Books, seq: int, reason: str) -> None:
        """Under withhold and run-on (verl-drop) nothing is cancelled for its age."""
        if self.runs_on and reason == "stale":
            member = self.config.stale_member
            self._fail(seq, "episodes_cancelled", f"stale cancellation under stale_member={member}")
