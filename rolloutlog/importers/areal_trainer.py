"""AReaL's trainer, reconstructed from what its rollout side wrote: which task results each
step trained, and when each version was announced. Neither is in AReaL's files.

At AReaL 4aef98d (the areal 1.0.4 wheel), `prepare_batch` (areal/infra/workflow_executor.py,
`BatchTaskDispatcher.active_submit_and_wait`) calls `wait_results(consumer_batch_size −
accepted)`: it waits until that many results have arrived, rejected ones (None) included,
takes the oldest-created of those arrived (`create_time`, when the task started), keeps the
accepted ones and waits again until it holds `consumer_batch_size`. The trainer then trains
and updates the weights (`set_version(step)`), and only then prepares the next batch.

A version comes once its batch is prepared, and once every session that generated a token
under an older version was submitted; before any session that generated a token under it
ended; and, as far as these allow, just before the first train session whose own first
token is under it (PR #1350's `version_rle`) was submitted: AReaL pauses submission during
an update, and submits again once it is done.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Final

import attrs

from rolloutlog.importers.areal_files import Sample, Session
from rolloutlog.importers.errors import ForeignRunError

ASSUMED_BATCHES: Final = (
    "batches: which results trained at which step is in no file: each step's are those "
    "AReaL's prepare_batch takes (the oldest-created of the results arrived once it waits "
    "for the ones it still needs, rejected ones taken and discarded), each prepare_batch "
    "starting when the version before it was announced"
)
ASSUMED_VERSIONS: Final = (
    "versions: each step's version is announced just before the first train session whose "
    "own first token is under it was submitted (version_rle), else at the earliest time the "
    "samples allow (after its batch, and after the submission of every session with a "
    "token under an older version: the trainer's time is then 0); every session in flight "
    "then is interrupted and resumed under it, with its tokens so far from version_rle, "
    "else (no version_rle) all of them where its task's tail_version is older, else in "
    "proportion to its generate time"
)


@attrs.frozen
class Result:
    """A train task's result as `wait_results` sees it."""

    task: int
    created: float  # its first session's submit_ts (AReaL's create_time)
    arrived: float  # its last session's end
    accepted: bool


@attrs.frozen
class Step:
    """A step as the trainer ran it: its batch, when it was prepared, its version's time."""

    step: int
    tasks: tuple[int, ...]  # the accepted results it trained
    shipped: float
    announced: float  # when version `step` was announced


@attrs.frozen
class Bound:
    """What one sample says of version times: versions newer than `before` came after
    `submitted`; versions up to `tail` came before `ended`."""

    before: int
    own: bool  # `before` is the sample's own first version (version_rle), not its task's tail
    train: bool
    submitted: float
    tail: int
    ended: float
    where: str


def results(members: Mapping[tuple[str, int], list[Session]]) -> list[Result]:
    """The train tasks whose sessions all ended: what `wait_results` collects."""
    found = []
    for (work, task), group in members.items():
        ends = [s.end for s in group]
        if work != "train" or None in ends:
            continue
        arrived = max(e for e in ends if e is not None)
        accepted = any(s.status == "accepted" for s in group)
        found.append(Result(task, min(s.submit for s in group), arrived, accepted))
    return found


def bounds(members: Iterable[list[Session]], samples: Mapping[Session, Sample]) -> list[Bound]:
    """Each sample's bounds on version times. With `version_rle` (PR #1350) its own head
    and tail bound its own session; without, `head_version` is the prompt's -1 and
    `tail_version` the task's, so its tail bounds the task's last end."""
    found = []
    for group in members:
        mine = [(s, samples[s]) for s in group if s in samples]
        last = max((s.end for s, _ in mine if s.end is not None), default=0.0)
        for session, sample in mine:
            own = sample.rle is not None
            before = sample.head if own else sample.tail
            ended = session.end if own and session.end is not None else last
            bound = Bound(
                before,
                own,
                session.work == "train",
                session.submit,
                sample.tail,
                ended,
                sample.where,
            )
            found.append(bound)
    return found


def trainer_steps(found: list[Result], batch: int, start: float, limits: list[Bound]) -> list[Step]:
    """Every step whose batch the results fill, in order, with its version's time."""
    steps: list[Step] = []
    taken: set[int] = set()
    prepared_from = start
    while True:
        prepared = _prepare_batch(found, taken, batch, prepared_from)
        if prepared is None:
            return steps
        shipped, tasks = prepared
        step = len(steps) + 1
        announced = _version_time(step, shipped, limits)
        steps.append(Step(step, tasks, shipped, announced))
        prepared_from = announced


def _prepare_batch(
    found: list[Result], taken: set[int], batch: int, start: float
) -> tuple[float, tuple[int, ...]] | None:
    """When `prepare_batch` called at `start` returns, and the accepted tasks it returns;
    None when the results run out first. `taken` gains every result it consumed."""
    accepted: list[int] = []
    now = start
    while len(accepted) < batch:
        need = batch - len(accepted)
        waiting = sorted((r for r in found if r.task not in taken), key=lambda r: r.arrived)
        if len(waiting) < need:
            return None
        now = max(now, waiting[need - 1].arrived)
        arrived = [r for r in waiting if r.arrived <= now]
        for result in sorted(arrived, key=lambda r: r.created)[:need]:
            taken.add(result.task)
            if result.accepted:
                accepted.append(result.task)
    return now, tuple(accepted)


def _version_time(version: int, shipped: float, limits: list[Bound]) -> float:
    """When `version` was announced: just before the first submission of a train session
    whose own first token is under it (`version_rle`), where that fits; else the earliest
    time the samples allow. Refused where a sample says it came earlier still."""
    at = max([shipped, *(b.submitted for b in limits if b.before < version)])
    ended = [b for b in limits if b.tail >= version]
    for bound in ended:
        if bound.ended <= at:
            raise ForeignRunError(
                f"{bound.where}: tail_version: {bound.tail}, but version {version} can come "
                f"only {at - bound.ended:.3f}s after this sample ended (its batch, or a "
                f"session generating under an older version, came later)"
            )
    first = [b.submitted for b in limits if b.own and b.train and b.before == version]
    latest = min(first, default=at)
    if at < latest < min(b.ended for b in ended):
        return math.nextafter(latest, -math.inf)  # its dispatch goes out under `version`
    return at


def tokens_before(session: Session, sample: Sample | None, version: int, at: float) -> int:
    """The completion tokens `session` had generated when `version` was announced at `at`."""
    if sample is None:
        return 0
    if sample.rle is not None:
        return sum(n for v, n in sample.rle if v < version)
    if sample.tail < version or session.generated is None:
        return sample.completion
    start, end = session.generated
    share = 1.0 if end <= start else (at - start) / (end - start)
    return int(sample.completion * min(1.0, max(0.0, share)))
