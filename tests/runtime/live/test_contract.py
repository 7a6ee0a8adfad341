"""Contract tests: the HTTP client against the CPU server, every exchange schema-checked.

Each test's traffic goes through `contract_client`, whose recorder validates every request
sent and every response received against the vendored vLLM 0.33 schemas at teardown.
`test_observed_probes_get_vllms_answers` replays the requests vLLM's own routers were
observed answering and checks that the CPU server answers them the same way.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from rolloutlog.runtime.live.digits import EOS_ID, task_from_id
from rolloutlog.runtime.live.episodes import TrainSample
from rolloutlog.runtime.live.model import load_checkpoint
from rolloutlog.runtime.live.protocol import (
    GenerateRequest,
    InferenceRejected,
    SamplingParams,
    check_cache_salt,
)
from rolloutlog.runtime.live.trainer import completion_logprobs
from rolloutlog.runtime.live.twin.server import InferenceServer
from tests.runtime.live.vllm_contract import (
    CONTRACT,
    Exchange,
    check_response,
    run,
    validate,
    wait_for_engine_requests,
    wait_until,
)

PROMPT = tuple(task_from_id("contract").prompt_ids)


def _request(request_id: str, **sampling: Any) -> GenerateRequest:
    return GenerateRequest(
        request_id=request_id, token_ids=PROMPT, sampling=SamplingParams(**sampling)
    )


def test_generate_answers_in_vllms_shape(server, contract_client, recorder):
    async def scenario():
        client = contract_client(server.url)
        try:
            return await client.generate(
                GenerateRequest(
                    request_id="r1",
                    token_ids=PROMPT,
                    sampling=SamplingParams(max_tokens=8, seed=1, stop_token_ids=(EOS_ID,)),
                    cache_salt="v0",
                )
            )
        finally:
            await client.aclose()

    generation = run(scenario())
    assert generation.engine_request_id == "generate-tokens-r1"
    assert generation.finish_reason in ("stop", "length")
    assert len(generation.logprobs) == len(generation.token_ids) == generation.completion_tokens
    assert generation.weight_versions[0].version == "default"
    assert generation.prompt_tokens == len(PROMPT)
    assert recorder.routes() == {("POST", "/inference/v1/generate")}


def test_metrics_count_the_requests_the_engine_holds(server, contract_client):
    async def scenario():
        client = contract_client(server.url)
        try:
            await client.pause("keep")
            task = asyncio.create_task(client.generate(_request("held", max_tokens=4)))
            await wait_for_engine_requests(server.url, 1)
            async with httpx.AsyncClient(trust_env=False) as http:
                response = await http.get(f"{server.url}/metrics")
            await client.resume()
            return response, await task
        finally:
            await client.aclose()

    response, generation = run(scenario())
    assert response.headers["content-type"] == "text/plain"
    gauges = dict(line.split(" ") for line in response.text.splitlines() if line[0] != "#")
    label = '{model_name="rolloutlog-digits"}'
    assert gauges == {
        f"vllm:num_requests_running{label}": "1.0",
        f"vllm:num_requests_waiting{label}": "0.0",
    }
    assert len(generation.token_ids) == 4


def test_abort_of_an_in_flight_request(slow_server, contract_client):
    async def scenario():
        client = contract_client(slow_server.url)
        try:
            task = asyncio.create_task(
                client.generate(_request("long", max_tokens=100, ignore_eos=True, seed=3))
            )
            await wait_until(lambda: slow_server.engine.tokens_total >= 5, "5 tokens")
            await client.abort(["long"])
            return await task
        finally:
            await client.aclose()

    generation = run(scenario())
    assert generation.aborted
    assert 5 <= len(generation.token_ids) < 100
    assert generation.stop_reason is None
    assert generation.weight_versions[-1].end == len(generation.token_ids)
    assert len(generation.logprobs) == len(generation.token_ids)


def test_keep_pause_across_a_reload_gives_tokens_of_both_versions(
    slow_server: InferenceServer, checkpoints: dict[str, Path], contract_client
):
    """A request that straddles pause(keep) -> reload -> relabel -> resume finishes with
    tokens from both versions; each token's logprob is the one of the weights that made it."""

    async def scenario():
        client = contract_client(slow_server.url)
        try:
            task = asyncio.create_task(
                client.generate(_request("straddle", max_tokens=30, ignore_eos=True, seed=5))
            )
            await wait_until(lambda: slow_server.engine.tokens_total >= 8, "8 tokens")
            await client.pause("keep")
            assert await client.is_paused()
            frozen = slow_server.engine.tokens_total
            await client.reload_weights(str(checkpoints["b"]))
            await client.update_weight_version("v1")
            engine = slow_server.engine
            with engine._cond:  # paused in keep: no step runs and none can start
                assert not engine._stepping and not engine._runnable()
            assert engine.tokens_total == frozen, "a paused engine stepped"
            assert not task.done()
            await client.resume()
            assert await client.weight_version() == "v1"
            return await task
        finally:
            await client.aclose()

    generation = run(scenario())
    assert generation.finish_reason == "length"
    assert len(generation.token_ids) == 30
    first, second = generation.weight_versions
    assert (first.version, first.start) == ("default", 0)
    assert (second.version, second.end) == ("v1", 30)
    assert first.end == second.start and 8 <= first.end < 30
    sample = TrainSample(
        prompt_ids=PROMPT,
        completion_ids=generation.token_ids,
        inference_logprobs=generation.logprobs,
        advantage=0.0,
    )
    by_a = completion_logprobs(load_checkpoint(checkpoints["a"]), [sample])[0]
    by_b = completion_logprobs(load_checkpoint(checkpoints["b"]), [sample])[0]
    split = first.end
    expected = by_a[:split] + by_b[split:]
    assert generation.logprobs == pytest.approx(expected, abs=1e-4)


