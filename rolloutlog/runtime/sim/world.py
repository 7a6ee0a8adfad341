"""What the simulated world knows that the deciders do not: tasks and episode outcomes.

Tasks: every task index has a completion length (lognormal around `task_length_tokens`)
and a solve rate (Beta), drawn once from the `tasks` stream for the whole task set. Eval
tasks `eval-17` share the properties of index 17.

Episodes: when a group opens, the world draws one block of G numbers from each per-episode
stream (durations, failures, rewards, races). Groups open in number order under every
policy and the task of a group is a function of its number, so member m of group g gets
the same draws whether the run is `per-episode` or `per-group`: the policies are compared
on common random numbers, and only what the deciders do differs.
"""

from __future__ import annotations

from typing import Protocol

import attrs
import numpy as np

from rolloutlog.core.tasks import task_index
from rolloutlog.runtime.sim.streams import RandomStreams
from rolloutlog.runtime.sim.world_config import WorldConfig

FRACTIONAL_CONCENTRATION = 4.0  # Beta(p·k, (1−p)·k): mean p, spread of a partial-credit score


@attrs.frozen
class Task:
    """A task's hidden properties: its typical length and its solve rate (reward probability)."""

    length_tokens: float
    solve_rate: float


class TaskTable:
    """The properties of every task index, drawn once from the `tasks` stream."""

    def __init__(self, world: WorldConfig, tasks: int, rng: np.random.Generator) -> None:
        lengths = world.task_length_tokens * rng.lognormal(0.0, world.task_length_sigma, tasks)
        rates = rng.beta(world.solve_rate_alpha, world.solve_rate_beta, tasks)
        self._lengths: list[float] = lengths.tolist()
        self._rates: list[float] = rates.tolist()

    def __getitem__(self, task_id: str) -> Task:
        index = task_index(task_id)
        if not 0 <= index < len(self._lengths):
            raise KeyError(f"task {task_id!r} is outside the task set of {len(self._lengths)}")
        return Task(self._lengths[index], self._rates[index])


@attrs.define(slots=True)
class GroupDraws:
    """The per-member random numbers of one open group, drawn when it opened."""

    task: Task
    train: bool
    size: int
    noise: list[float]
    fail: list[float]
    fail_at: list[float]
    reward: list[float]
    race: list[float]
    settled: int = 0  # members planned or cancelled unscheduled; the draws go at `size`


@attrs.define(slots=True)
class EpisodePlan:
    """What inference will do with one dispatched episode, decided at dispatch.

    Not frozen, though nothing changes it: one is built per dispatch, and a frozen attrs
    class sets each field through `object.__setattr__`, twice the cost of building it.
    """

    task: Task
    train: bool
    work_s: float  # generation seconds until its outcome (completion or failure)
    failed: bool
    reward: float
    completion_tokens: int
    late_if_cancelled: bool
    prompt_tokens: int | None = None  # None: the world's `prompt_tokens`
    race_drawn: bool = True  # `late_if_cancelled` drawn at `late_arrival_rate` (not recorded)
    fail_fraction: float = 1.0  # failed: the fraction of its generation done when it fails
    env_s: float = 0.0  # environment seconds after its generation (the shared world's)


class EpisodeWorld(Protocol):
    """What the driver asks of a world: a seeded model (`WorldModel`) or a recorded trace."""

    def open_group(self, group_id: str, task_id: str, size: int, train: bool) -> None:
        """Draw the block of per-member numbers of a new group."""

    def plan(self, group_id: str, member: int, inflight: int, max_inflight: int) -> EpisodePlan:
        """The outcome of member `member`, dispatched with `inflight` episodes in flight."""

    def unscheduled_cancelled(self, group_id: str, count: int) -> None:
        """Members cancelled before dispatch will never be planned."""

    def open_groups(self) -> int:
        """How many groups' draws are held."""


