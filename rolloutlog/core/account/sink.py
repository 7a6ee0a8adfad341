"""The account's flows of the sink's events: drops, scoring and batches.

Each checks the event against the shared books (the queue, open groups, step and version)
with the account's own arithmetic (`core.account.groups`): a drop's recorded age and
staleness, a scoring's fresh members and GRPO advantages, a batch's step, hold, bound and
tokens; and feeds the checks of the run's rules at their points (`core.account.checks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from rolloutlog.core.account.books import Books
from rolloutlog.core.account.checks import Checks
from rolloutlog.core.account.groups import Group, advantages, age, past_bound
from rolloutlog.core.account.properties import HARD_BOUND
from rolloutlog.events.types import DROP_REASONS

# How far recorded advantages may sit from GRPO over the scored rewards.
ADVANTAGE_TOLERANCE: Final = 1e-9


def dropped(
    books: Books, checks: Checks, seq: int, episode_id: str, reason: str, recorded_age: int
) -> None:
    """`episode_dropped`: of a queued episode or an open group's arrival, at its true age,
    and stale unless a rule's own reason says otherwise."""
    kind = "episode_dropped"
    if checks.dropping:
        for hook in checks.dropping:
            hook(seq, episode_id, reason)
    if reason == "evicted":  # a bounded queue's, of any age (`core.account.eviction`)
        return checks.eviction.evicted(seq, episode_id, recorded_age)
    queued = books.queue.pop(episode_id, None)
    group = None
    if queued is not None:
        version, ages, _ = queued
    else:
        group = books.groups.get(episode_id.rpartition("/")[0])
        arrival = group.arrived.get(episode_id) if group is not None else None
        if group is None or arrival is None or episode_id in group.dropped:
            problem = f"{episode_id} dropped but neither queued nor arrived"
            return books.fail(seq, kind, problem)
        group.dropped.add(episode_id)
        version, ages = arrival[1], group.train and not group.frozen
    actual = age(version, books.step)
    if checks.dropped:
        for hook in checks.dropped:
            hook(seq, episode_id, reason, ages)
    if reason not in DROP_REASONS or recorded_age != actual:
        books.fail(seq, kind, f"recorded age {recorded_age}, actual age {actual}")
    if reason == "leftover":
        return checks.leftovers.dropped_leftover(seq, episode_id, group)
    books.run.dropped_stale += 1
    if reason == "requeue":
        checks.requeue.dropped_requeue(seq, episode_id, group, queued is not None)
    if reason == "withheld" or checks.withholding:
        checks.withhold.drop(seq, episode_id, reason, group)
    if not past_bound(ages, version, books.step, books.bound):
        books.fail(seq, kind, f"{episode_id} is not stale")
    return None


def scored(
    books: Books,
    checks: Checks,
    seq: int,
    group_id: str,
    episode_ids: Sequence[str],
    scored_advantages: Sequence[float],
    admitted: bool,
) -> None:
    """`group_scored`: a group that accounts for all its members, scoring exactly its fresh
    successful arrivals with GRPO advantages; the admitted join the queue."""
    kind = "group_scored"
    for hook in checks.scoring:
        hook(seq)
    group = books.groups.pop(group_id, None)
    if group is None:
        return books.fail(seq, kind, f"{group_id} finalized twice or never opened")
    for hook in checks.room:
        hook(seq, len(episode_ids) if admitted and group.train else 0)
    if group.owes or len(group.arrived) + group.cancelled != books.members(group):
        problem = f"finalized with {len(group.arrived)} arrived + {group.cancelled} cancelled"
        return books.fail(seq, kind, f"{problem} != G+r={books.members(group)}")
    if group.requeue:
        checks.requeue.whole(seq, group_id, group)
    for hook in checks.finalized:
        hook(seq, group_id, group, episode_ids, admitted)
    fresh = sorted(
        (member, episode_id, reward)
        for episode_id, (member, _, reward, _) in group.arrived.items()
        if reward is not None and episode_id not in group.dropped
    )
    fresh_ids = [episode_id for _, episode_id, _ in fresh]
    if list(episode_ids) != fresh_ids:
        return books.fail(seq, kind, f"scored {list(episode_ids)}, fresh are {fresh_ids}")
    if not group.train:
        if scored_advantages or admitted:
            books.fail(seq, kind, "eval group trained")
        return None
    _score_train(books, seq, group, episode_ids, scored_advantages, admitted, fresh)
    for hook in checks.scored:
        hook(seq, group, episode_ids, admitted)
    return None


