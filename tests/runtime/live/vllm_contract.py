"""The vendored vLLM 0.33 contract (tests/contract/vllm) as validators, and a traffic recorder.

`Recorder` plugs into an `httpx.AsyncClient` as event hooks and keeps every exchange the
client makes; `check_exchange` validates one request and its response against the schema
of its route and status. Tests use both so that every request the client sends and every
response the CPU server returns is checked, not just the ones a test looks at.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Iterator
from functools import cache
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import attrs
import httpx
import pytest
from jsonschema import Draft202012Validator

CONTRACT = Path(__file__).resolve().parents[3] / "tests" / "contract" / "vllm"
T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine on a fresh event loop (the tests need no pytest-asyncio)."""
    return asyncio.run(coroutine)


async def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    """Poll `condition` until it holds; past the deadline, fail naming `what` was awaited."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"waited {timeout_s} s for {what}")
        await asyncio.sleep(0.01)


async def wait_for_engine_requests(url: str, count: int, timeout_s: float = 30.0) -> None:
    """Wait until the server at `url` holds `count` requests (running or waiting), as its
    `/metrics` says: a condition with a deadline, not a guess at how long sending takes."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    async with httpx.AsyncClient(trust_env=False) as http:
        while True:
            text = (await http.get(f"{url}/metrics")).raise_for_status().text
            held = sum(
                float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting"))
            )
            if held == count:
                return
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"waited {timeout_s} s for {count} requests at {url}")
            await asyncio.sleep(0.01)


REQUEST_SCHEMAS = {
    ("POST", "/inference/v1/generate"): "generate_request",
    ("POST", "/inference/v1/abort_requests"): "abort_requests_request",
    ("POST", "/abort_requests"): "abort_requests_request",
    ("POST", "/collective_rpc"): "collective_rpc_request",
    ("POST", "/update_weight_version"): "update_weight_version_request",
}
OK_SCHEMAS = {
    ("POST", "/inference/v1/generate"): ["generate_response.emitted", "generate_tokens_response"],
    ("POST", "/abort_requests"): ["abort_requests_rl_response"],
    ("POST", "/pause"): ["pause_response"],
    ("POST", "/resume"): ["resume_response"],
    ("GET", "/is_paused"): ["is_paused_response"],
    ("POST", "/collective_rpc"): ["collective_rpc_response"],
    ("POST", "/update_weight_version"): ["update_weight_version_response"],
    ("GET", "/weight_info"): ["weight_info_response"],
}
EMPTY_OK = {("POST", "/inference/v1/abort_requests"), ("GET", "/health")}
BODYLESS = {("POST", "/pause"), ("POST", "/resume"), ("GET", "/is_paused"),
            ("GET", "/weight_info"), ("GET", "/health")}  # fmt: skip
RL_ROUTES = {"/pause", "/resume", "/is_paused", "/abort_requests"}


@cache
def validator(name: str) -> Draft202012Validator:
    schema = json.loads((CONTRACT / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def validate(name: str, instance: Any) -> None:
    errors = sorted(validator(name).iter_errors(instance), key=lambda e: list(e.path))
    if errors:
        details = "; ".join(f"{list(e.path)}: {e.message[:200]}" for e in errors[:5])
        raise AssertionError(f"{name}: {details}\ninstance: {json.dumps(instance)[:600]}")


@attrs.frozen
class Exchange:
    method: str
    path: str
    query: dict[str, list[str]]
    request_body: bytes
    status: int
    response_body: bytes


def check_exchange(exchange: Exchange) -> None:
    """The request matches its route's request schema; the response its status's schema."""
    key = (exchange.method, exchange.path)
    if key in REQUEST_SCHEMAS:
        validate(REQUEST_SCHEMAS[key], json.loads(exchange.request_body))
    elif key in BODYLESS:
        assert exchange.request_body == b"", f"{key} sent a body"
    if key == ("POST", "/pause"):
        query = {k: v[-1] for k, v in exchange.query.items()}
        if "clear_cache" in query:
            query["clear_cache"] = {"true": True, "false": False}[query["clear_cache"]]
        validate("pause_query", query)
    check_response(exchange)


def check_response(exchange: Exchange) -> None:
    """The response matches the schema of its route and status."""
    key = (exchange.method, exchange.path)
    if exchange.status == 499:  # the client went away; nobody reads this answer
        return
    if 200 <= exchange.status < 300:
        if key in EMPTY_OK:
            assert exchange.response_body == b"", f"{key}: expected an empty body"
            return
        body = json.loads(exchange.response_body)
        for name in OK_SCHEMAS[key]:
            validate(name, body)
        return
    if key == ("GET", "/health"):
        assert exchange.response_body == b""
        return
    body = json.loads(exchange.response_body)
    if exchange.path in RL_ROUTES and isinstance(body.get("error"), str):
        validate("rl_error", body)
    else:
        validate("error_response", body)
        assert body["error"]["code"] == exchange.status


class Recorder:
    """httpx event hooks that keep every exchange (request and response bytes)."""

    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []
        self.sent: list[tuple[str, str, bytes]] = []  # every request, answered or not

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        hooks = {"request": [self._on_request], "response": [self._on_response]}
        return httpx.AsyncClient(event_hooks=hooks, **kwargs)

    async def _on_request(self, request: httpx.Request) -> None:
        self.sent.append((request.method, urlsplit(str(request.url)).path, request.content))

    async def _on_response(self, response: httpx.Response) -> None:
        await response.aread()
        request = response.request
        parts = urlsplit(str(request.url))
        self.exchanges.append(
            Exchange(
                method=request.method,
                path=parts.path,
                query=parse_qs(parts.query),
                request_body=request.content,
                status=response.status_code,
                response_body=response.content,
            )
        )

    def check_all(self) -> int:
        """Validate every request sent and every response received; their count."""
        for method, path, body in self.sent:
            if (method, path) in REQUEST_SCHEMAS:
                validate(REQUEST_SCHEMAS[(method, path)], json.loads(body))
        for exchange in self.exchanges:
            check_exchange(exchange)
        return len(self.sent) + len(self.exchanges)

    def routes(self) -> set[tuple[str, str]]:
        return {(e.method, e.path) for e in self.exchanges}


@pytest.fixture(name="recorder")
def recorder_fixture() -> Iterator[Recorder]:
    """A fixture: every exchange its clients make is checked against the schemas at the end."""
    recording = Recorder()
    yield recording
    assert recording.check_all() > 0, "the contract recorder saw no traffic"
