"""Task ids: every id a group gets names its index in the task set, which is how the
simulated world finds the task's length and solve rate (`runtime.sim.world.TaskTable`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.config import RunConfig
from rolloutlog.core.tasks import task_for_group, task_index
from rolloutlog.events.types import Work
from rolloutlog.testing.strategies import run_configs

TASK_SETS = st.integers(1, 10**6).flatmap(lambda tasks: run_configs(tasks=tasks))


@given(TASK_SETS, st.integers(1, 10**9), st.sampled_from(["train", "eval"]))
def test_a_groups_task_id_names_its_index_in_the_task_set(
    config: RunConfig, number: int, work: Work
) -> None:
    task = task_for_group(config, number, work)
    index = task_index(task.task_id)
    assert 0 <= index < config.tasks
    assert task.task_id == (f"eval-{index}" if work == "eval" else f"t{index}")
