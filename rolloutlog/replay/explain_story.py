"""One rollout's life, and what a step threw away, each decision with its rule and numbers.

`explain --episode ID` reads the log once and says, for every event about the episode,
what happened and why: the version it was stamped with, how long it ran, the rollout age
that made the dispatcher cancel it or the sink drop it (`(s − 1) − d = a > bound b`), how
long it waited in the queue and behind how many episodes, and the batch that trained it.
`explain --step N` uses the same sentences for every episode the step threw away. The
state each sentence reads (step, version, queue) is `explain_state.RunState`, as it was
when the decision was made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

import attrs

from rolloutlog.core.staleness import rollout_age
from rolloutlog.replay.explain import ExplainError, config_of
from rolloutlog.replay.explain_state import RunState

# Why a cancellation or a drop happened, for the reasons whose rule is not the age.
REASONS: Final = {
    "overload": "an overload cut: the youngest groups go first",
    "straggler": "a straggler cut: the batch filled without it",
    "shutdown": "the run finished with it owed",
    "restart": "the driver died while it was in flight (run_resumed)",
    "leftover": "a leftover once its batch filled (slime's abort)",
    "redundant": "its group had all the members it needed (group_redundancy)",
    "evicted": "the bounded queue made room for a newer group (queue_limit)",
    "withheld": "stale when its group was scored: scored with it, never shipped",
}


@attrs.define
class _Life:
    """What the story needs to remember about the episode between its events."""

    dispatched_at: float = 0.0
    version: int = 0
    queued_at: float | None = None
    ahead: int = 0  # episodes queued before it when it was queued


class Story:
    """Lines about `episode_id`, or about everything thrown away in step `step`."""

    def __init__(self, episode_id: str | None = None, step: int | None = None) -> None:
        self.episode_id, self.step = episode_id, step
        self.group_id = None if episode_id is None else episode_id.rpartition("/")[0]
        self.state: RunState | None = None
        self.lives: dict[str, _Life] = {}
        self.lines: list[tuple[float, str, str]] = []  # t, the episode or "", what happened
        self.seen = False

    def read(self, batches: Iterable[dict[str, list[Any]]]) -> list[str]:
        for columns in batches:
            for r, kind in enumerate(columns["kind"]):
                self._row(kind, columns["t"][r], columns, r)
        return [f"{t:10.2f}  {line}" for t, line in _merged(self.lines)]

    def _row(self, kind: str, t: float, c: dict[str, list[Any]], r: int) -> None:
        if self.state is None:
            if kind != "run_started":
                raise ExplainError(f"seq {c['seq'][r]} ({kind}): a log starts with run_started")
            self.state = RunState(config_of(c["config"][r], c["seq"][r]))
        tell = _TELLERS.get(kind)
        if tell is not None:
            tell(self, t, c, r)
        self.state.row(kind, t, c, r)

    def _about(self, episode_id: str) -> bool:
        """Whether the story tells of this episode: the one asked, or any in the step asked."""
        if self.episode_id is not None:
            return episode_id == self.episode_id
        return self.state is not None and self.state.step == self.step

    def _say(self, t: float, line: str, episode_id: str = "") -> None:
        self.lines.append((t, episode_id, line))

    def _age_rule(self, episode_id: str, step: int, recorded: int | None = None) -> str:
        version = self.lives[episode_id].version if episode_id in self.lives else None
        if version is None:
            return f"age {recorded}"
        age = rollout_age(version, step)
        bound = self._bound()
        compare = ">" if age > bound else "≤"
        return f"dispatched at v{version}, ({step} − 1) − {version} = {age} {compare} bound {bound}"

    def _bound(self) -> int:
        return 0 if self.state is None else self.state.bound

    # --- per kind -------------------------------------------------------------------------

    def opened(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        if c["group_id"][r] == self.group_id:
            self._say(
                t,
                f"group {self.group_id} opened at step {c['step'][r]}, v{c['policy_version'][r]} "
                f"({c['work'][r]}, task {c['task_id'][r]}, {c['group_size'][r]} members)",
            )

    def dispatched(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        episode_id, version = c["episode_id"][r], c["policy_version"][r]
        self.lives[episode_id] = _Life(dispatched_at=t, version=version)
        if episode_id == self.episode_id and self.state is not None:
            self.seen = True
            held, limit = len(self.state.inflight) + 1, self.state.limit
            self._say(
                t,
                f"dispatched at step {self.state.step}, stamped v{version} "
                f"(permits {held}/{limit} with it)",
            )

    def arrived(self, t: float, c: dict[str, list[Any]], r: int, failed: bool) -> None:
        episode_id = c["episode_id"][r]
        if episode_id != self.episode_id or self.state is None:
            return
        took = t - self.lives[episode_id].dispatched_at
        if episode_id not in self.state.inflight:
            self._say(t, f"arrived {took:.2f} s after dispatch, no longer in flight: late, ignored")
        elif failed:
            self._say(t, f"failed after {took:.2f} s ({c['error'][r]}): never scored")
        else:
            tokens = c["prompt_tokens"][r] + c["completion_tokens"][r]
            self._say(t, f"completed after {took:.2f} s: reward {c['reward'][r]}, {tokens} tokens")

    def cancelled(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        reason = c["reason"][r]
        for episode_id in c["episode_ids"][r]:
            if not self._about(episode_id) or self.state is None:
                continue
            life = self.lives.get(episode_id, _Life(dispatched_at=t))
            ran = f"after {t - life.dispatched_at:.2f} s of generation"
            if reason == "stale":
                rule = self._age_rule(episode_id, self.state.step)
                why = f"v{self.state.version} announced at step {self.state.step}: {rule}"
            else:
                why = REASONS.get(reason, reason)
            self._say(t, f"cancelled ({reason}) {ran}: {why}", episode_id)

    def dropped(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        episode_id, reason = c["episode_id"][r], c["reason"][r]
        if not self._about(episode_id) or self.state is None:
            return
        step = self.state.step
        life = self.lives.get(episode_id, _Life(dispatched_at=t))
        if reason in ("stale", "requeue"):
            why = self._age_rule(episode_id, step, c["age"][r])
        else:
            why = REASONS.get(reason, reason)
        waited = ""
        if life.queued_at is not None:
            waited = f"; waited {t - life.queued_at:.2f} s in the queue behind {life.ahead}"
            life.queued_at = None
        self._say(t, f"dropped ({reason}) at step {step}: {why}{waited}", episode_id)

    def scored(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        if c["group_id"][r] != self.group_id or self.state is None:
            return
        ids, admitted = list(c["episode_ids"][r]), c["admitted"][r]
        if self.episode_id not in ids:
            self._say(t, f"group scored without it ({len(ids)} members scored)")
            return
        values = c["advantages"][r]
        advantage = f"{values[ids.index(self.episode_id)]:.4g}" if values else "none (eval)"
        if admitted:
            life = self.lives[self.episode_id or ""]
            life.queued_at, life.ahead = t, len(self.state.queue) + ids.index(self.episode_id)
            self._say(t, f"scored: advantage {advantage}; queued behind {life.ahead} episodes")
        else:
            self._say(t, f"scored: advantage {advantage}; the curriculum did not admit the group")

    def shipped(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        step, cut, episode_id = c["step"][r], c["episode_ids"][r], self.episode_id or ""
        life = self.lives.get(episode_id)
        if life is None or life.queued_at is None:
            return
        if episode_id not in cut:
            self._say(
                t, f"batch {step} shipped the {len(cut)} episodes ahead of it; it stays queued"
            )
            return
        queued_at, life.queued_at = life.queued_at, None
        waited = f" after {t - queued_at:.2f} s queued"
        fate = (
            "trained"
            if episode_id in c["trained_ids"][r]
            else "cut but not trained (zero advantage)"
        )
        self._say(t, f"{fate} in batch {step}{waited}: {self._age_rule(episode_id, step)}")


def _merged(lines: list[tuple[float, str, str]]) -> Iterable[tuple[float, str]]:
    """Lines in a row about members of one group at one time saying the same, as one."""
    runs: list[tuple[float, str, str, list[str]]] = []
    for t, episode_id, line in lines:
        group = episode_id.rpartition("/")[0]
        last = runs[-1] if runs else None
        if episode_id and last is not None and last[:3] == (t, group, line):
            last[3].append(episode_id)
        else:
            runs.append((t, group, line, [episode_id] if episode_id else []))
    for t, group, line, ids in runs:
        if len(ids) > 1:
            yield t, f"{len(ids)} members of {group} ({ids[0]} … {ids[-1]}) {line}"
        else:
            yield t, f"{ids[0]} {line}" if ids else line


_TELLERS: Final[dict[str, Callable[[Story, float, dict[str, list[Any]], int], None]]] = {
    "group_opened": Story.opened,
    "episode_dispatched": Story.dispatched,
    "episode_completed": lambda s, t, c, r: s.arrived(t, c, r, failed=False),
    "episode_failed": lambda s, t, c, r: s.arrived(t, c, r, failed=True),
    "episodes_cancelled": Story.cancelled,
    "episode_dropped": Story.dropped,
    "group_scored": Story.scored,
    "batch_shipped": Story.shipped,
}
