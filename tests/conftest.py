"""Hypothesis profiles, chosen with HYPOTHESIS_PROFILE: dev (default), ci, nightly."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, settings

from rolloutlog.cli import progress

# dev: quick feedback while editing. ci: derandomized, so a green main stays green, with at
# least 300 examples for the main properties; no example database, so that a checkout with
# one draws what CI's fresh clone draws (replayed examples shift the derandomized search).
# nightly: thousands, randomized, to find new bugs.
settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile(
    "ci",
    max_examples=300,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "nightly",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
# mutation: few, fixed examples, so that each of the thousands of mutants runs in seconds
# (scripts/mutation.sh); a mutant the properties kill, they kill on the first examples. No
# shrinking: mutmut needs only pass or fail, and shrinking a failure took minutes.
settings.register_profile(
    "mutation",
    max_examples=25,
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(autouse=True, scope="session")
def _phases_held_quiet() -> None:
    """A phase's progress line (`rolloutlog: comparing ... (3 s)`) comes only when a command
    runs past two seconds, which a loaded machine decides: in process, it would be a second
    line before a one-line error. tests/cli/test_progress.py sets its own wait. (Session
    scope: a function-scoped fixture would trip hypothesis's check on every property.)"""
    progress.PHASE_QUIET_S = 3600.0  # type: ignore[misc]
