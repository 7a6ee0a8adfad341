"""`VLLMClient`: the one HTTP client of the inference contract (see `protocol`).

Retries are bounded and depend on what a retry could repeat:
- control routes (pause, resume, reload, labels, abort, health) are idempotent, so any
  transport failure is retried `attempts` times with doubling backoff;
- `generate` is retried only when the request cannot have started: a connection refused
  or not established in time (the request was never sent), or HTTP 503 (vLLM's "paused,
  retry after resume"). A read timeout or a dropped connection
  mid-request raises `InferenceUnavailable` at once: the caller records a failed episode
  instead of running it twice. (The transport resends, once, a request that the server
  never read: one written to a kept-alive connection the server was closing.)
Every error names the endpoint, the route and the cause.

Aborts use the engine's external id: vLLM prefixes the caller's `request_id` with
`generate-tokens-`, and `/inference/v1/abort_requests` matches only that prefixed id. The
client keeps the map for requests in flight, so callers abort by their own ids.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Final

import attrs
import httpx

from rolloutlog.runtime.live.protocol import (
    GenerateRequest,
    Generation,
    InferenceProtocolError,
    InferenceRejected,
    InferenceUnavailable,
    PauseMode,
    WeightVersionSpan,
)
from rolloutlog.runtime.live.transport import DEFAULT_KEEPALIVE_EXPIRY_S, StreamTransport

ENGINE_ID_PREFIX: Final = "generate-tokens-"
_FINISH_REASONS: Final = ("stop", "length", "abort", "repetition")


@attrs.frozen(kw_only=True)
class ClientLimits:
    """Timeouts and retry bounds. A keep-mode pause holds generate calls across a weight
    reload, so `generate_timeout_s` must cover the longest expected reload.
    `keepalive_expiry_s` must stay below the servers' keep-alive (vLLM's: 5 s)."""

    connect_timeout_s: float = 5.0
    generate_timeout_s: float = 300.0
    control_timeout_s: float = 30.0
    reload_timeout_s: float = 300.0
    attempts: int = 3
    backoff_s: float = 0.2
    paused_attempts: int = 50
    max_connections: int = 1024
    keepalive_expiry_s: float = DEFAULT_KEEPALIVE_EXPIRY_S

    def __attrs_post_init__(self) -> None:
        if min(self.attempts, self.paused_attempts, self.max_connections) < 1:
            raise ValueError("attempts, paused_attempts and max_connections must be >= 1")
        if self.keepalive_expiry_s < 0:
            raise ValueError(f"keepalive_expiry_s must be >= 0, got {self.keepalive_expiry_s}")


class VLLMClient:
    """An `InferenceBackend` over HTTP, for `vllm serve` and the CPU server alike."""

    def __init__(
        self,
        url: str,
        *,
        limits: ClientLimits | None = None,
        http: httpx.AsyncClient | None = None,
        model: str | None = None,
    ) -> None:
        self._url = url.rstrip("/")
        self.limits = limits or ClientLimits()
        self.model = model
        self._http = http if http is not None else _default_http(self.limits)
        self._engine_ids: dict[str, str] = {}

    @property
    def url(self) -> str:
        return self._url

    def __repr__(self) -> str:
        return f"VLLMClient({self._url!r})"

    # ---- routes ----------------------------------------------------------------------
    async def generate(self, request: GenerateRequest) -> Generation:
        body = request.to_json()
        if self.model is not None:
            body["model"] = self.model
        self._engine_ids[request.request_id] = ENGINE_ID_PREFIX + request.request_id
        try:
            response = await self._send(
                "POST",
                "/inference/v1/generate",
                json=body,
                timeout_s=self.limits.generate_timeout_s,
                idempotent=False,
            )
        finally:
            self._engine_ids.pop(request.request_id, None)
        return _parse_generation(
            request.request_id, self._where("/inference/v1/generate"), _json(response)
        )

    async def abort(self, request_ids: Sequence[str]) -> None:
        if not request_ids:
            return
        ids = [self._engine_ids.get(i, ENGINE_ID_PREFIX + i) for i in request_ids]
        await self._send("POST", "/inference/v1/abort_requests", json={"request_ids": ids})

    async def pause(self, mode: PauseMode = "keep", clear_cache: bool = True) -> None:
        params = {"mode": mode, "clear_cache": "true" if clear_cache else "false"}
        response = await self._send("POST", "/pause", params=params)
        _expect(response, self._where("/pause"), "status", "paused")

    async def resume(self) -> None:
        response = await self._send("POST", "/resume")
        _expect(response, self._where("/resume"), "status", "resumed")

    async def is_paused(self) -> bool:
        return bool(_field(await self._send("GET", "/is_paused"), "is_paused", bool))

    async def reload_weights(self, weights_path: str) -> None:
        body = {"method": "reload_weights", "kwargs": {"weights_path": weights_path}}
        await self._send(
            "POST", "/collective_rpc", json=body, timeout_s=self.limits.reload_timeout_s
        )

    async def update_weight_version(self, version: str) -> None:
        response = await self._send("POST", "/update_weight_version", json={"new_version": version})
        _expect(response, self._where("/update_weight_version"), "new_version", version)

    async def weight_version(self) -> str:
        return str(_field(await self._send("GET", "/weight_info"), "weight_version", str))

    async def health(self) -> bool:
        try:
            await self._send("GET", "/health")
        except (InferenceUnavailable, InferenceRejected):
            return False
        return True

    async def aclose(self) -> None:
        await self._http.aclose()

    # ---- transport -------------------------------------------------------------------
    def _where(self, path: str) -> str:
        return f"{self._url}{path}"

    async def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, str] | None = None,
        timeout_s: float | None = None,
        idempotent: bool = True,
    ) -> httpx.Response:
        """One route call with the retry policy of the module docstring."""
        url, where = self._where(path), f"{method} {self._where(path)}"
        timeout = httpx.Timeout(
            timeout_s or self.limits.control_timeout_s, connect=self.limits.connect_timeout_s
        )
        failures, paused, delay_s = 0, 0, self.limits.backoff_s
        while True:  # bounded: each pass spends one of `attempts` or `paused_attempts`
            try:
                response = await self._http.request(
                    method, url, json=json, params=params, timeout=timeout
                )
            except httpx.TransportError as error:
                failures += 1
                retryable = idempotent or isinstance(
                    error, httpx.ConnectError | httpx.ConnectTimeout
                )
                if not retryable or failures >= self.limits.attempts:
                    raise InferenceUnavailable(
                        f"{where}: no answer after {failures} attempt(s) "
                        f"({type(error).__name__}: {error or 'no detail'})"
                    ) from error
            else:
                paused += response.status_code == 503 and path != "/health"
                if response.status_code != 503 or paused in (0, self.limits.paused_attempts):
                    return _check_status(response, where)
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, 2.0)


def _default_http(limits: ClientLimits) -> httpx.AsyncClient:
    """httpx over `StreamTransport`: httpcore's pool costs more CPU per request than the
    model's decoding at the concurrency of a training run (see `transport`)."""
    transport = StreamTransport(
        max_connections=limits.max_connections, keepalive_expiry_s=limits.keepalive_expiry_s
    )
    return httpx.AsyncClient(transport=transport, trust_env=False)


