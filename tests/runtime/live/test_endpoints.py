"""Several endpoints as one: placement, fan-out weight updates, and losing an endpoint.

The CI runs these against two CPU servers: threads where the test only needs two
endpoints, processes where an endpoint must die as a crashed replica would (SIGKILL).
"""

from __future__ import annotations

import asyncio
import logging

import attrs
import pytest

from rolloutlog.runtime.live.digits import task_from_id
from rolloutlog.runtime.live.endpoints import (
    EndpointLost,
    EndpointPool,
    WeightReloadFailed,
)
from rolloutlog.runtime.live.protocol import (
    GenerateRequest,
    InferenceError,
    InferenceUnavailable,
    SamplingParams,
)
from rolloutlog.runtime.live.twin.launch import server_processes, server_threads
from tests.runtime.live.vllm_contract import run, wait_for_engine_requests, wait_until

PROMPT = tuple(task_from_id("pool").prompt_ids)


def _request(request_id: str, max_tokens: int = 6) -> GenerateRequest:
    sampling = SamplingParams(max_tokens=max_tokens, ignore_eos=True, seed=len(request_id))
    return GenerateRequest(request_id=request_id, token_ids=PROMPT, sampling=sampling)


async def _start(pool: EndpointPool, group_id: str, request_id: str, **kwargs):
    task = asyncio.create_task(pool.generate(group_id, _request(request_id, **kwargs)))
    await asyncio.sleep(0)  # let it register with the pool before the next placement
    return task


def _placed(pool: EndpointPool) -> list[set[str]]:
    return [set(endpoint.inflight) for endpoint in pool.endpoints]


def test_groups_stay_together_and_new_groups_go_to_the_least_loaded(checkpoints, contract_client):
    async def scenario(urls):
        pool = EndpointPool([contract_client(url) for url in urls])
        try:
            await asyncio.gather(*(e.backend.pause("keep") for e in pool.endpoints))
            tasks = [
                await _start(pool, "g1", "g1/0"),
                await _start(pool, "g1", "g1/1"),
                await _start(pool, "g2", "g2/0"),  # endpoint 1 is empty: least loaded
                await _start(pool, "g1", "g1/2"),  # affinity beats load
                await _start(pool, "g3", "g3/0"),  # 3 in flight on 0, 1 on 1
            ]
            placed = _placed(pool)
            await asyncio.gather(*(e.backend.resume() for e in pool.endpoints))
            results = await asyncio.gather(*tasks)
            return placed, results, _placed(pool)
        finally:
            await pool.aclose()

    with server_threads(checkpoints["a"], 2) as servers:
        placed, results, after = run(scenario([s.url for s in servers]))
    assert placed == [{"g1/0", "g1/1", "g1/2"}, {"g2/0", "g3/0"}]
    assert all(len(r.token_ids) == 6 for r in results)
    assert after == [set(), set()]


@pytest.mark.parametrize("pause", ["keep", "abort"])
def test_weights_fan_out_and_go_live_only_when_every_endpoint_has_them(
    checkpoints, contract_client, pause
):
    """Keep mode: requests in flight finish on both versions. Abort mode (interrupt): they
    answer `abort` at the pause, their tokens so far all from the old weights."""

    async def scenario(servers):
        pool = EndpointPool([contract_client(s.url) for s in servers])
        try:
            tasks = [
                await _start(pool, "g1", "g1/0", max_tokens=40),
                await _start(pool, "g2", "g2/0", max_tokens=40),
            ]
            await wait_until(
                lambda: min(s.engine.tokens_total for s in servers) >= 5, "5 tokens on each"
            )
            live = await pool.publish_weights(str(checkpoints["b"]), "v1", pause=pause)
            labels = [await e.backend.weight_version() for e in pool.endpoints]
            paused = [await e.backend.is_paused() for e in pool.endpoints]
            return live, labels, paused, await asyncio.gather(*tasks)
        finally:
            await pool.aclose()

    with server_threads(checkpoints["a"], 2, min_step_s=0.02) as servers:
        live, labels, paused, results = run(scenario(servers))
    assert live == "v1" and labels == ["v1", "v1"] and paused == [False, False]
    for result in results:
        if pause == "keep":
            assert [span.version for span in result.weight_versions] == ["default", "v1"]
        else:
            assert result.finish_reason == "abort" and 5 <= len(result.token_ids) < 40
            assert [span.version for span in result.weight_versions] == ["default"]


