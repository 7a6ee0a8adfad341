"""Properties of the reconstruction of AReaL's trainer (`importers.areal_trainer`) over any
set of task results: each step takes what `prepare_batch` could have taken then, and no
step that the results could fill is left out."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.importers.areal_trainer import Bound, Result, trainer_steps


@st.composite
def task_results(draw: st.DrawFn, rejected: bool = True) -> list[Result]:
    """Results of distinct tasks: each created, then arrived, accepted (or rejected)."""
    count = draw(st.integers(0, 30))
    found = []
    for task in range(count):
        created = draw(st.floats(0.0, 100.0, allow_nan=False))
        took = draw(st.floats(0.0, 20.0, allow_nan=False))
        accepted = draw(st.booleans()) if rejected else True
        found.append(Result(task, created, created + took, accepted))
    return found


@st.composite
def trainer_times(draw: st.DrawFn) -> list[Bound]:
    """Samples that hold each version back to a time (a session with a token under the
    version before was submitted then), so that results pile up while the trainer trains."""
    times = sorted(draw(st.lists(st.floats(0.0, 150.0, allow_nan=False), max_size=10)))
    return [Bound(v, False, True, t, v, 1e9, "sample") for v, t in enumerate(times)]


@given(task_results(), st.integers(1, 5), trainer_times())
def test_each_step_takes_whole_batches_of_arrived_accepted_results(
    found: list[Result], batch: int, held: list[Bound]
) -> None:
    steps = trainer_steps(found, batch, 0.0, held)
    by_task = {r.task: r for r in found}
    taken: set[int] = set()
    prepared_from = 0.0
    for number, step in enumerate(steps, start=1):
        assert step.step == number and len(step.tasks) == batch
        assert all(by_task[t].accepted and by_task[t].arrived <= step.shipped for t in step.tasks)
        assert not taken & set(step.tasks)
        assert prepared_from <= step.shipped <= step.announced
        taken |= set(step.tasks)
        prepared_from = step.announced
    # accepted results are never discarded: every batch they can fill ships
    assert len(steps) == sum(r.accepted for r in found) // batch


@given(task_results(rejected=False), st.integers(1, 5), trainer_times())
def test_a_step_takes_the_oldest_created_of_what_had_arrived(
    found: list[Result], batch: int, held: list[Bound]
) -> None:
    """With every result accepted a step is one wait, which returns once `batch` results
    are in and takes the oldest-created of them: nothing it left had arrived by then and
    was created before one it took."""
    steps = trainer_steps(found, batch, 0.0, held)
    by_task = {r.task: r for r in found}
    taken: set[int] = set()
    for step in steps:
        taken |= set(step.tasks)
        youngest = max(by_task[t].created for t in step.tasks)
        for result in (r for r in found if r.task not in taken):
            assert not (result.arrived <= step.shipped and result.created < youngest), result
