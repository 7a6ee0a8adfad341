"""One local Ray per test session, small: 2 CPUs, no dashboard, workers' logs not forwarded.

Ray is imported by the fixture, so the other tests here run without the `sweep` extra.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rolloutlog.studies.engines import RAY_LOCAL_OPTIONS


@pytest.fixture(scope="session")
def local_ray() -> Iterator[None]:
    import ray

    ray.init(num_cpus=2, **RAY_LOCAL_OPTIONS)
    yield
    ray.shutdown()
