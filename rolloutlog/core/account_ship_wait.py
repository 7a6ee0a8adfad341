"""The shadow account's checks of the tinker-822 rules (a mixin of `core.account.Account`).

Under `ship_wait = "last-chance"` (the tinker-822 preset) a full batch whose hold has
lifted waits for every open train group that holds a member at its last chance: rollout
age at the batch's step at least `max_off_policy_steps`. The account keeps its own watch:
from its open groups, queue, step and version it notes the first moment a batch could
have shipped but for the wait, and when that batch ships it counts one wait
(`ship_waits`) and its seconds (`ship_wait_seconds`: ship time minus that moment). A
batch that ships while such a group is open breaks the rule, and is reported at its seq.
Time comes from the events: `now` is the time of the event being folded.

Under `admission = "outstanding"` a train group opens only while fewer than
`max(1, batch_size // G) × (depth + 1)` (`outstanding_depth`, else `target_lag`) train
groups are outstanding, unless, under the liveness exception, none is
open. The account counts them its own way: the train groups that are open, and in whole
groups of G the episodes in its queue and in batches shipped after the last announced
version.
"""

from __future__ import annotations

from typing import Protocol

from rolloutlog.core.account_group import Group, age
from rolloutlog.core.config import RunConfig
from rolloutlog.core.run_summary import RunSummary


class _Books(Protocol):
    """What these checks read and keep of the account."""

    run: RunSummary
    config: RunConfig
    bound: int
    step: int
    gated: bool
    finished: bool
    groups: dict[str, Group]
    queue: dict[str, tuple[int, bool, int]]
    ship_wait: bool
    now: float
    wait_since: float | None
    version: int
    unpublished: dict[int, set[str]]

    def _fail(self, seq: int, kind: str, problem: str) -> None: ...

    def _last_chance_open(self) -> str | None: ...


class ShipWaitChecks:
    """`Account`'s watch over the ship wait."""

    ship_wait: bool  # the run's rule waits (`Account.__init__` sets all four)
    now: float  # the time of the event being folded
    wait_since: float | None  # when batch `step` could first have shipped but for the wait
    unpublished: dict[int, set[str]]  # step -> the episodes its batch took (outstanding)

    def _outstanding_opened(self: _Books, seq: int) -> None:
        """A train group opens: the groups not yet trained on must leave room, unless none
        is open under the liveness exception."""
        open_train = {group_id for group_id, group in self.groups.items() if group.train}
        if not open_train and self.config.liveness:
            return
        shipped = sum(len(ids) for step, ids in self.unpublished.items() if step > self.version)
        outstanding = len(open_train) + (len(self.queue) + shipped) // self.config.group_size
        cap = max(1, (self.config.batch_size or 0) // self.config.group_size)
        depth = self.config.outstanding_depth  # verl's num_warmup_batches, else the PR's
        cap *= (self.config.target_lag if depth is None else depth) + 1  # pipeline_depth
        if outstanding >= cap:
            self._fail(seq, "group_opened", f"outstanding: {outstanding} groups of {cap}")

    def _last_chance_open(self: _Books) -> str | None:
        """An open train group holding a member at age ≥ the bound at this step, or None."""
        for group_id, group in self.groups.items():
            if not group.train or group.frozen:
                continue
            versions = [v for v, _ in group.inflight.values()]
            versions += [v for _, v, _, _ in group.arrived.values()]
            if any(age(v, self.step) >= self.bound for v in versions):
                return group_id
        return None

    def _wait_watch(self: _Books) -> None:
        """Something moved: if batch `step` is full and the hold lifted but last-chance work
        is open, the wait starts now (once per batch)."""
        if not self.ship_wait or self.wait_since is not None or self.finished or self.gated:
            return
        size, tokens = self.config.batch_size, self.config.token_batch_size
        if size is not None and len(self.queue) < size:
            return
        if tokens is not None and sum(t for _, _, t in self.queue.values()) < tokens:
            return
        if self._last_chance_open() is not None:
            self.wait_since = self.now

    def _wait_shipped(self: _Books, seq: int, step: int) -> None:
        """Batch `step` ships: nothing at its last chance may still be open; a wait before
        it is counted with its seconds."""
        if not self.ship_wait:
            return
        group_id = self._last_chance_open()
        if group_id is not None:
            self._fail(
                seq,
                "batch_shipped",
                f"batch {step} ships while {group_id} is at its "
                "last chance (ship_wait = last-chance)",
            )
        if self.wait_since is not None:
            self.run.ship_waits += 1
            self.run.ship_wait_seconds += self.now - self.wait_since
            self.wait_since = None
