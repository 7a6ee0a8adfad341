"""The account's checks of admission: each `admission` rule's inequality, in the account's
own count (docs/contract.md, "Properties per preset"; the inequalities themselves are in
`core.account.properties`).

One check per rule, fed only by a run under it (with episode batches: with token batches
the episodes a batch takes are an estimate the account does not redo). A train group opens,
or a train episode goes out, only while the rule leaves room, unless nothing is running and
the run keeps the liveness exception (`liveness`): capacity's horizon in episodes, AReaL's
in groups, PR #822's cap on groups not yet trained on (`outstanding`), PipelineRL's
`max_lag` in groups submitted, and ROLL's generation budget in groups begun and not aborted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rolloutlog.core.account.books import Books
from rolloutlog.core.account.groups import Group
from rolloutlog.core.account.properties import (
    AREAL_ADMISSION,
    CAPACITY,
    MAX_LAG_ADMISSION,
    OUTSTANDING,
    ROLL_ADMISSION,
    areal_problem,
    kept_properties,
    max_lag_problem,
    roll_problem,
)
from rolloutlog.core.config import RunConfig


class Capacity:
    """Capacity admission's horizon: no train dispatch once the promised work (trained,
    queued, arrived and not finalized, in flight) fills `(bound + v + 1) × batch_size`,
    unless no train episode is in flight under the liveness exception."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        self.liveness: bool = config.liveness
        self.promised = 0  # trained + queued + arrived-unfinalized + in flight (train)
        self.inflight = 0  # train episodes in flight

    @staticmethod
    def used(config: RunConfig) -> bool:
        return CAPACITY in kept_properties(config)

    def admitted(self, seq: int, kind: str) -> None:
        books = self.books
        horizon = (books.bound + books.version + 1) * (books.batch_size or 0)
        if self.promised >= horizon and (self.inflight or not self.liveness):
            books.fail(seq, kind, f"capacity: {self.promised} promised of {horizon}")
        self.promised += 1
        self.inflight += 1

    def cancelled(
        self, seq: int, group_id: str, group: Group, episode_ids: Sequence[str], reason: str
    ) -> None:
        if group.train:
            self.promised -= len(episode_ids)
            self.inflight -= len(episode_ids)

    def arrived(self, seq: int, kind: str, episode_id: str, group: Group) -> None:
        if group.train:
            self.inflight -= 1

    def dropping(self, seq: int, episode_id: str, reason: str) -> None:
        self.promised -= 1

    def scored(self, seq: int, group: Group, episode_ids: Sequence[str], admitted: bool) -> None:
        """What the group keeps leaves the promise, less what joins the queue."""
        kept = sum(episode_id not in group.dropped for episode_id in group.arrived)
        self.promised -= kept - (len(episode_ids) if admitted else 0)


class Areal:
    """AReaL's `get_capacity`, in groups; its accepted rollouts are the train episodes
    admitted, counted in whole groups of G."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        self.accepted = 0  # train episodes admitted

    @staticmethod
    def used(config: RunConfig) -> bool:
        return AREAL_ADMISSION in kept_properties(config)

    def opening(self, seq: int) -> None:
        books = self.books
        accepted = self.accepted // books.group_size
        problem = areal_problem(books.config, books.version, books.groups.values(), accepted)
        if problem:
            books.fail(seq, "group_opened", problem)

    def finalized(
        self, seq: int, group_id: str, group: Group, scored: Sequence[str], admitted: bool
    ) -> None:
        if group.train and admitted:
            self.accepted += len(scored)


class Outstanding:
    """PR #822's cap: fewer than `max(1, batch_size // G) × (depth + 1)` train groups
    outstanding (`outstanding_depth`, else `target_lag`), counted as the train groups that
    are open, and in whole groups of G the episodes queued and in batches shipped after the
    last announced version."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        self.liveness: bool = config.liveness
        cap = max(1, (config.batch_size or 0) // config.group_size)
        depth = config.outstanding_depth  # verl's num_warmup_batches, else the PR's
        self.cap = cap * ((config.target_lag if depth is None else depth) + 1)  # pipeline_depth
        self.unpublished: dict[int, int] = {}  # step -> the episodes its batch took

    @staticmethod
    def used(config: RunConfig) -> bool:
        return OUTSTANDING in kept_properties(config)

    def opening(self, seq: int) -> None:
        books = self.books
        open_train = sum(group.train for group in books.groups.values())
        if not open_train and self.liveness:
            return
        shipped = untrained(self.unpublished, books.version)
        outstanding = open_train + (len(books.queue) + shipped) // books.group_size
        if outstanding >= self.cap:
            books.fail(seq, "group_opened", f"outstanding: {outstanding} groups of {self.cap}")

    def ships(self, seq: int, step: int, episode_ids: Sequence[str]) -> None:
        self.unpublished = cut_past(self.unpublished, self.books.version, step, episode_ids)


def cut_past(
    unpublished: Mapping[int, int], version: int, step: int, episode_ids: Sequence[str]
) -> dict[int, int]:
    """The batches cut past `version` once batch `step` ships, by step, with the episodes
    each took: the trainer has not taken them yet (verl's MessageQueue, PR #822's
    outstanding groups)."""
    cut = {s: n for s, n in unpublished.items() if s > version}
    cut[step] = len(set(episode_ids))
    return cut


def untrained(unpublished: Mapping[int, int], version: int) -> int:
    """The episodes of the batches cut past `version`."""
    return sum(n for step, n in unpublished.items() if step > version)


class MaxLag:
    """PipelineRL's `max_lag`, in train groups submitted against versions announced."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        self.opened_train = 0  # train groups opened
        self.updates = 0  # versions announced

    @staticmethod
    def used(config: RunConfig) -> bool:
        return MAX_LAG_ADMISSION in kept_properties(config)

    def opening(self, seq: int) -> None:
        books = self.books
        groups = books.groups.values()
        problem = max_lag_problem(books.config, self.opened_train, self.updates, groups)
        if problem:
            books.fail(seq, "group_opened", problem)

    def opened(self, seq: int, group_id: str, group: Group, task: tuple[str, str]) -> None:
        self.opened_train += 1

    def announced(self) -> None:
        self.updates += 1


class Roll:
    """ROLL's generation budget, in train groups begun and not aborted, less a group for
    each G members failed in groups not aborted."""

    def __init__(self, books: Books, config: RunConfig) -> None:
        self.books = books
        self.used_groups = 0  # train groups opened and not aborted
        self.lost = 0  # train members failed in groups not aborted

    @staticmethod
    def used(config: RunConfig) -> bool:
        return ROLL_ADMISSION in kept_properties(config)

    def opening(self, seq: int) -> None:
        books = self.books
        running = sum(g.train for g in books.groups.values())
        used = self.used_groups - self.lost // books.group_size
        problem = roll_problem(books.config, books.version, used, running)
        if problem:
            books.fail(seq, "group_opened", problem)

    def opened(self, seq: int, group_id: str, group: Group, task: tuple[str, str]) -> None:
        self.used_groups += 1

    def cancelled(
        self, seq: int, group_id: str, group: Group, episode_ids: Sequence[str], reason: str
    ) -> None:
        """A stale cancellation aborts its group: ROLL's budget gives it back, once."""
        if reason == "stale" and group.train and not group.aborted:
            group.aborted = True
            self.used_groups -= 1

    def finalized(
        self, seq: int, group_id: str, group: Group, scored: Sequence[str], admitted: bool
    ) -> None:
        if group.train and not group.aborted:
            self.lost += sum(reward is None for _, _, reward, _ in group.arrived.values())
