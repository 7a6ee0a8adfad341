"""How every command prints a duration and a rate (`cli.output`)."""

from __future__ import annotations

import pytest

from rolloutlog.cli.output import duration, per_unit, rate_unit


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.0, "0.00 s"),
        (0.42, "0.42 s"),
        (46.2, "46.2 s"),
        (59.9, "59.9 s"),
        (60.0, "1.00 min"),
        (255.0, "4.25 min"),
        (3599.0, "60.0 min"),
        (10836.0, "3.01 h"),
        (360_000.0, "100.0 h"),
    ],
)
def test_a_duration_is_shown_in_the_unit_that_fits_it(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown


def test_a_rate_is_per_the_unit_of_the_shortest_run_so_it_never_extrapolates() -> None:
    assert rate_unit([10.0, 7200.0])[1] == "second"
    assert rate_unit([600.0, 7200.0])[1] == "minute"
    assert rate_unit([3600.0, 7200.0])[1] == "hour"
    assert rate_unit([None])[1] == "hour"
    assert per_unit(877_034.0, rate_unit([10.0])) == "244"
    assert per_unit(4_092.4, rate_unit([10836.0])) == "4,092"
    assert per_unit(1476.0, rate_unit([46.2])) == "0.41"