class WorldModel:
    """Tasks and the per-episode draws of the groups that are open; bounded by open groups."""

    def __init__(self, world: WorldConfig, tasks: int, streams: RandomStreams) -> None:
        self.world = world
        self.streams = streams
        self.tasks = TaskTable(world, tasks, streams["tasks"])
        self._groups: dict[str, GroupDraws] = {}

    def open_group(self, group_id: str, task_id: str, size: int, train: bool) -> None:
        """Draw the block of per-member numbers of a new group."""
        if group_id in self._groups:
            raise ValueError(f"{group_id} opened twice in the world model")
        task = self.tasks[task_id]
        fail = self.streams["failures"].random((2, size))
        self._groups[group_id] = GroupDraws(
            task=task,
            train=train,
            size=size,
            noise=self._noise(size),
            fail=fail[0].tolist(),
            fail_at=fail[1].tolist(),
            reward=self._rewards(task, size),
            race=self.streams["races"].random(size).tolist(),
        )

    def _noise(self, size: int) -> list[float]:
        """Length noise with median 1, from the configured heavy-tailed distribution."""
        rng, shape = self.streams["durations"], self.world.duration_shape
        if self.world.duration == "lognormal":
            return rng.lognormal(0.0, shape, size).tolist()  # type: ignore[no-any-return]
        if self.world.duration == "pareto":
            scale = 2.0 ** (1.0 / shape) - 1.0  # the median of a Lomax(alpha) draw
            return (rng.pareto(shape, size) / scale).tolist()  # type: ignore[no-any-return]
        return (rng.exponential(1.0, size) / np.log(2.0)).tolist()  # type: ignore[no-any-return]

    def _rewards(self, task: Task, size: int) -> list[float]:
        """Bernoulli uniforms (compared with the solve rate at dispatch) or fractional scores."""
        rng = self.streams["rewards"]
        if self.world.reward == "bernoulli":
            return rng.random(size).tolist()  # type: ignore[no-any-return]
        rate = min(max(task.solve_rate, 1e-3), 1.0 - 1e-3)
        k = FRACTIONAL_CONCENTRATION
        return rng.beta(rate * k, (1.0 - rate) * k, size).tolist()  # type: ignore[no-any-return]

    def plan(self, group_id: str, member: int, inflight: int, max_inflight: int) -> EpisodePlan:
        """The outcome of member `member`, dispatched with `inflight` episodes in flight."""
        draws = self._groups.get(group_id)  # `_draws` and `_settle` inline: once a dispatch
        if draws is None:
            raise _not_open(group_id)
        world, task = self.world, draws.task
        tokens = round(task.length_tokens * draws.noise[member])
        tokens = min(max(tokens, 1), world.max_completion_tokens)
        slowdown = 1.0 + world.concurrency_slowdown * min(inflight / max_inflight, 1.0)
        work_s = world.episode_overhead_s + tokens * world.seconds_per_token * slowdown
        failed = draws.fail[member] < world.failure_rate
        if failed:
            work_s *= draws.fail_at[member]
        raw = draws.reward[member]
        reward = float(raw < task.solve_rate) if world.reward == "bernoulli" else raw
        draws.settled += 1
        if draws.settled >= draws.size:
            self._close(group_id, draws)
        return EpisodePlan(
            task=task,
            train=draws.train,
            work_s=work_s,
            failed=failed,
            reward=reward,
            completion_tokens=tokens,
            late_if_cancelled=draws.race[member] < world.late_arrival_rate,
            fail_fraction=draws.fail_at[member],
            env_s=world.episode_overhead_s,
        )

    def unscheduled_cancelled(self, group_id: str, count: int) -> None:
        """Members cancelled before dispatch will never be planned; free their draws."""
        if count:
            self._settle(group_id, self._draws(group_id), count)

    def open_groups(self) -> int:
        """How many groups' draws are held (the world's share of the memory bound)."""
        return len(self._groups)

    def _draws(self, group_id: str) -> GroupDraws:
        draws = self._groups.get(group_id)
        if draws is None:
            raise _not_open(group_id)
        return draws

    def _settle(self, group_id: str, draws: GroupDraws, count: int) -> None:
        draws.settled += count
        if draws.settled >= draws.size:
            self._close(group_id, draws)

    def _close(self, group_id: str, draws: GroupDraws) -> None:
        """Every member settled: free the group's draws (past its size: a driver's bug)."""
        if draws.settled > draws.size:
            raise ValueError(f"{group_id}: more than {draws.size} members settled")
        del self._groups[group_id]


def _not_open(group_id: str) -> KeyError:
    return KeyError(f"{group_id} is not open in the world model")
