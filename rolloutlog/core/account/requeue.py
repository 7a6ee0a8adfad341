"""The account's requeue check (tinker, slime-lag).

Under a requeue rule the sink discards a stale group whole, each of its drops with reason
`requeue`, and the dispatcher opens that task again as a new group of the same task and
environment, oldest first: before any fresh train group (`requeue_order = "first"`), or
(tinker's builder queue, `"behind-fresh"`) not before `groups_per_batch + 1` train groups
have opened since its discard, the builders queued and the dataloader's put ahead of it
(there the check reads a group on the owed task as the requeue from that turn on, and
checks only the order of the requeues; the reference model replays the queue itself). The
check keeps its own queue of the
tasks owed, from the drops it sees, and checks each train group opened against it; it counts
`groups_requeued`. It keeps the task of every train group opened (one pair per group), since
a queued group can be discarded long after it closed. A group's task is requeued once, at its
first `requeue` drop (under per-episode stamping its queued members can go stale one step
apart). A run without a requeue rule feeds it nothing but the `requeue` drops it refuses.
"""

from __future__ import annotations

from rolloutlog.core.account.books import Books
from rolloutlog.core.account.groups import Group
from rolloutlog.core.config import RunConfig


class Requeue:
    """The account's mirror of the dispatcher's requeue queue."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        self.rule: str = config.requeue
        # behind tinker's fresh builders: the train groups that open before a requeue's turn
        per_batch = max(1, (config.batch_size or config.group_size) // config.group_size)
        self.ahead = per_batch + 1 if config.requeue_order == "behind-fresh" else 0
        self.tasks: dict[str, tuple[str, str]] = {}  # train group -> (task id, env)
        self.owed: dict[str, int] = {}  # discarded, not reopened -> train groups opened since
        self.discarded: set[str] = set()  # every group whose task was requeued: once each

    @staticmethod
    def used(config: RunConfig) -> bool:
        return config.requeue != "none"

    def opened(self, seq: int, group_id: str, group: Group, task: tuple[str, str]) -> None:
        """A train group opened: the oldest task owed, if one is, else a fresh one. Behind
        fresh builders, a group is the requeue only on its task once `ahead` train groups
        opened since the discard; before, the same task is the task source's (a fresh group
        may draw it: the two cannot be told apart by the log)."""
        self.tasks[group_id] = task
        owed = self.owed
        if not owed:
            return
        due = next(iter(owed))
        if self.ahead and (task != self.tasks[due] or owed[due] < self.ahead):
            self._one_more_opened()
            return
        del owed[due]
        if task != self.tasks[due]:
            due_task = ", ".join(self.tasks[due])
            problem = f"skips the requeue of {due} ({due_task}): opened {task}"
            self.books.fail(seq, "group_opened", problem)
            return
        self._one_more_opened()
        self.books.run.requeued += 1

    def _one_more_opened(self) -> None:
        for group_id in self.owed:
            self.owed[group_id] += 1

    def dropped_requeue(self, seq: int, episode_id: str, group: Group | None, queued: bool) -> None:
        """A drop with reason `requeue`: allowed by the run's rule where it was made (at
        completion by both rules, from the queue only at ship), and its group's task owed
        once. `group` is the open group of an arrival, None for a queued episode."""
        if self.rule == "none" or (queued and self.rule != "at-ship"):
            where = "from the queue" if queued else "at completion"
            problem = f"requeue {where} under requeue rule {self.rule!r}"
            self.books.fail(seq, "episode_dropped", problem)
        if group is not None:
            group.requeue = True
        group_id = episode_id.rpartition("/")[0]
        # A train group's task, once; any other drop is refused as not stale.
        if group_id in self.tasks and group_id not in self.discarded:
            self.discarded.add(group_id)
            self.owed[group_id] = 0

    def whole(self, seq: int, group_id: str, group: Group) -> None:
        """A group discarded for requeue is discarded whole: every arrival dropped."""
        if group.dropped != set(group.arrived):
            kept = sorted(set(group.arrived) - group.dropped)
            self.books.fail(seq, "group_scored", f"requeue of {group_id} keeps {kept}")
