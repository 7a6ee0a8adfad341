"""Everything the reference has seen: each episode and group ever, nothing forgotten.

Applying an event only writes down what it says. Every quantity a decision needs (what is
in flight, what a group still owes, the queue, the step) is a scan of this record, so no
counter can drift from the facts it summarises.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rolloutlog.events.types import WORLD_KINDS, Event
from rolloutlog.testing.reference.settings import Settings

IN_FLIGHT = "in flight"


@dataclass
class Episode:
    """One dispatched member: its own dispatch version and what became of it."""

    episode_id: str
    group_id: str
    member: int
    version: int
    status: str = IN_FLIGHT  # or "completed", "failed", "cancelled"
    reward: float | None = None
    tokens: int = 0
    dropped: bool = False
    drop_reason: str | None = None
    advantage: float | None = None  # set when admitted to the queue
    shipped: bool = False
    shipped_at: int = 0  # the step of the batch that took it
    completion: int = 0  # completion tokens, when it completed
    stopped_at: list[int] = field(default_factory=list)  # tokens at each interruption
    resumed_at: list[int] = field(default_factory=list)  # the version of each resumption
    waiting: bool = False  # interrupted, not resumed yet


@dataclass
class Cancellation:
    reason: str
    episode_ids: tuple[str, ...]
    unscheduled: int


@dataclass
class Group:
    """One group: what opened it, its members in dispatch order, its cancellations."""

    group_id: str
    number: int
    work: str
    env: str
    task_id: str
    frozen: bool
    size: int
    start_version: int
    step: int = 0  # the step it opened at
    members: list[Episode] = field(default_factory=list)
    cancellations: list[Cancellation] = field(default_factory=list)
    scored: bool = False

    @property
    def train(self) -> bool:
        return self.work == "train"

    def arrived(self) -> list[Episode]:
        return [e for e in self.members if e.status in ("completed", "failed")]

    def in_flight(self) -> list[Episode]:
        return [e for e in self.members if e.status == IN_FLIGHT]

    def unscheduled(self) -> int:
        """Members never dispatched and not cancelled either."""
        cancelled = sum(c.unscheduled for c in self.cancellations)
        return self.size - len(self.members) - cancelled

    def accounted(self) -> int:
        """arrived + Σ cancellation counts: the group finalizes when this reaches G + r."""
        counts = sum(len(c.episode_ids) + c.unscheduled for c in self.cancellations)
        return len(self.arrived()) + counts


@dataclass
class Record:
    """The whole history, and the facts it established."""

    history: list[Event] = field(default_factory=list)
    settings: Settings | None = None
    groups: dict[str, Group] = field(default_factory=dict)  # in opening order
    episodes: dict[str, Episode] = field(default_factory=dict)
    admitted: list[str] = field(default_factory=list)  # in the order they joined the queue
    batches: int = 0
    version: int = 0
    live: int = 0  # the version inference serves
    recycled: set[str] = field(default_factory=set)  # recycled, not yet resumed
    limit: int = 0
    finished: bool = False
    natural_arrivals: set[int] = field(default_factory=set)  # seqs of non-late arrivals

    def apply(self, event: Event) -> None:
        self.history.append(event)
        getattr(self, "_" + event.kind, _nothing)(event)

    @property
    def config(self) -> Settings:
        if self.settings is None:
            raise ValueError("the log opens without run_started")
        return self.settings

    @property
    def step(self) -> int:
        return self.batches + 1

    def update_step(self) -> int:
        """The step the last `version_pending` found, before any batch it released."""
        shipped = step = 0
        for event in self.history:
            if event.kind == "batch_shipped":
                shipped += 1
            elif event.kind == "version_pending":
                step = shipped + 1
        return step

    def requeue_line(self) -> tuple[list[Group], Iterator[bool]]:
        """The groups discarded for requeue (a drop with reason `requeue`) whose task no
        train group has taken yet, oldest first; and for each train group opened from now
        on, whether it takes the oldest of them. In order `first` every train group opened
        takes the oldest owed. In `behind-fresh` (tinker's builder queue) the queue holds
        `groups per batch` builders; a take lets the oldest waiting put in (the dataloader's
        is always waiting, and puts its next at once); a discarded group's put joins the
        waiting ones after the openings of its reaction."""
        settings = self.config
        behind = settings.requeue_order == "behind-fresh"
        per_batch = settings.batch_size or settings.group_size
        line: deque[bool] = deque([False] * max(1, per_batch // settings.group_size))
        waiting: deque[bool] = deque([False])
        discarded: set[str] = set()
        owed: list[str] = []
        late = 0  # requeues of this reaction, not yet waiting

        def take() -> bool:
            nonlocal late
            head = line.popleft() if behind else bool(owed)
            entering = waiting.popleft()
            line.append(entering)
            if not entering:
                waiting.append(False)
            waiting.extend([True] * late)
            late = 0
            return head

        for event in self.history:
            if event.kind == "group_opened" and event.work == "train":  # type: ignore[union-attr]
                if take() and owed:
                    owed.pop(0)
            elif event.kind == "episode_dropped" and event.reason == "requeue":  # type: ignore[union-attr]
                group_id = event.episode_id.rpartition("/")[0]  # type: ignore[union-attr]
                if group_id not in discarded:
                    discarded.add(group_id)
                    owed.append(group_id)
                    late += 1
            elif event.kind in WORLD_KINDS:
                waiting.extend([True] * late)
                late = 0

        def turns() -> Iterator[bool]:
            while True:
                took = take()
                if took and owed:
                    owed.pop(0)
                yield took

        return [self.groups[group_id] for group_id in owed], turns()

    def recycled_since_ship(self) -> set[str]:
        """Groups with a member recycled since the last batch shipped (slime's buffer)."""
        groups: set[str] = set()
        for event in self.history:
            if event.kind == "batch_shipped":
                groups = set()
            elif event.kind == "episode_interrupted" and event.reason == "recycle":  # type: ignore[union-attr]
                groups.add(event.episode_id.rpartition("/")[0])  # type: ignore[union-attr]
        return groups

    def gate_version(self) -> int:
        """The version announced when a batch last shipped or a version last went live."""
        version = checked = 0
        for event in self.history:
            if event.kind == "version_pending":
                version = event.version  # type: ignore[union-attr]
            elif event.kind in ("batch_shipped", "version_live"):
                checked = version
        return checked

    def open_groups(self) -> list[Group]:
        """Groups that still owe members: in flight or never dispatched."""
        return [g for g in self.groups.values() if g.accounted() < g.size]

    def in_flight(self) -> list[Episode]:
        return [e for e in self.episodes.values() if e.status == IN_FLIGHT]

    def queue(self) -> list[Episode]:
        queued = (self.episodes[e] for e in self.admitted)
        return [e for e in queued if not e.shipped and not e.dropped]

    def updating(self) -> bool:
        """A weight update is under way: announced and not live, or work it (or a recycle)
        interrupted is in flight and not resumed."""
        waiting = any(e.waiting and e.status == IN_FLIGHT for e in self.episodes.values())
        return self.live < self.version or waiting

    def group_of(self, episode: Episode) -> Group:
        return self.groups[episode.group_id]

    # what each event says

    def _run_started(self, event: Any) -> None:
        self.settings = Settings.from_config(event.config)
        self.limit = self.settings.max_inflight

    def _group_opened(self, event: Any) -> None:
        self.groups[event.group_id] = Group(
            group_id=event.group_id,
            number=len(self.groups) + 1,
            work=event.work,
            env=event.env,
            task_id=event.task_id,
            frozen=event.frozen,
            size=event.group_size + self.config.group_redundancy,  # G + r members go out
            start_version=event.policy_version,
            step=event.step,
        )

    def _episode_dispatched(self, event: Any) -> None:
        episode = Episode(event.episode_id, event.group_id, event.member, event.policy_version)
        self.episodes[event.episode_id] = episode
        self.groups[event.group_id].members.append(episode)

    def _arrival(self, event: Any, status: str, reward: float | None, tokens: int) -> bool:
        """Whether the arrival is the episode's own (else late, a duplicate, or of an
        episode never dispatched: recorded in history, nothing more)."""
        episode = self.episodes.get(event.episode_id)
        if episode is None or episode.status != IN_FLIGHT:
            return False
        episode.status, episode.reward, episode.tokens = status, reward, tokens
        self.natural_arrivals.add(event.seq)
        return True

    def _episode_completed(self, event: Any) -> None:
        tokens = event.prompt_tokens + event.completion_tokens
        if self._arrival(event, "completed", event.reward, tokens):
            self.episodes[event.episode_id].completion = event.completion_tokens

    def _episode_failed(self, event: Any) -> None:
        self._arrival(event, "failed", None, 0)

    def _episodes_cancelled(self, event: Any) -> None:
        for episode_id in event.episode_ids:
            self.episodes[episode_id].status = "cancelled"
            self.recycled.discard(episode_id)
        self.groups[event.group_id].cancellations.append(
            Cancellation(event.reason, tuple(event.episode_ids), event.unscheduled)
        )

    def _episode_dropped(self, event: Any) -> None:
        episode = self.episodes[event.episode_id]
        episode.dropped, episode.drop_reason = True, event.reason

    def _group_scored(self, event: Any) -> None:
        self.groups[event.group_id].scored = True
        if event.admitted:
            for episode_id, advantage in zip(event.episode_ids, event.advantages, strict=True):
                self.episodes[episode_id].advantage = advantage
                self.admitted.append(episode_id)

    def _batch_shipped(self, event: Any) -> None:
        self.batches += 1
        for episode_id in event.episode_ids:
            episode = self.episodes[episode_id]
            episode.shipped, episode.shipped_at = True, event.step

    def _version_pending(self, event: Any) -> None:
        self.version = event.version

    def _version_live(self, event: Any) -> None:
        self.live = event.version

    def _episode_interrupted(self, event: Any) -> None:
        if event.reason == "recycle":
            self.recycled.add(event.episode_id)
        episode = self.episodes[event.episode_id]
        episode.stopped_at.append(event.completion_tokens)
        episode.waiting = True

    def _episode_resumed(self, event: Any) -> None:
        self.recycled.discard(event.episode_id)
        episode = self.episodes[event.episode_id]
        episode.resumed_at.append(event.policy_version)
        episode.waiting = False

    def _limit_set(self, event: Any) -> None:
        self.limit = event.max_inflight

    def _run_finished(self, event: Any) -> None:
        self.finished = True


def _nothing(event: Event) -> None:
    """version_live and overload_cut change no fact; they stay in the history."""
