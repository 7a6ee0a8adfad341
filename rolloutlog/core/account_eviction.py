"""The shadow account's bounded-queue checks (a mixin of `core.account.Account`).

With `queue_limit` set (verl's fully async MessageQueue, PipelineRL's preprocessor) the sink
evicts queued episodes, reason `evicted`, right before the `group_scored` of an admitted
group that would overfill its queue. The account checks, on its own mirror of the queue:
each eviction is of the oldest queued episode; evictions happen only when the queue could
not take the admitted group; they are as few as make room (whole groups, the fewest, under
`oldest-group`); and the queue never holds more than the limit. It counts
`episodes_evicted`; an eviction is not a stale drop and is never held to the bound.
"""

from __future__ import annotations

from typing import Protocol

from rolloutlog.core.account_group import age
from rolloutlog.core.run_summary import RunSummary


def _group(episode_id: str) -> str:
    return episode_id.rpartition("/")[0]


class _Books(Protocol):
    """What these checks read and keep of the account."""

    run: RunSummary
    step: int
    train_promised: int
    queue: dict[str, tuple[int, bool, int]]
    queue_limit: int
    eviction_rule: str
    evicting: list[str]

    def _fail(self, seq: int, kind: str, problem: str) -> None: ...


class EvictionChecks:
    """`Account`'s checks of a bounded queue's evictions."""

    queue_limit: int  # the run's `queue_limit` (0: unbounded); `Account.__init__` sets all three
    eviction_rule: str  # the run's `queue_eviction`
    evicting: list[str]  # evicted since the last group was scored, oldest first

    def _evicted(self: _Books, seq: int, episode_id: str, recorded_age: int) -> None:
        """A drop with reason `evicted`: of the oldest queued episode, from a bounded queue."""
        kind = "episode_dropped"
        oldest = next(iter(self.queue), None)
        if not self.queue_limit:
            self._fail(seq, kind, f"evicts {episode_id} from an unbounded queue")
        if episode_id != oldest:
            return self._fail(seq, kind, f"evicts {episode_id}, but the oldest queued is {oldest}")
        version, _, _ = self.queue.pop(episode_id)
        self.train_promised -= 1
        self.run.evicted += 1
        self.evicting.append(episode_id)
        if recorded_age != age(version, self.step):
            actual = age(version, self.step)
            self._fail(seq, kind, f"recorded age {recorded_age}, actual age {actual}")
        return None

    def _make_room(self: _Books, seq: int, incoming: int) -> None:
        """A group scored, `incoming` of its members admitted: the evictions just before it
        were needed, were as few as make room, and the queue then holds at most the limit."""
        kind, limit, evicted = "group_scored", self.queue_limit, self.evicting
        self.evicting = []
        if not limit:
            return
        held = len(self.queue)
        before = held + len(evicted)
        if evicted and before + incoming <= limit:
            self._fail(seq, kind, f"evicted {len(evicted)} from a queue of {before} with room")
        elif held + incoming > limit:
            self._fail(seq, kind, f"the queue would hold {held + incoming} > limit {limit}")
        elif evicted and self.eviction_rule == "oldest-episode" and held + incoming < limit:
            self._fail(seq, kind, f"evicted {len(evicted)}, {before + incoming - limit} needed")
        elif self.eviction_rule == "oldest-group" and evicted:
            groups = {_group(e) for e in evicted}
            if any(_group(e) in groups for e in self.queue):
                self._fail(seq, kind, "evicts part of a group")
            last = [e for e in evicted if _group(e) == _group(evicted[-1])]
            if before - len(evicted) + len(last) + incoming <= limit:
                self._fail(seq, kind, f"evicts group {_group(evicted[-1])} it had room for")