def test_a_reload_that_fails_everywhere_raises_and_inference_resumes(
    checkpoints, contract_client, tmp_path
):
    async def scenario(urls):
        pool = EndpointPool([contract_client(url) for url in urls])
        try:
            with pytest.raises(WeightReloadFailed, match="no endpoint could load"):
                await pool.publish_weights(str(tmp_path / "missing"), "v1")
            paused = [await e.backend.is_paused() for e in pool.endpoints]
            after = await pool.generate("g1", _request("after"))
            return pool, paused, after
        finally:
            await pool.aclose()

    with server_threads(checkpoints["a"], 2) as servers:
        pool, paused, after = run(scenario([s.url for s in servers]))
    assert paused == [False, False]
    assert all(e.alive for e in pool.endpoints) and pool.live_version is None
    assert len(after.token_ids) == 6


def test_a_killed_endpoint_leaves_rotation_and_its_requests_fail(
    checkpoints, contract_client, caplog
):
    lost: list[tuple[str, str, list[str]]] = []

    async def scenario(processes):
        pool = EndpointPool(
            [contract_client(p.url, backoff_s=0.05) for p in processes],
            on_lost=lambda url, reason, ids: lost.append((url, reason, ids)),
        )
        try:
            await asyncio.gather(*(e.backend.pause("keep") for e in pool.endpoints))
            survivor = await _start(pool, "g1", "g1/0")
            doomed = [await _start(pool, "g2", "g2/0"), await _start(pool, "g2", "g2/1")]
            # truly in flight: both requests are in the doomed server's engine
            await wait_for_engine_requests(processes[1].url, 2)
            processes[1].kill()
            failures = await asyncio.gather(*doomed, return_exceptions=True)
            await pool.endpoints[0].backend.resume()
            survived = await survivor
            moved = await pool.generate("g2", _request("g2/2"))  # g2 re-placed on endpoint 0
            live = await pool.publish_weights(str(checkpoints["b"]), "v1")
            return pool, failures, survived, moved, live
        finally:
            await pool.aclose()

    with caplog.at_level(logging.WARNING), server_processes(checkpoints["a"], 2) as processes:
        dead_url = processes[1].url
        pool, failures, survived, moved, live = run(scenario(processes))
    assert all(isinstance(f, InferenceError) for f in failures), failures
    # a request that reached the server is never re-sent: it fails after one attempt
    assert any("after 1 attempt" in str(f) or isinstance(f, EndpointLost) for f in failures)
    assert [e.alive for e in pool.endpoints] == [True, False]
    assert lost and lost[0][0] == dead_url and sorted(lost[0][2]) == ["g2/0", "g2/1"]
    assert dead_url in caplog.text and "taken out of rotation" in caplog.text
    assert len(survived.token_ids) == 6 and len(moved.token_ids) == 6
    assert live == "v1" and pool.live_version == "v1"


def test_a_timed_out_request_fails_alone_when_its_endpoint_is_healthy(checkpoints, contract_client):
    async def scenario(url):
        pool = EndpointPool([contract_client(url, generate_timeout_s=0.3)])
        try:
            await pool.endpoints[0].backend.pause("keep")  # the request will hang
            with pytest.raises(InferenceUnavailable, match="ReadTimeout"):
                await pool.generate("g1", _request("hangs"))
            backend = pool.endpoints[0].backend
            await backend.resume()
            # the next request proves the endpoint healthy; it gets time to finish, since a
            # loaded machine may take longer than 0.3 s over six tokens
            backend.limits = attrs.evolve(backend.limits, generate_timeout_s=60.0)
            return pool, await pool.generate("g1", _request("after"))
        finally:
            await pool.aclose()

    with server_threads(checkpoints["a"], 1) as servers:
        pool, after = run(scenario(servers[0].url))
    assert pool.endpoints[0].alive
    assert len(after.token_ids) == 6
