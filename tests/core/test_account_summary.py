"""The run summary (`replay --json`) recounted from the log alone, on every generated log.

The account keeps its counts incrementally as events arrive; this recount reads the whole
log at once with its own bookkeeping (which episodes are in flight, each one's dispatch
version, its own rollout age), so a count the account keeps wrong cannot also be wrong here.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import given

from rolloutlog.events.jsonl import read_jsonl
from rolloutlog.events.types import (
    ALWAYS_CANCEL_REASONS,
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodeInterrupted,
    EpisodeResumed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    RunFinished,
    RunStarted,
    VersionPending,
)
from rolloutlog.replay.fold import fold_events
from rolloutlog.testing.strategies import run_configs, world_logs


def _waits(log: list[Event]) -> dict[str, Any]:
    """Ship waits recounted (contract.md, "Ship wait"): a wait of batch `s` starts at the
    first event after which it is full, its hold lifted and the run not finished, while a
    train group not yet scored and not frozen holds a dispatched, uncancelled member at age
    >= the bound; it ends at `batch_shipped`. Reported only under `ship_wait`."""
    config = log[0].config  # type: ignore[union-attr]
    if config.get("ship_wait", "none") == "none":
        return {}
    bound, size, tokens = (
        config[k] for k in ("max_off_policy_steps", "batch_size", "token_batch_size")
    )
    # gate_lag "none" (PipelineRL's): no ship hold at all, however far the trainer lags
    lags = {"one": 1, "zero": 0, "none": math.inf}
    lag = lags.get(config.get("gate_lag", ""), config["target_lag"])
    lag += config.get("updates_per_sync", 1) - 1  # a version comes every K batches
    step, version, waits, seconds, since, finished = 1, 0, 0, 0.0, None, False
    open_members: dict[str, dict[str, int]] = {}  # train group, not frozen -> id -> version
    held: dict[str, int] = {}  # tokens of every arrival
    queue: dict[str, int] = {}
    for event in log:
        match event:
            case GroupOpened() if event.work == "train" and not event.frozen:
                open_members[event.group_id] = {}
            case EpisodeDispatched() if event.group_id in open_members:
                open_members[event.group_id][event.episode_id] = event.policy_version
            case EpisodesCancelled() if event.group_id in open_members:
                for episode_id in event.episode_ids:
                    open_members[event.group_id].pop(episode_id, None)
            case EpisodeCompleted():
                held[event.episode_id] = event.prompt_tokens + event.completion_tokens
            case GroupScored():
                open_members.pop(event.group_id, None)
                if event.admitted:
                    queue.update({e: held.get(e, 0) for e in event.episode_ids})
            case EpisodeDropped():
                queue.pop(event.episode_id, None)
            case BatchShipped():
                if since is not None:
                    waits, seconds, since = waits + 1, seconds + event.t - since, None
                for episode_id in event.episode_ids:
                    queue.pop(episode_id, None)
                step = event.step + 1
            case VersionPending():
                version = event.version
            case RunFinished():
                finished = True
        full = len(queue) >= size if size is not None else sum(queue.values()) >= tokens
        last_chance = any(
            step - 1 - v >= bound for members in open_members.values() for v in members.values()
        )
        if since is None and full and not finished and step - 1 - version <= lag and last_chance:
            since = event.t
    return {"ship_waits": waits, "ship_wait_seconds": round(seconds, 6)}


def _recount(log: list[Event]) -> dict[str, Any]:
    """What the summary should say, from the whole log."""
    kinds = Counter(event.kind for event in log)
    size: dict[str, int] = {}
    train: dict[str, bool] = {}
    stamp: dict[str, int] = {}
    in_flight: set[str] = set()
    cancelled = dict.fromkeys(ALWAYS_CANCEL_REASONS, 0)  # `redundant` only where it occurs
    scored = partial = admitted = late = unscheduled = trained = pruned = 0
    ages: Counter[int] = Counter()
    frozen: dict[str, bool] = {}
    finished, bound, past_bound = None, 0, 0
    owed: list[str] = []  # groups discarded for requeue whose task no group took yet
    requeue_seen: set[str] = set()
    requeued = 0
    task_of: dict[str, tuple[str, str]] = {}
    behind, ahead = False, 0  # tinker's builder queue: the requeue after `ahead` openings
    since: dict[str, int] = {}  # owed -> train groups opened since its discard
    withholds, withheld, withheld_tokens = False, 0, 0
    tokens: dict[str, int] = {}
    resumed: dict[str, int] = {}  # in flight, resumed: the version of its last segment
    spans: dict[str, int] = {}  # arrived resumed episodes: end − start
    partial_spans: list[int] = []  # the spans of the trained resumed episodes
    segmenting = masking = False
    cut_at: dict[str, int] = {}  # interrupted, not yet resumed: its completion tokens so far
    pieces: dict[str, list[tuple[int, int]]] = {}  # in flight: (version, tokens so far) a piece
    generated: dict[str, list[tuple[int, int]]] = {}  # arrived: (version, tokens) per segment
    token_ages: Counter[int] = Counter()
    tokens_trained = tokens_masked = 0
    for event in log:
        match event:
            case RunStarted():
                bound = event.config["max_off_policy_steps"]
                withholds = event.config.get("stale_member") == "withhold"
                segmenting = event.config.get("weight_update") == "interrupt"
                segmenting = segmenting or bool(event.config.get("recycle"))
                masking = event.config.get("stale_tokens") == "mask"
                behind = event.config.get("requeue_order") == "behind-fresh"
                per_batch = event.config.get("batch_size") or event.config["group_size"]
                ahead = max(1, per_batch // event.config["group_size"]) + 1
            case GroupOpened():
                size[event.group_id] = event.group_size
                train[event.group_id] = event.work == "train"
                frozen[event.group_id] = event.frozen
                task_of[event.group_id] = (event.task_id, event.env)
                takes = not behind or (
                    owed and task_of[owed[0]] == task_of[event.group_id] and since[owed[0]] >= ahead
                )
                if event.work == "train" and owed and takes:
                    owed.pop(0)
                    requeued += 1
                if event.work == "train":
                    since.update((g, since[g] + 1) for g in owed)
            case EpisodeDropped(reason="requeue"):
                group_id = event.episode_id.rpartition("/")[0]
                if group_id not in owed and group_id not in requeue_seen:
                    requeue_seen.add(group_id)
                    owed.append(group_id)
                    since[group_id] = 0
            case EpisodeDropped(reason="withheld"):
                withheld += 1
                withheld_tokens += tokens[event.episode_id]
            case EpisodeDispatched():
                stamp[event.episode_id] = event.policy_version
                in_flight.add(event.episode_id)
                pieces[event.episode_id] = [(event.policy_version, 0)]
            case EpisodeInterrupted() if event.episode_id in in_flight:
                cut_at[event.episode_id] = event.completion_tokens
            case EpisodeResumed() if event.episode_id in in_flight:
                resumed[event.episode_id] = event.policy_version
                pieces[event.episode_id].append(
                    (event.policy_version, cut_at.pop(event.episode_id))
                )
            case EpisodeCompleted() | EpisodeFailed():
                if isinstance(event, EpisodeCompleted) and event.episode_id in in_flight:
                    tokens[event.episode_id] = event.prompt_tokens + event.completion_tokens
                    starts = pieces[event.episode_id]  # (version, tokens before it) a segment
                    ends = [n for _, n in starts[1:]] + [event.completion_tokens]
                    generated[event.episode_id] = [
                        (version, end - begun)
                        for (version, begun), end in zip(starts, ends, strict=True)
                    ]
                if event.episode_id in in_flight and event.episode_id in resumed:
                    end = resumed.pop(event.episode_id)
                    spans[event.episode_id] = end - stamp[event.episode_id]
                if event.episode_id in in_flight:
                    in_flight.remove(event.episode_id)
                else:
                    late += 1
            case EpisodesCancelled():
                in_flight.difference_update(event.episode_ids)
                for episode_id in event.episode_ids:
                    resumed.pop(episode_id, None)
                cancelled[event.reason] = cancelled.get(event.reason, 0) + len(event.episode_ids)
                unscheduled += event.unscheduled
            case GroupScored() if train[event.group_id]:
                scored += len(event.episode_ids)
                partial += len(event.episode_ids) < size[event.group_id]
                admitted += event.admitted
            case BatchShipped():
                trained += len(event.trained_ids)
                tokens_trained += event.tokens
                for e in event.trained_ids:
                    for version, n in generated.get(e, ()):
                        token_ages[max(0, event.step - 1 - version)] += n
                        old = event.step - 1 - version > bound and not frozen[e.rpartition("/")[0]]
                        tokens_masked += n if masking and old else 0
                partial_spans += [spans[e] for e in event.trained_ids if e in spans]
                pruned += len(event.episode_ids) - len(event.trained_ids)
                # the batch for step s trains on policy s - 1; an episode's age is how many
                # versions that is past the one it was dispatched at
                ages.update(event.step - 1 - stamp[e] for e in event.trained_ids)
                past_bound += sum(
                    event.step - 1 - stamp[e] > bound and not frozen[e.rpartition("/")[0]]
                    for e in event.trained_ids
                )
            case RunFinished():
                finished = event.reason
    drops = Counter(e.reason for e in log if isinstance(e, EpisodeDropped))
    # slime's abort: reported only by a run that aborted leftovers
    leftovers = (
        {"episodes_dropped_leftover": drops["leftover"]}
        if "leftover" in cancelled or drops["leftover"]
        else {}
    )
    return {
        "events": len(log),
        "steps_shipped": kinds["batch_shipped"],
        "groups_opened": kinds["group_opened"],
        "groups_finalized": kinds["group_scored"],
        "groups_partial": partial,
        "groups_admitted": admitted,
        "groups_requeued": requeued,
        **(
            {"episodes_withheld": withheld, "tokens_withheld": withheld_tokens} if withholds else {}
        ),
        "episodes_dispatched": kinds["episode_dispatched"],
        "episodes_completed": kinds["episode_completed"],
        "episodes_failed": kinds["episode_failed"],
        "episodes_late": late,
        "episodes_cancelled": cancelled,
        "unscheduled_cancelled": unscheduled,
        "episodes_dropped_stale": drops.total() - drops["leftover"] - drops["evicted"],
        "episodes_evicted": drops["evicted"],
        "episodes_scored": scored,
        "episodes_trained": trained,
        "episodes_pruned_zero_adv": pruned,
        "max_trained_age": max(ages) if ages else None,
        "mean_trained_age": sum(a * n for a, n in ages.items()) / trained if trained else None,
        "trained_age_histogram": {str(a): ages[a] for a in sorted(ages)},
        "episodes_trained_past_bound": past_bound,
        "episodes_interrupted": kinds["episode_interrupted"],
        "partial_ratio": len(partial_spans) / trained if trained else None,
        "largest_version_span": max(partial_spans, default=0),
        **(
            {"trained_token_age_histogram": {str(a): token_ages[a] for a in sorted(token_ages)}}
            if segmenting
            else {}
        ),
        **(
            {
                "tokens_trained_gradient": tokens_trained - tokens_masked,
                "tokens_trained_masked": tokens_masked,
            }
            if masking
            else {}
        ),
        "run_finished": finished,
        "restarts": kinds["run_resumed"],
        "invariant_violations": [],
        **_waits(log),
        **leftovers,
    }


def _recounts(log: list[Event]) -> None:
    result = fold_events(log)
    assert result.error is None and result.fold is not None
    assert result.fold.summary() == _recount(log)


@given(world_logs())
def test_the_summary_recounts_the_log(log: list[Event]) -> None:
    _recounts(log)


@given(world_logs(restarts=True))
def test_the_summary_recounts_a_log_across_a_restart(log: list[Event]) -> None:
    _recounts(log)


@given(world_logs(run_configs(ship_wait="last-chance")))
def test_the_summary_recounts_the_ship_waits(log: list[Event]) -> None:
    """The last-chance wait is a tenth of `run_configs`' draws, and a run waits more than
    once in fewer still: worlds of its own, so that every wait's seconds are summed."""
    _recounts(log)


def test_a_dispatch_past_the_bound_starts_the_wait() -> None:
    """Found by the ci profile (per-episode, bound 0, two updates per sync): g4/0 was
    dispatched at v0 for step 2, age 1, past its last chance already; the account started
    the wait only on a dispatch at age exactly the bound, and counted 0 s of the sink's 7 s."""
    data = Path(__file__).parent / "data" / "ship_wait_past_bound_dispatch.jsonl"
    with data.open() as lines:
        log = list(read_jsonl(lines))
    _recounts(log)


def test_without_a_hold_a_full_batch_waits_however_far_the_trainer_lags() -> None:
    """Found by the ci profile (gate_lag none, PipelineRL's: no gate and no ship hold; a
    last-chance ship wait): at t 7 batch 3 is full while g4/0 is at its last chance, two
    steps past the v0 it carries; the sink waits 4.5 s for it. The recount read the lag of
    `target_lag` (0) as a hold, and counted no wait."""
    data = Path(__file__).parent / "data" / "ship_wait_without_a_hold.jsonl"
    with data.open() as lines:
        log = list(read_jsonl(lines))
    _recounts(log)
    assert fold_events(log).fold.summary()["ship_wait_seconds"] == 4.5  # type: ignore[union-attr]
