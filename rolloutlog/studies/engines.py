"""Where the cells of a sweep run: Ray (local or a cluster), or local processes.

Both engines call `results.run_cell` on each cell and hand back rows as cells finish, in
whatever order; the results table sorts them, so the engine never shows in the table.

Ray is the optional `sweep` extra. Locally, `ray.init` starts on this machine's cores
with `workers` CPUs, no dashboard and a small object store (rows are small); with an
address it joins an existing cluster, whose nodes must have rolloutlog installed. A Ray
already initialized in this process (a test session, a notebook) is used as it is.
"""

from __future__ import annotations

import logging
import multiprocessing
import re
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Final, Literal

from rolloutlog.studies.grid import Cell
from rolloutlog.studies.results import run_cell

Engine = Literal["ray", "processes"]
Row = dict[str, Any]
CONNECT_TIMEOUT_S: Final = 5.0
RAY_QUIET: Final[dict[str, Any]] = {  # Ray's own INFO and WARNING lines (its auth token, its
    "log_to_driver": False,  # start-up) are not the sweep's news; its errors still show
    "logging_level": logging.ERROR,
}
RAY_LOCAL_OPTIONS: Final[dict[str, Any]] = {
    "include_dashboard": False,
    "object_store_memory": 100 * 2**20,
    **RAY_QUIET,
}


class EngineUnavailable(RuntimeError):
    """The chosen engine cannot run here (Ray is not installed)."""


def ray_installed() -> bool:
    """Whether the `sweep` extra (Ray) can be imported."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def run_cells(
    cells: Sequence[Cell],
    on_row: Callable[[Row], None],
    *,
    engine: Engine,
    workers: int,
    address: str | None = None,
) -> None:
    """Run every cell on `engine` with at most `workers` at once; `on_row` gets each row."""
    if engine == "ray":
        _on_ray(cells, on_row, workers=workers, address=address)
    else:
        _in_processes(cells, on_row, workers=workers)


def _in_processes(cells: Sequence[Cell], on_row: Callable[[Row], None], *, workers: int) -> None:
    # spawn, not fork: the parent runs a progress thread, and a forked child inherits locks.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [pool.submit(run_cell, cell) for cell in cells]
        try:
            for future in as_completed(futures):
                on_row(future.result())
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def _require_reachable(address: str) -> None:
    """Refuse a `host:port` nobody listens on now: Ray itself would retry it for minutes."""
    match = re.fullmatch(r"(?:ray://)?\[?([^\]/]+?)\]?:(\d+)", address)
    if match is None:
        return  # "auto" and other forms Ray resolves itself
    try:
        socket.create_connection((match[1], int(match[2])), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise EngineUnavailable(
            f"--address {address}: no Ray cluster answers there ({error})"
        ) from None


def _on_ray(
    cells: Sequence[Cell], on_row: Callable[[Row], None], *, workers: int, address: str | None
) -> None:
    try:
        import ray
    except ImportError as error:
        raise EngineUnavailable(
            "Ray is not installed: pip install 'rolloutlog[sweep]', or run in local "
            "processes with --engine processes"
        ) from error
    if address is not None:
        _require_reachable(address)
    started = not ray.is_initialized()
    if started:
        if address is None:
            ray.init(num_cpus=workers, **RAY_LOCAL_OPTIONS)
        else:
            ray.init(address=address, **RAY_QUIET)
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(run_cell)
        outstanding = [remote.remote(cell) for cell in cells]
        try:
            while outstanding:
                done, outstanding = ray.wait(outstanding, num_returns=1)
                on_row(ray.get(done[0]))
        except BaseException:
            for ref in outstanding:
                ray.cancel(ref)
            raise
    finally:
        if started:
            ray.shutdown()
