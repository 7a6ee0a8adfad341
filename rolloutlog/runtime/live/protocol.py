"""The inference contract: one Python protocol, one method per HTTP route of `vllm serve`.

The runtime talks to inference only through `InferenceBackend`. Its one implementation,
`client.VLLMClient`, speaks the HTTP API of vLLM 0.33 (`VLLM_SERVER_DEV_MODE=1`,
`--tokens-only`), which both `vllm serve` and this project's CPU server answer; so the
code that CI runs against the CPU server is the code that production runs against vLLM.

| method | route |
|---|---|
| `generate` | `POST /inference/v1/generate` |
| `abort` | `POST /inference/v1/abort_requests` |
| `pause` | `POST /pause?mode=…&clear_cache=…` |
| `resume` | `POST /resume` |
| `is_paused` | `GET /is_paused` |
| `reload_weights` | `POST /collective_rpc` `{"method": "reload_weights", …}` |
| `update_weight_version` | `POST /update_weight_version` |
| `weight_version` | `GET /weight_info` |
| `health` | `GET /health` |

Methods are async: the runtime keeps many generate calls in flight at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal, Protocol

import attrs

PauseMode = Literal["abort", "wait", "keep"]
FinishReason = Literal["stop", "length", "abort", "repetition"]
CACHE_SALT_CHARS_MAX: Final = 128
CACHE_SALT_FORBIDDEN: Final = ("@", "/", "\\", "\x00")


class InferenceError(Exception):
    """Inference could not do what was asked; the message names the endpoint and route."""


class InferenceUnavailable(InferenceError):
    """The endpoint did not answer (refused, reset, timed out) after the bounded retries."""


class InferenceRejected(InferenceError):
    """The endpoint answered with an error status; `status`, `kind` and `param` say why."""

    def __init__(self, message: str, *, status: int, kind: str | None, param: str | None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.param = param


class InferenceProtocolError(InferenceError):
    """The endpoint answered 200 with a body that breaks the contract."""


def check_cache_salt(salt: str) -> str:
    """vLLM's rules for `cache_salt` (stricter than its JSON schema): 1-128 chars, no `@/\\`
    or NUL. Checked before sending, so a bad salt is a clear error and not a 400."""
    if not 0 < len(salt) <= CACHE_SALT_CHARS_MAX:
        raise ValueError(f"cache_salt must have 1 to 128 characters, got {len(salt)}: {salt!r}")
    bad = [c for c in CACHE_SALT_FORBIDDEN if c in salt]
    if bad:
        raise ValueError(f"cache_salt must not contain {bad!r}: {salt!r}")
    return salt


@attrs.frozen(kw_only=True)
class SamplingParams:
    """The `sampling_params` an RL rollout sends; `logprobs=0` asks for the sampled token's."""

    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    logprobs: int | None = 0

    def to_json(self) -> dict[str, Any]:
        """Only the keys that differ from vLLM's defaults, plus `max_tokens` when set."""
        body: dict[str, Any] = {"temperature": self.temperature}
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.top_p != 1.0:
            body["top_p"] = self.top_p
        if self.top_k != 0:
            body["top_k"] = self.top_k
        if self.seed is not None:
            body["seed"] = self.seed
        if self.stop_token_ids:
            body["stop_token_ids"] = list(self.stop_token_ids)
        if self.ignore_eos:
            body["ignore_eos"] = True
        if self.logprobs is not None:
            body["logprobs"] = self.logprobs
        return body


@attrs.frozen(kw_only=True)
class GenerateRequest:
    """One generation: the caller names it (`request_id`), and may salt the prefix cache."""

    request_id: str
    token_ids: tuple[int, ...]
    sampling: SamplingParams = SamplingParams()
    cache_salt: str | None = None

    def __attrs_post_init__(self) -> None:
        if not self.request_id:
            raise ValueError("request_id must be a non-empty string")
        if not self.token_ids or min(self.token_ids) < 0:
            raise ValueError(f"token_ids must be non-empty and >= 0, got {self.token_ids!r}")
        if self.cache_salt is not None:
            check_cache_salt(self.cache_salt)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "request_id": self.request_id,
            "token_ids": list(self.token_ids),
            "sampling_params": self.sampling.to_json(),
        }
        if self.cache_salt is not None:
            body["cache_salt"] = self.cache_salt
        return body


@attrs.frozen(kw_only=True)
class WeightVersionSpan:
    """Output tokens `[start, end)` were sampled by the weights labelled `version`."""

    version: str
    start: int
    end: int


@attrs.frozen(kw_only=True)
class Generation:
    """A finished generate call. `engine_request_id` is vLLM's prefixed id."""

    request_id: str
    engine_request_id: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...] | None
    finish_reason: FinishReason
    stop_reason: int | str | None
    weight_versions: tuple[WeightVersionSpan, ...]
    prompt_tokens: int
    completion_tokens: int

    @property
    def aborted(self) -> bool:
        return self.finish_reason == "abort"


class InferenceBackend(Protocol):
    """One inference endpoint, route by route (see the module docstring)."""

    @property
    def url(self) -> str: ...

    async def generate(self, request: GenerateRequest) -> Generation:
        """Run one request to its end (stop, length, or abort)."""
        ...

    async def abort(self, request_ids: Sequence[str]) -> None:
        """Abort in-flight requests by the caller's ids; unknown ids are ignored."""
        ...

    async def pause(self, mode: PauseMode = "keep", clear_cache: bool = True) -> None: ...

    async def resume(self) -> None: ...

    async def is_paused(self) -> bool: ...

    async def reload_weights(self, weights_path: str) -> None:
        """Load a checkpoint directory; does not change the weight-version label."""
        ...

    async def update_weight_version(self, version: str) -> None: ...

    async def weight_version(self) -> str: ...

    async def health(self) -> bool:
        """True when the endpoint answers 200; False on 503 or no answer."""
        ...

    async def aclose(self) -> None: ...
