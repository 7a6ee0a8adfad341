"""What the live driver remembers about groups and episodes, and for exactly how long.

The log holds the facts; the trainer needs more than the log: each trained episode's
prompt, completion tokens and inference logprobs. `EpisodeBook` keeps that data from the
moment a generation finishes until the episode's fate is final — trained or pruned
(`batch_shipped`), dropped as stale (`episode_dropped`), or left out of training by its
group's scoring (`group_scored`) — and then forgets it, so memory stays bounded by what
the deciders themselves hold (episodes in flight plus the sink's queue).

It is plain bookkeeping, with no clock and no I/O: the driver turns its answers into
world events and HTTP calls.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Final, TypeAlias

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.core.staleness import is_stale
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
)
from rolloutlog.runtime.live.digits import DigitTask, reward, task_from_id
from rolloutlog.runtime.live.partial import JoinedGeneration, PartialGeneration, policy_version
from rolloutlog.runtime.live.protocol import GenerateRequest, Generation, SamplingParams

ROLLOUTS_KEPT_MAX: Final = 1 << 20  # far above any sane queue; past it, data leaks
SEED_MASK: Final = (1 << 63) - 1  # vLLM and the CPU server take seeds that fit in int64
# A generate call's answer: as inference sent it, or (interrupt mode) as `partial` joined it.
Answer: TypeAlias = Generation | PartialGeneration | JoinedGeneration


@attrs.frozen(kw_only=True)
class TrainSample:
    """One episode as the trainer needs it; `inference_logprobs` has one entry per token,
    each from the weights that sampled it. `gradient_mask` (None: every token) says which
    tokens carry gradient, when tokens of old versions are masked (`partial.gradient_mask`).
    `token_versions` (None: not recorded per token, as under `weight_update = freeze`) is
    the policy version that sampled each token, across an interrupted episode's segments."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    inference_logprobs: tuple[float, ...]
    advantage: float
    gradient_mask: tuple[bool, ...] | None = None
    token_versions: tuple[int, ...] | None = None

    def __attrs_post_init__(self) -> None:
        if not self.prompt_ids or not self.completion_ids:
            raise ValueError("a train sample needs a prompt and at least one completion token")
        for name, values in (
            ("inference logprobs", self.inference_logprobs),
            ("gradient mask entries", self.gradient_mask),
            ("token versions", self.token_versions),
        ):
            if values is not None and len(values) != len(self.completion_ids):
                raise ValueError(
                    f"{len(values)} {name} for {len(self.completion_ids)} completion tokens"
                )


class BookError(RuntimeError):
    """The driver's bookkeeping and the deciders disagree: a bug, named with its ids."""


