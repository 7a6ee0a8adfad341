"""When a requeued task opens again: before any fresh train group, or behind fresh builders.

Under a requeue rule (`requeue`) the sink discards a stale group whole and the dispatcher
owes its task a new group (`DispatcherState.requeue`, oldest first). `requeue_order` says
which train opening takes it:

- `first` (slime's data buffer, served before fresh prompts: slime/rollout/data_source.py:
  177-189): every train group opened while a requeue is owed takes the oldest one.
- `behind-fresh` (tinker, tinker_cookbook/rl/train.py at 9dfcc3a): the builder queue holds
  `groups_per_batch` builders (train.py:974-976), kept full by the dataloader, whose next
  put waits while it is full (train.py:1008-1016); a discarded group's builder is put back
  with a put of its own (train.py:1111-1116), and `asyncio.Queue` wakes waiting puts in
  order. A worker takes its next builder when its group finishes, before the training loop
  requeues that group (train.py:1058-1066, 1031). So a requeued task opens behind the
  builders already queued and the dataloader's waiting put: `groups_per_batch + 1` fresh
  groups at least.

`requeue_line(state)` yields, for each train group opened from now on, whether it takes
the oldest requeue owed; `follow_requeue` keeps the books the line reads, after each event.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain, repeat

from rolloutlog.core.state import DispatcherState
from rolloutlog.events.types import WORLD_KINDS, EpisodeDropped, Event, GroupOpened

# A builder or a waiting put: True is a requeued group's, False a fresh one (the dataloader's).
Builder = bool


def first_line(state: DispatcherState) -> Iterator[bool]:
    """`first`: the requeues owed, oldest first, then fresh tasks."""
    return chain(repeat(True, len(state.requeue)), repeat(False))


def behind_fresh_line(state: DispatcherState) -> Iterator[bool]:
    """`behind-fresh`: the builder queue taken from its head, as tinker's workers take it."""
    slots, putters, arriving = _books(state)
    slots, putters = list(slots), list(putters)
    while True:
        yield slots[0]
        arriving = _take(slots, putters, arriving)


def follow_builder_queue(state: DispatcherState, event: Event) -> None:
    """`behind-fresh`'s books: a train group opened takes the queue's head (and the first
    waiting put fills its place); a group's first requeue drop puts its builder back once
    the reaction's openings are taken; a world event starts a new reaction."""
    slots, putters, arriving = _books(state)
    if type(event) is GroupOpened and event.work == "train":
        state.requeues_arriving = _take(slots, putters, arriving)
    elif type(event) is EpisodeDropped and event.reason == "requeue":
        state.requeues_arriving = len(state.requeue) - sum(slots) - sum(putters)
    elif event.kind in WORLD_KINDS and arriving:
        putters.extend(repeat(True, arriving))
        state.requeues_arriving = 0


def _books(state: DispatcherState) -> tuple[list[Builder], list[Builder], int]:
    """The builder queue (`groups_per_batch` builders, fresh to start with), the waiting
    puts (the dataloader's first), and the requeues not yet put back."""
    if not state.builders:
        config = state.config
        per_batch = config.batch_size or config.group_size
        state.builders = [False] * max(1, per_batch // config.group_size)
        state.putters = [False]
    return state.builders, state.putters, state.requeues_arriving


def _take(slots: list[Builder], putters: list[Builder], arriving: int) -> int:
    """A worker takes the head builder; the first waiting put takes its place (the
    dataloader puts its next at once), then the reaction's requeues wait behind; 0 left."""
    del slots[0]
    put = putters.pop(0)
    slots.append(put)
    if not put:
        putters.append(False)
    putters.extend(repeat(True, arriving))
    return 0
