"""The shadow account's requeue checks (a mixin of `core.account.Account`).

Under a requeue rule (tinker, slime-lag) the sink discards a stale group whole, each of its
drops with reason `requeue`, and the dispatcher opens that task again as a new group of the
same task and environment, oldest first: before any fresh train group (`requeue_order =
"first"`), or (tinker's builder queue, `"behind-fresh"`) not before `groups_per_batch + 1`
train groups have opened since its discard, the builders queued and the dataloader's put
ahead of it (there the account reads a group on the owed task as the requeue from that
turn on, and checks only the order of the requeues; the reference model replays the queue
itself). The account keeps its own queue of the tasks owed, from the drops it sees, and
checks each train group opened against it; it counts `groups_requeued`. It keeps the task
of every train group it opened (one pair per group), since a queued group can be discarded
long after it closed. A group's task is requeued once, at its first `requeue` drop (under
per-episode stamping its queued members can go stale one step apart).
"""

from __future__ import annotations

from typing import Protocol

from rolloutlog.core.account_group import Group
from rolloutlog.core.config import RunConfig
from rolloutlog.core.run_summary import RunSummary


class _Books(Protocol):
    """What these checks read and keep of the account."""

    run: RunSummary
    config: RunConfig
    requeue_rule: str
    tasks: dict[str, tuple[str, str]]
    requeue: dict[str, int]
    discarded: set[str]

    def _fail(self, seq: int, kind: str, problem: str) -> None: ...


class RequeueChecks:
    """`Account`'s mirror of the dispatcher's requeue queue."""

    requeue_rule: str  # the run's `requeue` key (`Account.__init__` sets all four)
    tasks: dict[str, tuple[str, str]]  # train group -> (task id, env)
    requeue: dict[str, int]  # groups discarded for requeue, not reopened yet, oldest first
    discarded: set[str]  # every group whose task was requeued: once each

    def _requeue_opened(self: _Books, seq: int, group_id: str, task: tuple[str, str]) -> None:
        """A train group opened: the oldest task owed, if one is, else a fresh one. Behind
        fresh builders, a group is the requeue only on its task once `groups_per_batch + 1`
        train groups opened since the discard; before, the same task is the task source's
        (a fresh group may draw it: the two cannot be told apart by the log)."""
        self.tasks[group_id] = task
        if not self.requeue:
            return
        due = next(iter(self.requeue))
        config = self.config
        if config.requeue_order == "behind-fresh":
            ahead = max(1, (config.batch_size or config.group_size) // config.group_size) + 1
            if task != self.tasks[due] or self.requeue[due] < ahead:
                for owed in self.requeue:
                    self.requeue[owed] += 1
                return
        del self.requeue[due]
        if task != self.tasks[due]:
            owed = ", ".join(self.tasks[due])
            self._fail(seq, "group_opened", f"skips the requeue of {due} ({owed}): opened {task}")
            return
        for owed in self.requeue:
            self.requeue[owed] += 1
        self.run.requeued += 1

    def _requeue_dropped(
        self: _Books, seq: int, episode_id: str, group: Group | None, queued: bool
    ) -> None:
        """A drop with reason `requeue`: allowed by the run's rule where it was made (at
        completion by both rules, from the queue only at ship), and its group's task owed
        once. `group` is the open group of an arrival, None for a queued episode."""
        kind, rule = "episode_dropped", self.requeue_rule
        if rule == "none" or (queued and rule != "at-ship"):
            where = "from the queue" if queued else "at completion"
            self._fail(seq, kind, f"requeue {where} under requeue rule {rule!r}")
        if group is not None:
            group.requeue = True
        group_id = episode_id.rpartition("/")[0]
        # A train group's task, once; any other drop is refused as not stale.
        if group_id in self.tasks and group_id not in self.discarded:
            self.discarded.add(group_id)
            self.requeue[group_id] = 0

    def _requeue_whole(self: _Books, seq: int, group_id: str, group: Group) -> None:
        """A group discarded for requeue is discarded whole: every arrival dropped."""
        if group.requeue and group.dropped != set(group.arrived):
            kept = sorted(set(group.arrived) - group.dropped)
            self._fail(seq, "group_scored", f"requeue of {group_id} keeps {kept}")
