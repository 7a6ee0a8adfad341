"""The account's bounded-queue check (`queue_limit`).

With `queue_limit` set (verl's fully async MessageQueue, PipelineRL's preprocessor) the sink
evicts queued episodes, reason `evicted`, right before the `group_scored` of an admitted
group that would overfill its queue. The check reads the account's queue: each eviction is
of the oldest queued episode; evictions happen only when the queue could not take the
admitted group; they are as few as make room (whole groups, the fewest, under
`oldest-group`); and the queue never holds more than the limit. It counts
`episodes_evicted`; an eviction is not a stale drop and is never held to the bound. A run
with an unbounded queue feeds it nothing but the evictions it refuses.
"""

from __future__ import annotations

from rolloutlog.core.account.books import Books
from rolloutlog.core.account.groups import age
from rolloutlog.core.config import RunConfig


def _group(episode_id: str) -> str:
    return episode_id.rpartition("/")[0]


class Eviction:
    """The account's checks of a bounded queue's evictions."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        self.limit: int = config.queue_limit  # 0: unbounded
        self.rule: str = config.queue_eviction
        self.evicting: list[str] = []  # evicted since the last group was scored, oldest first

    @staticmethod
    def used(config: RunConfig) -> bool:
        return config.queue_limit > 0

    def evicted(self, seq: int, episode_id: str, recorded_age: int) -> None:
        """A drop with reason `evicted`: of the oldest queued episode, from a bounded queue."""
        kind, books = "episode_dropped", self.books
        oldest = next(iter(books.queue), None)
        if not self.limit:
            books.fail(seq, kind, f"evicts {episode_id} from an unbounded queue")
        if episode_id != oldest:
            books.fail(seq, kind, f"evicts {episode_id}, but the oldest queued is {oldest}")
            return
        version, _, _ = books.queue.pop(episode_id)
        books.run.evicted += 1
        self.evicting.append(episode_id)
        actual = age(version, books.step)
        if recorded_age != actual:
            books.fail(seq, kind, f"recorded age {recorded_age}, actual age {actual}")

    def room(self, seq: int, incoming: int) -> None:
        """A group scored, `incoming` of its members admitted: the evictions just before it
        were needed, were as few as make room, and the queue then holds at most the limit."""
        kind, limit, evicted = "group_scored", self.limit, self.evicting
        self.evicting = []
        held = len(self.books.queue)
        before = held + len(evicted)
        fail = self.books.fail
        if evicted and before + incoming <= limit:
            fail(seq, kind, f"evicted {len(evicted)} from a queue of {before} with room")
        elif held + incoming > limit:
            fail(seq, kind, f"the queue would hold {held + incoming} > limit {limit}")
        elif evicted and self.rule == "oldest-episode" and held + incoming < limit:
            fail(seq, kind, f"evicted {len(evicted)}, {before + incoming - limit} needed")
        elif self.rule == "oldest-group" and evicted:
            groups = {_group(e) for e in evicted}
            if any(_group(e) in groups for e in self.books.queue):
                fail(seq, kind, "evicts part of a group")
            last = [e for e in evicted if _group(e) == _group(evicted[-1])]
            if before - len(evicted) + len(last) + incoming <= limit:
                fail(seq, kind, f"evicts group {_group(evicted[-1])} it had room for")