def _score_train(
    books: Books,
    seq: int,
    group: Group,
    episode_ids: Sequence[str],
    scored_advantages: Sequence[float],
    admitted: bool,
    fresh: list[tuple[int, str, float]],
) -> None:
    """A train group's scores: counted, GRPO over its fresh rewards; the admitted queued."""
    kind, run = "group_scored", books.run
    run.scored += len(episode_ids)
    run.partial += len(episode_ids) < group.size
    run.admitted_groups += admitted
    if admitted and not episode_ids:
        books.fail(seq, kind, "admits a group with no scored member")
    expected = advantages([reward for _, _, reward in fresh])
    if len(scored_advantages) != len(expected) or not all(
        abs(a - b) <= ADVANTAGE_TOLERANCE for a, b in zip(scored_advantages, expected, strict=True)
    ):  # a NaN fails this comparison too
        books.fail(seq, kind, f"advantages {list(scored_advantages)} != GRPO {expected}")
    if admitted:
        for episode_id in episode_ids:
            _, version, _, tokens = group.arrived[episode_id]
            books.queue[episode_id] = (version, not group.frozen, tokens)


def shipped(
    books: Books,
    checks: Checks,
    seq: int,
    step: int,
    episode_ids: Sequence[str],
    trained_ids: Sequence[str],
    tokens: int,
    masked_tokens: int = 0,
) -> bool:
    """`batch_shipped`: of the step due, once the hold lifted, of queued episodes within
    the bound (where the run keeps it), training what it cut with the tokens they hold.
    False when the step is not the one due (nothing else is checked)."""
    kind, run = "batch_shipped", books.run
    for hook in checks.shipping:
        hook(seq, step, episode_ids, trained_ids)
    run.trained += len(trained_ids)
    run.pruned += len(episode_ids) - len(trained_ids)
    if step != books.step:
        books.fail(seq, kind, f"batch for step {step} at step {books.step}")
        return False
    if books.finished:
        books.fail(seq, kind, "batch shipped after run_finished")
    if books.gated:  # at this batch's step: the ship hold has not lifted
        books.fail(seq, kind, f"shipped at v{books.version}, before the ship hold lifts")
    for hook in checks.ships:
        hook(seq, step, episode_ids)
    cut = _cut(books, seq, step, episode_ids)
    if len(set(trained_ids)) != len(trained_ids) or not cut.keys() >= set(trained_ids):
        books.fail(seq, kind, "trains an episode it did not cut, or one twice")
    held = 0
    for episode_id in trained_ids:
        if episode_id in cut:
            version, episode_tokens, ages = cut[episode_id]
            stale = past_bound(ages, version, step, books.bound)
            run.trained_at(age(version, step), past_bound=stale)
            held += episode_tokens
    if tokens != held:
        books.fail(seq, kind, f"tokens {tokens}, but the trained episodes hold {held}")
    if checks.masks:
        checks.mask.shipped(seq, step, episode_ids, trained_ids, cut, masked_tokens, tokens)
    elif masked_tokens:
        books.fail(seq, kind, f"masks {masked_tokens} tokens; stale_tokens is drop")
    return True


def _cut(
    books: Books, seq: int, step: int, episode_ids: Sequence[str]
) -> dict[str, tuple[int, int, bool]]:
    """What a batch takes off the queue: id -> (version, tokens, ages); past the bound
    only where the run does not keep it."""
    cut: dict[str, tuple[int, int, bool]] = {}
    for episode_id in episode_ids:
        queued = books.queue.pop(episode_id, None)
        if queued is None:
            books.fail(seq, "batch_shipped", f"{episode_id} shipped but not queued (or twice)")
            continue
        version, ages, episode_tokens = queued
        if past_bound(ages, version, step, books.bound) and HARD_BOUND in books.kept:
            problem = f"{episode_id} shipped at age {age(version, step)}"
            books.fail(seq, "batch_shipped", problem)
        cut[episode_id] = (version, episode_tokens, ages)
    return cut
