"""Checks on `POST /inference/v1/generate` bodies that answer as vLLM 0.33 answers.

vLLM refuses bad input in two layers, with two error `type`s, and clients see both:
- pydantic/FastAPI validation (wrong type, missing field, empty `token_ids`, negative ids,
  bad JSON, wrong Content-Type): HTTP 400, `type: "Bad Request"`, `param: "body.<field>"`,
  and a message that starts `1 validation error:`;
- `SamplingParams` and `cache_salt` value checks: HTTP 400, `type: "BadRequestError"`,
  `param: "<field>"`, message `... (parameter=<field>, value=<value>)`.
The messages below copy the ones observed from vLLM's routers (tests/contract/vllm), so
the CPU server is a faithful twin for every input a client can get wrong. Sampling
features this engine does not implement are refused with HTTP 501 rather than ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import attrs

from rolloutlog.runtime.live.protocol import CACHE_SALT_CHARS_MAX, CACHE_SALT_FORBIDDEN
from rolloutlog.runtime.live.twin.engine import SamplingSpec

LOGPROBS_MAX: Final = 20  # vLLM's default --max-logprobs
_UNSUPPORTED_DEFAULTS: Final[dict[str, Any]] = {
    "n": 1,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "repetition_penalty": 1.0,
    "min_p": 0.0,
    "stop": None,
    "prompt_logprobs": None,
    "logit_bias": None,
    "allowed_token_ids": None,
    "bad_words": None,
    "structured_outputs": None,
}


class ApiError(Exception):
    """An HTTP error answered with vLLM's `ErrorResponse` body."""

    def __init__(self, status: int, kind: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.param = param

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.status,
            }
        }


def schema_error(error_type: str, loc: str, msg: str, value: Any = None) -> ApiError:
    """The 400 that vLLM's RequestValidationError handler builds from one pydantic error."""
    shown = _describe(value)
    detail = {"type": error_type, "loc": loc, "msg": msg, "input": shown}
    return ApiError(400, "Bad Request", f"1 validation error:\n  {detail}", loc)


def value_error(param: str, message: str, value: Any) -> ApiError:
    """The 400 that vLLM raises from `SamplingParams` value checks (VLLMValidationError)."""
    return ApiError(400, "BadRequestError", f"{message} (parameter={param}, value={value})", param)


def _describe(value: Any) -> Any:
    if isinstance(value, dict):
        return f"<dict of {len(value)} items>"
    if isinstance(value, list):
        return f"<list of {len(value)} items>"
    return str(value)


def parse_json_body(raw: bytes, content_type: str | None) -> Any:
    """The decoded body; vLLM refuses anything but `application/json` with a 400."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media != "application/json":
        raise ApiError(
            400,
            "Bad Request",
            "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed",
        )
    try:
        return json.loads(raw or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        position = getattr(error, "pos", 0)
        raise schema_error("json_invalid", f"body.{position}", "JSON decode error", {}) from error


@attrs.frozen(kw_only=True)
class GenerateInput:
    """A validated generate body: what the engine needs, and what the response echoes."""

    request_id: str | None
    token_ids: list[int]
    spec: SamplingSpec
    cache_salt: str | None
    model: str | None
    return_token_ids: bool


def check_generate_body(body: Any) -> GenerateInput:
    """Validate a decoded generate body in vLLM's order: schema, then values."""
    if not isinstance(body, dict):
        raise schema_error("model_attributes_type", "body", "Input should be a valid dictionary")
    for field in ("token_ids", "sampling_params"):
        if field not in body:
            raise schema_error("missing", f"body.{field}", "Field required", body)
    token_ids = _check_token_ids(body["token_ids"])
    params = body["sampling_params"]
    if not isinstance(params, dict):
        raise schema_error("dict_type", "body.sampling_params", "Input should be an object", params)
    _check_options(body)
    return GenerateInput(
        request_id=_optional(body, "request_id", str, "string_type"),
        token_ids=token_ids,
        spec=check_sampling_params(params),
        cache_salt=check_cache_salt(body.get("cache_salt")),
        model=_optional(body, "model", str, "string_type"),
        return_token_ids=bool(body.get("return_token_ids") or False),
    )


def _check_token_ids(value: Any) -> list[int]:
    loc = "body.token_ids"
    if not isinstance(value, list):
        raise schema_error("list_type", loc, "Input should be a valid list", value)
    if not value:
        raise schema_error(
            "too_short", loc, "List should have at least 1 item after validation, not 0", value
        )
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        raise schema_error("int_type", loc, "Input should be a valid integer", value)
    if any(t < 0 for t in value):
        raise schema_error(
            "value_error", loc, "Value error, token_ids must not contain negative values", value
        )
    return list(value)


