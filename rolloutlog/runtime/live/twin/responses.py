"""vLLM 0.33's generate response body, built from a finished engine request.

The route returns `JSONResponse(model.model_dump())`, so every declared key is present,
nulls included, in the model's field order; `generate_response.emitted.schema.json` pins
that key set and the contract tests check this module against it.
"""

from __future__ import annotations

import time
from typing import Any

from rolloutlog.runtime.live.twin.engine import EngineRequest
from rolloutlog.runtime.live.twin.sampling import TokenLogprob

REQUEST_ID_PREFIX = "generate-tokens-"  # vLLM prefixes the caller's id with this


def weight_version_spans(labels: list[str]) -> list[dict[str, Any]]:
    """Half-open `[start, end)` runs of equal labels over output-token indexes."""
    spans: list[dict[str, Any]] = []
    for index, label in enumerate(labels):
        if spans and spans[-1]["version"] == label:
            spans[-1]["end"] = index + 1
        else:
            spans.append({"version": label, "start": index, "end": index + 1})
    return spans


def _logprob_entry(entry: TokenLogprob) -> dict[str, Any]:
    return {"token_id": entry.token_id, "logprob": entry.logprob, "rank": entry.rank or None}


def _logprobs(request: EngineRequest) -> dict[str, Any] | None:
    if request.spec.logprobs is None:
        return None
    content = [
        {**_logprob_entry(sampled), "top_logprobs": [_logprob_entry(t) for t in top]}
        for sampled, top in zip(request.sampled, request.top, strict=True)
    ]
    return {"content": content}


def generate_body(
    request: EngineRequest, model_name: str, return_token_ids: bool
) -> dict[str, Any]:
    """The `GenerateTokensResponse` for one finished request (`n = 1`: one choice)."""
    prompt_tokens, completion_tokens = len(request.prompt), len(request.output)
    return {
        "request_id": request.external_id,
        "model": model_name,
        "created": int(time.time()),
        "usage": {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
            "prompt_tokens_details": None,
            "completion_tokens_details": None,
        },
        "prompt_logprobs": None,
        "prompt_token_id_logprobs": None,
        "prompt_token_ids": list(request.prompt) if return_token_ids else None,
        "mm_placeholders": None,
        "metrics": None,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "output_mode": "tokens",
        "choices": [
            {
                "index": 0,
                "finish_reason": request.finish_reason or "stop",
                "stop_reason": request.stop_reason,
                "token_ids": list(request.output),
                "routed_experts": None,
                "sampling_mask": None,
                "weight_versions": weight_version_spans(request.labels),
                "logprobs": _logprobs(request),
            }
        ],
    }