def _check_status(response: httpx.Response, where: str) -> httpx.Response:
    if response.is_success:
        return response
    kind: str | None = None
    param: str | None = None
    message: str = response.text[:500]
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):  # vLLM's ErrorResponse
        kind, param = error.get("type"), error.get("param")
        message = str(error.get("message"))
    elif isinstance(error, str):  # the RL routes' own {"error": "..."}
        message = error
    raise InferenceRejected(
        f"{where} answered {response.status_code} {kind or ''}: {message}".replace("  ", " "),
        status=response.status_code,
        kind=kind,
        param=param,
    )


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError as error:
        raise InferenceProtocolError(
            f"{response.request.method} {response.request.url}: body is not JSON: "
            f"{response.text[:200]!r}"
        ) from error


def _field(response: httpx.Response, name: str, kind: type) -> Any:
    body = _json(response)
    if not isinstance(body, dict) or not isinstance(body.get(name), kind):
        raise InferenceProtocolError(f"{response.request.url}: expected {name!r} in {body!r}")
    return body[name]


def _expect(response: httpx.Response, where: str, name: str, value: Any) -> None:
    body = _json(response)
    if not isinstance(body, dict) or body.get(name) != value:
        raise InferenceProtocolError(f"{where}: expected {name}={value!r}, got {body!r}")


def _parse_generation(request_id: str, where: str, body: Any) -> Generation:
    """Read the one choice of a tokens-mode response, checking what the runtime relies on."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        raise InferenceProtocolError(f"{where}: expected one choice, got {body!r:.300}")
    choice = choices[0]
    tokens = choice.get("token_ids")
    reason = choice.get("finish_reason")
    if not isinstance(tokens, list) or reason not in _FINISH_REASONS:
        raise InferenceProtocolError(f"{where}: bad choice {choice!r:.300}")
    spans = tuple(WeightVersionSpan(**span) for span in choice.get("weight_versions") or [])
    if spans and (spans[0].start != 0 or spans[-1].end != len(tokens)):
        raise InferenceProtocolError(f"{where}: weight_versions {spans} do not cover the tokens")
    usage = body.get("usage") or {}
    return Generation(
        request_id=request_id,
        engine_request_id=str(body.get("request_id")),
        token_ids=tuple(tokens),
        logprobs=_parse_logprobs(where, choice.get("logprobs"), len(tokens)),
        finish_reason=reason,
        stop_reason=choice.get("stop_reason"),
        weight_versions=spans,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or len(tokens)),
    )


def _parse_logprobs(where: str, logprobs: Any, count: int) -> tuple[float, ...] | None:
    if logprobs is None:
        return None
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or len(content) != count:
        raise InferenceProtocolError(f"{where}: logprobs do not match the {count} tokens")
    return tuple(float(entry["logprob"]) for entry in content)
