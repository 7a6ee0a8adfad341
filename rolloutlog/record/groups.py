"""What the recorder keeps of each group: enough to number members, refuse impossible calls
and finalize at shutdown the way rolloutlog's sink does (docs/contract.md § Sink)."""

from __future__ import annotations

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.core.curriculum import ScoredGroup, curriculum_named
from rolloutlog.core.scoring import grpo_advantages
from rolloutlog.core.staleness import is_stale, rollout_age


@attrs.define
class GroupBook:
    """One group, in the log's ids."""

    ours: str
    size: int
    train: bool
    frozen: bool
    version: int
    env: str
    task: str
    dispatched: int = 0
    owed_cancelled: int = 0  # unscheduled members cancelled
    inflight: dict[str, int] = attrs.Factory(dict)  # episode -> its dispatch version
    arrived: dict[str, tuple[int, int, float | None, int]] = attrs.Factory(dict)  # m, v, r, tok
    cancelled: int = 0
    stale_cancelled: bool = False
    dropped: set[str] = attrs.Factory(set)
    scored: bool = False

    @property
    def unscheduled(self) -> int:
        return self.size - self.dispatched - self.owed_cancelled

    def complete(self) -> bool:
        return len(self.arrived) + self.cancelled == self.size

    def stale_arrivals(self, config: RunConfig, step: int) -> list[tuple[str, int]]:
        """(episode, age) of the arrivals the sink drops at finalization, in member order:
        past the bound at `step`, or (per-group) all of them after a stale cancellation."""
        if not self.train or self.frozen or config.staleness == "soft":
            return []  # soft staleness drops nothing for its age
        per_group = config.staleness == "per-group" and self.stale_cancelled
        bound = config.max_off_policy_steps
        return [
            (episode, rollout_age(version, step))
            for episode, (_, version, _, _) in sorted(self.arrived.items(), key=lambda i: i[1][0])
            if episode not in self.dropped
            and (per_group or is_stale(version, step, bound, train=True, frozen=False))
        ]

    def fresh_scores(self) -> tuple[list[str], list[float]]:
        """The fresh successful members in member order, and their GRPO advantages (none
        for an eval group: it is measured, never trained)."""
        fresh = sorted(
            (member, episode, reward)
            for episode, (member, _, reward, _) in self.arrived.items()
            if reward is not None and episode not in self.dropped
        )
        rewards = [reward for _, _, reward in fresh if reward is not None]
        advantages = list(grpo_advantages(rewards)) if self.train else []
        return [episode for _, episode, _ in fresh], advantages

    def admitted_at_shutdown(self, config: RunConfig) -> bool:
        """What the sink's curriculum says of the fresh scored members, as it asks at any
        finalization (nothing trains after the run ended, but the verdict is recorded)."""
        ours, advantages = self.fresh_scores()
        if not self.train or not ours:
            return False
        rewards = tuple(self.arrived[e][2] for e in ours)
        scored = ScoredGroup(
            group_id=self.ours,
            task_id=self.task,
            env=self.env,
            episode_ids=tuple(ours),
            rewards=tuple(r for r in rewards if r is not None),
            advantages=tuple(advantages),
        )
        return curriculum_named(config.curriculum)(scored)
