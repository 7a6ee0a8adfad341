"""One local Ray per test session, small: 2 CPUs, no dashboard, workers' logs not forwarded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import ray

from rolloutlog.studies.engines import RAY_LOCAL_OPTIONS


@pytest.fixture(scope="session")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, **RAY_LOCAL_OPTIONS)
    yield
    ray.shutdown()
