"""The zero-output guard: the run stops once the idle finalized episodes reach
`zero_output_batches` batches' worth, not before. A batch is worth `batch_size` episodes,
or with token batches `token_batch_size` over the mean tokens of the completed episodes
(one group before any completed)."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core import sink
from rolloutlog.core.config import RunConfig


@given(
    st.integers(1, 8),
    st.integers(1, 4000),
    st.integers(1, 5),
    st.integers(0, 4),
    st.integers(1, 2000),
)
def test_the_guard_stops_at_its_batches_worth_of_idle_episodes(
    group_size: int, token_batch: int, batches: int, completed: int, mean_tokens: int
) -> None:
    config = RunConfig(
        group_size=group_size,
        batch_size=None,
        token_batch_size=token_batch,
        zero_output_batches=batches,
    )
    state = sink.initial_state(config)
    state.completed, state.completed_tokens = completed, completed * mean_tokens
    worth = batches * (Fraction(token_batch, mean_tokens) if completed else group_size)
    # one episode either side of the exact threshold (float rounding may sit on it)
    state.idle.episodes = math.ceil(worth) - 1
    assert sink.zero_output_reason(state) is None
    state.idle.episodes = math.floor(worth) + 1
    assert sink.zero_output_reason(state) is not None


@given(st.integers(1, 8), st.integers(1, 64), st.integers(1, 5), st.integers(0, 4))
def test_with_episode_batches_the_guard_stops_at_its_batches_of_idle_episodes(
    group_size: int, batch: int, batches: int, completed: int
) -> None:
    """With episode batches a batch is worth `batch_size` episodes, whatever the tokens of
    the completed episodes so far."""
    config = RunConfig(group_size=group_size, batch_size=batch, zero_output_batches=batches)
    state = sink.initial_state(config)
    state.completed, state.completed_tokens = completed, completed * 100
    state.idle.episodes = batches * batch - 1
    assert sink.zero_output_reason(state) is None
    state.idle.episodes = batches * batch
    assert sink.zero_output_reason(state) is not None