@attrs.frozen(kw_only=True)
class Rollout:
    """A finished generation whose fate is not yet final."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    reward: float
    version: int  # its dispatch version: its rollout age follows from the step it ships in
    advantage: float | None = None
    token_versions: tuple[int, ...] | None = None  # per token, where inference labelled them


@attrs.frozen(kw_only=True)
class ShippedBatch:
    """What the trainer gets for one step, and the rewards the progress display shows."""

    step: int
    samples: tuple[TrainSample, ...]
    versions: tuple[int, ...]  # the dispatch version of each sample
    mean_reward: float | None  # over every episode cut into the batch, pruned ones included
    restored: bool = False  # a resumed run's checkpoint: trained before the crash, announced


@attrs.define(kw_only=True)
class _Group:
    task: DigitTask
    cache_salt: str
    size: int  # G, then every member dispatched (G + r under `group_redundancy`)


def episode_seed(run_seed: int, episode_id: str) -> int:
    """The sampling seed of one episode: a hash of the run seed and its id, so a rerun of
    the same seed samples the same tokens for the same episode wherever it is placed."""
    digest = hashlib.sha256(f"{run_seed}:{episode_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & SEED_MASK


def request_id(prefix: str, episode_id: str) -> str:
    """A request id vLLM accepts everywhere (no `/`), unique per run thanks to `prefix`."""
    return f"{prefix}{episode_id.replace('/', '-')}"


class EpisodeBook:
    """Group tasks, cancelled ids and finished rollouts, each forgotten once final."""

    def __init__(
        self,
        *,
        run_seed: int,
        temperature: float,
        request_prefix: str,
        hard_task_share: float = 0.0,
    ) -> None:
        self.run_seed = run_seed
        self.temperature = temperature
        self.hard_task_share = hard_task_share  # digits.task_from_id's hard tail
        self.request_prefix = request_prefix
        self._groups: dict[str, _Group] = {}
        self._cancelled: dict[str, DigitTask] = {}  # a late completion is still scored
        self._rollouts: dict[str, Rollout] = {}
        self.mask_past: int | None = None  # `stale_tokens = mask`: the bound, else None

    @property
    def rollouts_kept(self) -> int:
        return len(self._rollouts)

    @property
    def groups_open(self) -> int:
        return len(self._groups)

    # ---- the dispatcher's decisions ----------------------------------------------------
    def group_opened(self, event: GroupOpened) -> None:
        """Remember the group's task and its prefix-cache salt (its start version)."""
        self._groups[event.group_id] = _Group(
            task=task_from_id(event.task_id, self.hard_task_share),
            cache_salt=f"v{event.policy_version}",
            size=event.group_size,
        )

    def request(self, event: EpisodeDispatched) -> GenerateRequest:
        """The generate call for a dispatched episode."""
        group = self._group(event.group_id, event.episode_id)
        group.size = max(group.size, event.member + 1)
        sampling = SamplingParams(
            max_tokens=group.task.max_tokens,
            temperature=self.temperature,
            seed=episode_seed(self.run_seed, event.episode_id),
            logprobs=0,  # the sampled token's logprob only: what the importance ratio needs
        )
        return GenerateRequest(
            request_id=request_id(self.request_prefix, event.episode_id),
            token_ids=tuple(group.task.prompt_ids),
            sampling=sampling,
            cache_salt=group.cache_salt,
        )

    def cancelled(self, group_id: str, episode_ids: Iterable[str]) -> None:
        """The dispatcher cancelled these in-flight episodes; the driver aborts them.

        Their group may finalize before their answers come back, so each keeps its task:
        a natural completion that raced the abort is recorded with its true reward.
        """
        for episode_id in episode_ids:
            self._cancelled[episode_id] = self._group(group_id, episode_id).task

    def is_cancelled(self, episode_id: str) -> bool:
        return episode_id in self._cancelled

    def forget_if_cancelled(self, episode_id: str) -> bool:
        """True (and forgotten) if the episode was cancelled before its request was sent."""
        if episode_id not in self._cancelled:
            return False
        del self._cancelled[episode_id]
        return True

    def request_ids(self, episode_ids: Iterable[str]) -> list[str]:
        """The request ids under which these episodes were sent (for aborts)."""
        return [request_id(self.request_prefix, episode_id) for episode_id in episode_ids]

    # ---- inference's answers -----------------------------------------------------------
    def arrived(
        self, dispatched: EpisodeDispatched, generation: Answer, t: float
    ) -> EpisodeCompleted | EpisodeFailed | None:
        """The world event for a finished generate call, or None when there is none to record.

        An abort the dispatcher asked for is already accounted by its cancellation: nothing
        is recorded. An abort nobody asked for (a server pausing in abort mode, shutting
        down) is a failure. A natural completion is recorded even if the episode was
        cancelled meanwhile (it raced the abort): the deciders take it as a late event, and
        its data is not kept, since a late episode never trains. Under `weight_update =
        interrupt` the answer is a `partial` one: a `PartialGeneration` is an abort, and a
        `JoinedGeneration` keeps the version of each of its tokens.
        """
        episode_id = dispatched.episode_id
        late_task = self._cancelled.pop(episode_id, None)
        aborted = isinstance(generation, Generation) and generation.aborted
        if aborted or isinstance(generation, PartialGeneration):
            if late_task is not None:
                return None
            return EpisodeFailed(t=t, episode_id=episode_id, error="aborted by inference")
        task = late_task or self._group(dispatched.group_id, episode_id).task
        logprobs = generation.logprobs
        if logprobs is None or not generation.token_ids:
            problem = "no logprobs" if logprobs is None else "no tokens"
            return EpisodeFailed(t=t, episode_id=episode_id, error=f"inference returned {problem}")
        if isinstance(generation, JoinedGeneration):
            versions = tuple(policy_version(label) for label in generation.token_versions)
            prompt_tokens = len(generation.request.token_ids)
            completion_tokens = len(generation.token_ids)
        else:
            versions = None
            prompt_tokens = generation.prompt_tokens
            completion_tokens = generation.completion_tokens
        score = reward(task, generation.token_ids)
        if late_task is None:
            self._keep(
                episode_id,
                Rollout(
                    prompt_ids=tuple(task.prompt_ids),
                    completion_ids=generation.token_ids,
                    logprobs=logprobs,
                    reward=score,
                    version=dispatched.policy_version,
                    token_versions=versions,
                ),
            )
        return EpisodeCompleted(
            t=t,
            episode_id=episode_id,
            reward=score,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )

    def kept(self, episode_id: str) -> Rollout | None:
        """The rollout kept for an episode whose fate is not final yet, if any."""
        return self._rollouts.get(episode_id)

    def restore(self, event: EpisodeCompleted, rollout: Rollout | None) -> None:
        """Resuming: a recorded completion, with its rollout from the store.

        A late completion (it raced its cancellation) was never kept, so it needs none.
        """
        if self._cancelled.pop(event.episode_id, None) is not None:
            return
        if rollout is None:
            raise BookError(f"{event.episode_id} completed, but its rollout was never stored")
        self._keep(event.episode_id, rollout)

    def forget_cancelled(self) -> None:
        """Resuming: answers to the dead driver's cancelled requests will never come."""
        self._cancelled.clear()

    def failed(self, episode_id: str, error: str, t: float) -> EpisodeFailed:
        """The world event for a generate call that raised (timeout, lost endpoint, ...)."""
        self._cancelled.pop(episode_id, None)
        return EpisodeFailed(t=t, episode_id=episode_id, error=error or "unknown error")

    # ---- the sink's decisions ----------------------------------------------------------
    def dropped(self, episode_id: str) -> None:
        self._rollouts.pop(episode_id, None)

    def scored(self, event: GroupScored) -> None:
        """Keep the advantages of an admitted group; forget everything else of the group."""
        group = self._groups.pop(event.group_id, None)
        if group is None:
            raise BookError(f"{event.group_id} was scored but never opened")
        if event.admitted and len(event.advantages) != len(event.episode_ids):
            raise BookError(
                f"{event.group_id}: {len(event.advantages)} advantages for "
                f"{len(event.episode_ids)} episodes"
            )
        scored = dict(zip(event.episode_ids, event.advantages, strict=False))
        for member in range(group.size):
            episode_id = f"{event.group_id}/{member}"
            rollout = self._rollouts.get(episode_id)
            if rollout is None:
                continue
            if event.admitted and episode_id in scored:
                self._rollouts[episode_id] = attrs.evolve(rollout, advantage=scored[episode_id])
            else:
                del self._rollouts[episode_id]

    def shipped(self, event: BatchShipped) -> ShippedBatch:
        """The trainer's samples for a shipped batch; every cut episode is then forgotten."""
        trained = set(event.trained_ids)
        samples, versions, rewards = [], [], []
        for episode_id in event.episode_ids:
            rollout = self._rollouts.pop(episode_id, None)
            if rollout is None or (episode_id in trained and rollout.advantage is None):
                raise BookError(f"batch {event.step} ships {episode_id}, which has no rollout")
            rewards.append(rollout.reward)
            if episode_id in trained and rollout.advantage is not None:
                samples.append(
                    TrainSample(
                        prompt_ids=rollout.prompt_ids,
                        completion_ids=rollout.completion_ids,
                        inference_logprobs=rollout.logprobs,
                        advantage=rollout.advantage,
                        token_versions=rollout.token_versions,
                        gradient_mask=self._carries(rollout, event.step),
                    )
                )
                versions.append(rollout.version)
        mean = sum(rewards) / len(rewards) if rewards else None
        return ShippedBatch(
            step=event.step, samples=tuple(samples), versions=tuple(versions), mean_reward=mean
        )

    def _carries(self, rollout: Rollout, step: int) -> tuple[bool, ...] | None:
        """Under `stale_tokens = mask`, which completion tokens carry gradient in batch
        `step`: those sampled at most the bound before the version it trains on (`step −
        1`), as the sink counted `masked_tokens`; None when all do."""
        if self.mask_past is None:
            return None
        versions = rollout.token_versions or (rollout.version,) * len(rollout.completion_ids)
        bound = self.mask_past
        carries = tuple(
            not is_stale(version, step, bound, train=True, frozen=False) for version in versions
        )
        return None if all(carries) else carries

    def decided(self, event: Event) -> ShippedBatch | None:
        """What a decided event does to the book, written once for the driver (as it
        records the event) and the resume (as it folds the log): the shipped batch of a
        `batch_shipped`, else None. A restart's cancellation leaves the book alone: it
        cancels what the dead driver had sent, which this book never held."""
        match event:
            case GroupOpened():
                self.group_opened(event)
            case EpisodesCancelled(reason=reason) if reason != "restart":
                self.cancelled(event.group_id, event.episode_ids)
            case EpisodeDropped():
                self.dropped(event.episode_id)
            case GroupScored():
                self.scored(event)
            case BatchShipped():
                return self.shipped(event)
            case _:
                pass
        return None

    # ---- helpers -----------------------------------------------------------------------
    def _group(self, group_id: str, episode_id: str) -> _Group:
        group = self._groups.get(group_id)
        if group is None:
            raise BookError(f"{episode_id}: its group {group_id} is not open")
        return group

    def _keep(self, episode_id: str, rollout: Rollout) -> None:
        if len(self._rollouts) >= ROLLOUTS_KEPT_MAX:
            raise BookError(
                f"{len(self._rollouts)} rollouts kept: their fates never become final "
                "(a bookkeeping leak)"
            )
        self._rollouts[episode_id] = rollout


def masked_past(config: RunConfig) -> int | None:
    """The bound past which a trained token carries no gradient (`stale_tokens = mask`), or
    None when every trained token does."""
    return config.max_off_policy_steps if config.stale_tokens == "mask" else None
