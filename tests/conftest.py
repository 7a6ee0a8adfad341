"""Hypothesis profiles, chosen with HYPOTHESIS_PROFILE: dev (default), ci, nightly."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# dev: quick feedback while editing. ci: derandomized, so a green main stays green, with at
# least 300 examples for the main properties. nightly: thousands, randomized, to find new bugs.
settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile(
    "ci",
    max_examples=300,
    derandomize=True,
    deadline=None,
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
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