def _check_options(body: Mapping[str, Any]) -> None:
    mode = body.get("output_mode")
    if mode not in (None, "tokens", "text", "derender"):
        raise schema_error(
            "literal_error",
            "body.output_mode",
            "Input should be 'tokens', 'text' or 'derender'",
            mode,
        )
    if mode in ("text", "derender"):
        raise ApiError(
            400,
            "BadRequestError",
            f"output_mode={mode!r} requires a tokenizer, but this server does not load one "
            "(--tokens-only or --skip-tokenizer-init). Send the request to a server that "
            "loads a tokenizer, or use output_mode='tokens'.",
        )
    if body.get("stream"):
        raise ApiError(501, "NotImplementedError", "stream=true is not supported by this server")


def _optional(body: Mapping[str, Any], field: str, kind: type, error_type: str) -> Any:
    value = body.get(field)
    if value is not None and not isinstance(value, kind):
        raise schema_error(error_type, f"body.{field}", "Input should be a valid string", value)
    return value


def check_cache_salt(value: Any) -> str | None:
    """vLLM's before-validator: non-empty, at most 128 chars, none of `@ / \\ NUL`."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise schema_error("string_type", "body.cache_salt", "Input should be a valid string")
    if not value:
        message = "Parameter 'cache_salt' must be a non-empty string if provided."
        raise ApiError(400, "BadRequestError", f"{message} (parameter=cache_salt)", "cache_salt")
    if len(value) > CACHE_SALT_CHARS_MAX or any(c in value for c in CACHE_SALT_FORBIDDEN):
        message = (
            "Parameter 'cache_salt' must be at most 128 characters and must not contain "
            "'@', '/', '\\\\', or NUL."
        )
        raise ApiError(400, "BadRequestError", f"{message} (parameter=cache_salt)", "cache_salt")
    return value


def check_sampling_params(params: Mapping[str, Any]) -> SamplingSpec:
    """Type checks (schema layer), then vLLM's value checks; unknown keys are ignored."""
    for name, default in _UNSUPPORTED_DEFAULTS.items():
        if params.get(name, default) not in (default, None):
            raise ApiError(
                501,
                "NotImplementedError",
                f"sampling_params.{name}={params[name]!r} is not supported by this server",
            )
    spec = SamplingSpec(
        max_tokens=_number(params, "max_tokens", int, None),
        temperature=_number(params, "temperature", float, 1.0),
        top_p=_number(params, "top_p", float, 1.0),
        top_k=_number(params, "top_k", int, 0),
        min_tokens=_number(params, "min_tokens", int, 0),
        seed=_number(params, "seed", int, None),
        stop_token_ids=tuple(_int_list(params, "stop_token_ids")),
        ignore_eos=bool(params.get("ignore_eos") or False),
        logprobs=_number(params, "logprobs", int, None),
    )
    _check_values(spec)
    return spec


def _number(params: Mapping[str, Any], name: str, kind: type, default: Any) -> Any:
    value = params.get(name, default)
    if value is None:
        return default
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if not numeric or (kind is int and not float(value).is_integer()):
        word = "integer" if kind is int else "number"
        raise schema_error(
            f"{'int' if kind is int else 'float'}_parsing",
            f"body.sampling_params.{name}",
            f"Input should be a valid {word}",
            value,
        )
    return kind(value)


def _int_list(params: Mapping[str, Any], name: str) -> list[int]:
    value = params.get(name) or []
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise schema_error(
            "list_type", f"body.sampling_params.{name}", "Input should be a valid list", value
        )
    return value


def _check_values(spec: SamplingSpec) -> None:
    """`SamplingParams._verify_args`, for the fields this engine implements."""
    if spec.temperature < 0.0:
        raise value_error(
            "temperature",
            f"temperature must be non-negative, got {spec.temperature}.",
            spec.temperature,
        )
    if spec.temperature > 2.0:
        raise value_error(
            "temperature",
            f"temperature must be at most 2.0, got {spec.temperature}.",
            spec.temperature,
        )
    if not 0.0 < spec.top_p <= 1.0:
        raise value_error("top_p", f"top_p must be in (0, 1], got {spec.top_p}.", spec.top_p)
    if spec.top_k < -1:
        message = f"top_k must be 0 (disable), or at least 1, got {spec.top_k}."
        raise value_error("top_k", message, spec.top_k)
    if spec.max_tokens is not None and spec.max_tokens < 1:
        message = f"max_tokens must be at least 1, got {spec.max_tokens}."
        raise value_error("max_tokens", message, spec.max_tokens)
    if spec.min_tokens < 0 or (spec.max_tokens is not None and spec.min_tokens > spec.max_tokens):
        message = f"min_tokens must be in [0, max_tokens], got {spec.min_tokens}."
        raise value_error("min_tokens", message, spec.min_tokens)
    if spec.logprobs is not None and not 0 <= spec.logprobs <= LOGPROBS_MAX:
        message = f"Requested sample logprobs of {spec.logprobs}, which is greater than max of "
        raise value_error("logprobs", f"{message}{LOGPROBS_MAX}", spec.logprobs)
