"""Which advantages are zero: up to the tolerance itself, either sign, and nothing past it.

The sink prunes these from `trained_ids` (`filter_zero_advantages`); the tolerance is the
last advantage pruned, so a change of `<=` to `<` must show here, as no generated reward
lands on it.
"""

from __future__ import annotations

import math

from hypothesis import example, given
from hypothesis import strategies as st

from rolloutlog.core.scoring import ZERO_ADVANTAGE_TOLERANCE, is_zero_advantage

TOLERANCE = ZERO_ADVANTAGE_TOLERANCE


@example(TOLERANCE)
@example(-TOLERANCE)
@example(math.nextafter(TOLERANCE, 1.0))
@given(st.floats(-1.0, 1.0))
def test_an_advantage_is_zero_up_to_the_tolerance(advantage: float) -> None:
    assert is_zero_advantage(advantage) == (-TOLERANCE <= advantage <= TOLERANCE)