def test_sampling_is_deterministic_for_a_fixed_seed(server, contract_client):
    async def scenario():
        client = contract_client(server.url)
        try:
            alone = await client.generate(_request("a1", max_tokens=12, ignore_eos=True, seed=7))
            crowd = [
                _request(f"c{i}", max_tokens=12, ignore_eos=True, seed=100 + i) for i in range(15)
            ]
            together = await asyncio.gather(
                client.generate(_request("a2", max_tokens=12, ignore_eos=True, seed=7)),
                *(client.generate(r) for r in crowd),
            )
            other = await client.generate(_request("a3", max_tokens=12, ignore_eos=True, seed=8))
            return alone, together[0], other
        finally:
            await client.aclose()

    alone, batched, other = run(scenario())
    assert alone.token_ids == batched.token_ids, "a batch changed a seeded request's tokens"
    assert alone.logprobs == pytest.approx(batched.logprobs, abs=1e-5)
    assert alone.token_ids != other.token_ids


def test_engine_logprobs_match_the_trainers_recomputation(server, checkpoints, contract_client):
    async def scenario():
        client = contract_client(server.url)
        try:
            requests = [
                GenerateRequest(
                    request_id=f"t{i}",
                    token_ids=tuple(task_from_id(f"task-{i}").prompt_ids),
                    sampling=SamplingParams(max_tokens=7, seed=i),
                )
                for i in range(12)
            ]
            return requests, await asyncio.gather(*(client.generate(r) for r in requests))
        finally:
            await client.aclose()

    requests, generations = run(scenario())
    samples = [
        TrainSample(
            prompt_ids=r.token_ids,
            completion_ids=g.token_ids,
            inference_logprobs=g.logprobs,
            advantage=0.0,
        )
        for r, g in zip(requests, generations, strict=True)
    ]
    recomputed = completion_logprobs(load_checkpoint(checkpoints["a"]), samples)
    for generation, expected in zip(generations, recomputed, strict=True):
        assert list(generation.logprobs) == pytest.approx(expected, abs=1e-4)


def test_top_logprobs_follow_vllms_order(server, contract_client):
    async def scenario():
        client = contract_client(server.url)
        try:
            await client.generate(_request("top", max_tokens=4, logprobs=3, seed=2))
        finally:
            await client.aclose()

    run(scenario())
    body = httpx.post(
        f"{server.url}/inference/v1/generate",
        json={"token_ids": list(PROMPT), "sampling_params": {"max_tokens": 4, "logprobs": 3}},
    ).json()
    for entry in body["choices"][0]["logprobs"]["content"]:
        top = entry["top_logprobs"]
        assert top[0]["token_id"] == entry["token_id"]
        assert len(top) == (3 if entry["rank"] <= 3 else 4)
        ranks = [t["rank"] for t in top[1:]]
        assert ranks == sorted(ranks)


def test_paused_in_abort_mode_answers_503_and_the_client_gives_up_boundedly(
    server, contract_client
):
    async def scenario():
        client = contract_client(server.url, paused_attempts=3, backoff_s=0.01)
        try:
            await client.pause("abort")
            with pytest.raises(InferenceRejected) as caught:
                await client.generate(_request("refused", max_tokens=2))
            await client.resume()
            after = await client.generate(_request("accepted", max_tokens=2))
            return caught.value, after
        finally:
            await client.aclose()

    error, after = run(scenario())
    assert error.status == 503 and error.kind == "ServiceUnavailableError"
    assert "paused" in str(error) and "/inference/v1/generate" in str(error)
    assert len(after.token_ids) >= 1


