"""A scripted world: turns a stream of small choices into valid world events for a loop.

Property tests and the equivalence harness need logs that are valid by construction, not
filtered: every choice is an index into what the loop currently allows (an in-flight
episode to complete, a cancelled one to arrive late, how far the trainer's version
jumps). The chooser is any `choose(n) -> int in [0, n)`: a hypothesis `data.draw`, or a
seeded `random.Random` for the simulator-free fuzz of benchmarks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    EpisodeCompleted,
    EpisodeFailed,
    EpisodeInterrupted,
    EpisodeResumed,
    Event,
    InterruptReason,
    LimitSet,
    OverloadCut,
    RunFinished,
    RunResumed,
    RunStarted,
    VersionLive,
    VersionPending,
)

Chooser = Callable[[int], int]

ACTIONS = (
    "complete",
    "complete_recent",
    "fail",
    "publish",
    "go_live",
    "limit",
    "overload",
    "late",
    "duplicate",
    "resume",
    "interrupt",
    "go_on",
)
# The newest in-flight episodes that `complete_recent` picks from: finishing young work
# first leaves old members in flight (stragglers), so groups span versions and go stale.
RECENT = 3
# Rewards from a small set, so that equal-reward groups (zero advantages) are common; 0.1 is
# not dyadic, so its mean carries a rounding residue that exact zeros must not show.
REWARDS = (0.0, 0.1, 0.25, 0.5, 1.0)
LATE_MEMORY = 64


class ScriptedWorld:
    """Drives a `ReactionLoop` with world events chosen by `choose`; records the log."""

    def __init__(
        self,
        loop: ReactionLoop,
        choose: Chooser,
        *,
        weights: dict[str, int] | None = None,
        single_version_groups: bool = False,
        prompt_trainer: bool | None = None,
        restarts: bool = False,
    ) -> None:
        self.loop, self.choose = loop, choose
        # Publish only while no group is part-dispatched, so every member of a group is
        # dispatched at one version: the condition under which the two policies agree.
        self.single_version_groups = single_version_groups
        self.weights = weights or {
            "complete": 4,
            "complete_recent": 12,
            "fail": 1,
            "publish": 6,
            "go_live": 1,
            "limit": 1,
            "overload": 1,
            "late": 1,
            "duplicate": 1,
            "resume": 1,
        }
        config = loop.config
        if weights is None and (config.weight_update != "freeze" or config.recycle):
            # Only where the run's rules interrupt: other worlds keep their choices.
            self.weights.update(interrupt=2, go_on=4)
        self.t = 0.0
        self.log: list[Event] = []
        self.recently_cancelled: deque[str] = deque(maxlen=LATE_MEMORY)
        self.recently_arrived: deque[str] = deque(maxlen=LATE_MEMORY)
        self.published = 0
        self.live_owed: int | None = None  # a version gone pending, not yet live
        self.resumed = not restarts  # with `restarts`, the driver dies once, at random
        # A prompt trainer publishes as soon as it has a batch: versions then move while
        # groups are part-dispatched, the case per-episode staleness is for. Unless told,
        # half the worlds have one.
        self.prompt_trainer = choose(2) == 0 if prompt_trainer is None else prompt_trainer
        self.tokens: dict[str, int] = {}  # interrupted episodes -> their tokens so far
        self._feed(
            RunStarted(
                t=0.0,
                config=config.to_dict(),
                seed=config.seed,
                schema_version=SCHEMA_VERSION,
                code_version="scripted",
            )
        )

    def _feed(self, event: Event) -> None:
        appended = self.loop.feed(event)
        for e in appended:
            if e.kind == "episodes_cancelled":
                self.recently_cancelled.extend(e.episode_ids)  # type: ignore[union-attr]
        self.log.extend(appended)

    def step(self) -> None:
        """Advance virtual time a little and apply one chosen world event (or nothing)."""
        self.t += (1 + self.choose(20)) / 4
        action = self._pick_action()
        getattr(self, f"_{action}")()
        if self.prompt_trainer and action != "publish":
            self._publish()

    def _pick_action(self) -> str:
        total = sum(self.weights.get(a, 0) for a in ACTIONS)
        pick = self.choose(total)
        for action in ACTIONS:
            pick -= self.weights.get(action, 0)
            if pick < 0:
                return action
        return ACTIONS[0]

    def _inflight(self) -> list[str]:
        return list(self.loop.dispatcher_state.inflight)

    def _generating(self) -> list[str]:
        """In-flight episodes not interrupted: the ones that may arrive."""
        interrupted = self.loop.dispatcher_state.partial.interrupted
        return [e for e in self.loop.dispatcher_state.inflight if e not in interrupted]

    def _complete(self, candidates: list[str] | None = None) -> None:
        inflight = self._generating() if candidates is None else candidates
        if inflight:
            episode_id = inflight[self.choose(len(inflight))]
            self.recently_arrived.append(episode_id)
            self._feed(self._completion(episode_id))

    def _completion(self, episode_id: str) -> EpisodeCompleted:
        return EpisodeCompleted(
            t=self.t,
            episode_id=episode_id,
            reward=REWARDS[self.choose(len(REWARDS))],
            prompt_tokens=8,
            completion_tokens=self.tokens.pop(episode_id, 0) + 1 + self.choose(64),
        )

    def _complete_recent(self) -> None:
        self._complete(self._generating()[-RECENT:])

    def _fail(self) -> None:
        inflight = self._generating()
        if inflight:
            episode_id = inflight[self.choose(len(inflight))]
            self.recently_arrived.append(episode_id)
            self._feed(EpisodeFailed(t=self.t, episode_id=episode_id, error="scripted failure"))

    def _publish(self) -> None:
        """The trainer publishes a version it has a batch for, jumping by one or more. Under
        `update_pause = "until-live"` no batch ships while an update is announced and not
        live, so the update goes live first, as the simulator's and the live runtime's
        `version_live` follows each `version_pending` whether or not a batch ships."""
        if self.loop.config.update_pause == "until-live":
            self._go_live()
        shipped = self.loop.sink_state.step - 1
        if shipped > self.published:
            self._go_live()
            if self.live_owed is not None:
                return  # a drained update still waits for the train work in flight
            if self.single_version_groups and self.loop.dispatcher_state.owing:
                return  # a group owes members (going live may have opened it): not yet
            # Mostly one version at a time (groups then span consecutive versions), and
            # now and then a jump of several.
            jump = 1 if self.choose(3) else 1 + self.choose(shipped - self.published)
            self.published += jump
            self._feed(VersionPending(t=self.t, version=self.published))
            self.live_owed = self.published
            if self.choose(2):
                self._go_live()  # else the weights go live later: inference keeps running

    def _go_live(self) -> None:
        """The announced version goes live: under `interrupt` and `recycle` once everything
        the rules abort is interrupted; under `drain` only once no train work is in flight."""
        if self.live_owed is None:
            return
        for episode_id, reason in self._interruptible():
            self._feed(self._interruption(episode_id, reason))
        if self.loop.config.weight_update == "drain" and self._train_inflight():
            return
        self._feed(VersionLive(t=self.t, version=self.live_owed))
        self.live_owed = None

    def _interruptible(self) -> list[tuple[str, InterruptReason]]:
        """The generating episodes the run's rules may interrupt now, with the reason."""
        state, config = self.loop.dispatcher_state, self.loop.config
        updating = config.weight_update == "interrupt" and state.partial.live < state.version
        recycling = config.recycle and state.partial.recycling
        found: list[tuple[str, InterruptReason]] = []
        for episode_id in self._generating():
            group = state.groups.get(state.inflight[episode_id])
            if group is not None and recycling and group.train:
                found.append((episode_id, "recycle"))
            elif group is not None and updating and not group.frozen:
                found.append((episode_id, "update"))
        return found

    def _train_inflight(self) -> bool:
        state = self.loop.dispatcher_state
        return any(
            (group := state.groups.get(group_id)) is not None and group.train
            for group_id in state.inflight.values()
        )

    def _interruption(self, episode_id: str, reason: InterruptReason) -> EpisodeInterrupted:
        tokens = self.tokens.get(episode_id, 0) + self.choose(32)
        self.tokens[episode_id] = tokens
        return EpisodeInterrupted(
            t=self.t, episode_id=episode_id, completion_tokens=tokens, reason=reason
        )

    def _interrupt(self) -> None:
        """Inference aborts one episode its rules abort (before the update goes live)."""
        candidates = self._interruptible()
        if candidates:
            self._feed(self._interruption(*candidates[self.choose(len(candidates))]))

    def _go_on(self) -> None:
        """Inference resubmits one interrupted episode under the version it serves, once no
        update is under way (a recycled one under a later version than it stopped at)."""
        state = self.loop.dispatcher_state
        partial = state.partial
        if partial.live < state.version:
            return
        ready = [
            e
            for e in partial.interrupted
            if partial.recycled.get(e) is None or partial.recycled[e] < partial.live
        ]
        if ready:
            episode_id = ready[self.choose(len(ready))]
            self._feed(EpisodeResumed(t=self.t, episode_id=episode_id, policy_version=partial.live))

    def _limit(self) -> None:
        limit = 1 + self.choose(2 * self.loop.config.max_inflight)
        self._feed(LimitSet(t=self.t, max_inflight=limit))

    def _overload(self) -> None:
        inflight = len(self.loop.dispatcher_state.inflight)
        if inflight:
            self._feed(OverloadCut(t=self.t, n=1 + self.choose(inflight)))

    def _late(self) -> None:
        """A cancelled episode arrives anyway (its abort lost the race): completed or failed."""
        if self.recently_cancelled:
            episode_id = self.recently_cancelled[self.choose(len(self.recently_cancelled))]
            self.recently_cancelled.remove(episode_id)
            self._arrive_again(episode_id)

    def _duplicate(self) -> None:
        """An episode that already arrived arrives a second time (a retried delivery)."""
        if self.recently_arrived:
            self._arrive_again(self.recently_arrived[self.choose(len(self.recently_arrived))])

    def _arrive_again(self, episode_id: str) -> None:
        if self.choose(3):
            self._feed(self._completion(episode_id))
        else:
            self._feed(EpisodeFailed(t=self.t, episode_id=episode_id, error="scripted late"))

    def _resume(self) -> None:
        """The driver dies and a new one takes over (once, in a world with `restarts`): what
        was in flight is named (and cancelled as `restart`); the trainer resumes from the
        announced version."""
        if not self.resumed:
            self.resumed = True
            self._feed(
                RunResumed(
                    t=self.t,
                    reason="scripted crash",
                    episode_ids=tuple(self._inflight()),
                    version=self.published,
                )
            )

    def finish(self) -> list[Event]:
        """End the run (everything owed is cancelled as `shutdown`), let up to two stray
        arrivals come after it, and return the log."""
        self._go_live()
        self._feed(RunFinished(t=self.t, reason="scripted"))
        strays = [*self.recently_cancelled, *self.recently_arrived]
        for _ in range(self.choose(3) if strays else 0):
            self.t += 0.25
            self._arrive_again(strays[self.choose(len(strays))])
        return self.log


def scripted_log(
    config: RunConfig,
    choose: Chooser,
    steps: int,
    *,
    loop: ReactionLoop | None = None,
    single_version_groups: bool = False,
    prompt_trainer: bool | None = None,
    restarts: bool = False,
) -> list[Event]:
    """A complete log of `steps` scripted world events under `config`."""
    loop = loop or ReactionLoop(config)
    world = ScriptedWorld(
        loop,
        choose,
        single_version_groups=single_version_groups,
        prompt_trainer=prompt_trainer,
        restarts=restarts,
    )
    for _ in range(steps):
        world.step()
    return world.finish()
