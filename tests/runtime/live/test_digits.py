"""The digit task's hard tail: off by default, a stable share of ids when on."""

from __future__ import annotations

import pytest

from rolloutlog.runtime.live.digits import HARD_DIGITS_MAX, HARD_DIGITS_MIN, task_from_id

IDS = [f"t{i}" for i in range(1024)]


def test_share_zero_is_the_ordinary_task_set():
    assert all(task_from_id(i, 0.0) == task_from_id(i) for i in IDS)
    assert {task_from_id(i).difficulty for i in IDS} == {"easy"}
    assert task_from_id("t944").digits == (4, 2, 5, 4)  # pinned: the documented runs' tasks


def test_a_share_makes_that_share_of_ids_hard_and_leaves_the_others_as_they_were():
    tasks = [task_from_id(i, 0.25) for i in IDS]
    hard = [t for t in tasks if t.difficulty == "hard"]
    assert 0.2 < len(hard) / len(IDS) < 0.3
    assert {len(t.digits) for t in hard} == set(range(HARD_DIGITS_MIN, HARD_DIGITS_MAX + 1))
    assert all(t.max_tokens == len(t.digits) + 1 for t in hard)  # longer to generate
    easy = [t for t in tasks if t.difficulty == "easy"]
    assert all(t == task_from_id(t.task_id) for t in easy)
    # a larger share keeps every hard id hard: the tail grows, it is not redrawn
    larger = {i for i in IDS if task_from_id(i, 0.5).difficulty == "hard"}
    assert {t.task_id for t in hard} < larger
    assert {task_from_id(i, 1.0).difficulty for i in IDS} == {"hard"}


def test_a_share_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="hard_share must be in"):
        task_from_id("t1", 1.5)