def test_a_failed_reload_is_a_500_with_vllms_body(server, tmp_path, contract_client):
    async def scenario():
        client = contract_client(server.url)
        try:
            with pytest.raises(InferenceRejected) as caught:
                await client.reload_weights(str(tmp_path / "missing"))
            return caught.value
        finally:
            await client.aclose()

    error = run(scenario())
    assert error.status == 500 and "Call to collective_rpc method failed" in str(error)


@pytest.mark.parametrize(
    "body, param",
    [
        ({"token_ids": [1, -5], "sampling_params": {}}, "body.token_ids"),
        ({"token_ids": [], "sampling_params": {}}, "body.token_ids"),
        ({"token_ids": [1]}, "body.sampling_params"),
        ({"token_ids": [1], "sampling_params": {"temperature": -1}}, "temperature"),
        ({"token_ids": [1], "sampling_params": {"top_p": 0}}, "top_p"),
        ({"token_ids": [1], "sampling_params": {"max_tokens": 0}}, "max_tokens"),
        ({"token_ids": [1], "sampling_params": {}, "cache_salt": "a@b"}, "cache_salt"),
        ({"token_ids": [1], "sampling_params": {}, "cache_salt": "x" * 129}, "cache_salt"),
        ({"token_ids": [99], "sampling_params": {}}, "token_ids"),
        ({"token_ids": [1], "sampling_params": {"max_tokens": 500}}, "max_tokens"),
    ],
)
def test_bad_input_is_a_400_with_vllms_body(server, body, param):
    response = httpx.post(f"{server.url}/inference/v1/generate", json=body)
    assert response.status_code == 400
    validate("error_response", response.json())
    assert response.json()["error"]["param"] == param


def test_the_client_refuses_a_bad_cache_salt_before_sending():
    for salt in ("", "a/b", "x" * 129, "a\\b"):
        with pytest.raises(ValueError, match="cache_salt"):
            check_cache_salt(salt)
    assert check_cache_salt("v12_group-salt") == "v12_group-salt"


def _probe_request(probe: dict[str, Any], weights: Path) -> dict[str, Any]:
    """The probe's request, with token ids folded into this model's vocabulary and the
    reload path pointed at a real checkpoint; everything else is sent as observed."""
    body = probe["request_json"]
    if isinstance(body, dict) and "token_ids" in body:
        body = {**body, "token_ids": [t % 10 if t >= 0 else t for t in body["token_ids"]]}
        params = body.get("sampling_params")
        if isinstance(params, dict) and "stop_token_ids" in params:
            stops = [t % 10 for t in params["stop_token_ids"]]
            body["sampling_params"] = {**params, "stop_token_ids": stops}
    if isinstance(body, dict) and body.get("method") == "reload_weights":
        body = {**body, "kwargs": {"weights_path": str(weights)}}
    return body


STREAMING = "stream"  # the CPU server answers stream=true with 501 (not implemented)


def test_observed_probes_get_vllms_answers(server, checkpoints):
    """Replay the 48 probes of observed_http.json in order (pause state carries over)."""
    observed = json.loads((CONTRACT / "observed_http.json").read_text())["probes"]
    checked = 0
    with httpx.Client(base_url=server.url) as http:
        for probe in observed:
            if STREAMING in probe["name"] and probe["status"] == 200:
                continue
            headers = dict(probe["request_headers"] or {})
            if probe["request_content"] is not None:
                kwargs: dict[str, Any] = {"content": probe["request_content"]}
            elif probe["request_json"] is not None:
                kwargs = {"json": _probe_request(probe, checkpoints["a"])}
            else:
                kwargs = {}
            response = http.request(probe["method"], probe["url"], headers=headers, **kwargs)
            _compare(probe, response)
            checked += 1
    assert checked >= 44


def _compare(probe: dict[str, Any], response: httpx.Response) -> None:
    name = probe["name"]
    assert response.status_code == probe["status"], f"{name}: {response.text[:300]}"
    expected = probe["body"]
    if expected == "":
        assert response.content == b"", name
        return
    got = response.json()
    if isinstance(expected, dict) and isinstance(expected.get("error"), dict):
        for key in ("type", "param", "code"):
            assert got["error"][key] == expected["error"][key], f"{name}: {key} {got}"
    elif isinstance(expected, dict) and "choices" in expected:
        assert list(got) == list(expected), f"{name}: key order"
        assert list(got["choices"][0]) == list(expected["choices"][0]), name
        if name == "generate_x_request_id_header":
            assert got["request_id"] == "generate-tokens-header-id"
    else:
        assert got == expected, name
    path = probe["url"].split("?")[0]
    check_response(
        Exchange(
            method=probe["method"],
            path=path,
            query={},
            request_body=b"",
            status=response.status_code,
            response_body=response.content,
        )
    )
