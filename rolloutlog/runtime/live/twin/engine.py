"""The CPU inference engine: continuous batching over a torch model, with vLLM's semantics.

One engine thread steps every runnable request by one token per step (up to `max_batch`
requests, oldest first); HTTP threads submit requests and wait on their `done` event.

Choices, and why:
- No KV cache: each step recomputes the whole (at most 64-token) sequences. For this model
  that costs a few milliseconds per step, and it gives exactly vLLM's behaviour for a pause
  with `clear_cache=true` (its default): frozen requests are recomputed after a weight
  reload, so every token after the reload comes from the new weights.
- Pause modes mirror vLLM's scheduler: `keep` freezes in-flight requests and queues new
  ones; `abort` finishes them with `finish_reason="abort"` and rejects new ones; `wait`
  rejects new ones and lets in-flight ones finish. A pause returns only at a step boundary.
  An aborted request answers with the tokens it had (an interrupted request's partial
  output), and a request whose prompt is another's prompt plus those tokens continues it.
- `queue_when_paused=True` imitates vLLM 0.32 (the CPU build CI runs): a request sent
  during an `abort` or `wait` pause is held, not rejected, and joins the batch at resume.
- A weight reload swaps tensors between steps and does not touch the version label; the
  label changes only through `set_weight_version` (`/update_weight_version`), as in vLLM.
- Every limit is explicit: `max_batch` requests per step, `max_waiting` requests queued.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Final, Literal

import attrs
import torch

from rolloutlog.runtime.live.digits import EOS_ID, PAD_ID
from rolloutlog.runtime.live.model import LlamaForCausalLM, load_weights_into
from rolloutlog.runtime.live.twin.sampling import (
    RowParams,
    TokenLogprob,
    sample_tokens,
    sampled_logprobs,
    top_logprobs,
)

PauseMode = Literal["abort", "wait", "keep"]
FinishReason = Literal["stop", "length", "abort", "error"]
INITIAL_WEIGHT_VERSION: Final = "default"  # vLLM's engine-core label before any update


class EngineInputError(ValueError):
    """A request the engine refuses (HTTP 400); `param` names the offending field."""

    def __init__(self, message: str, param: str | None) -> None:
        super().__init__(message)
        self.param = param


class EnginePausedError(RuntimeError):
    """New requests are rejected while paused in `abort` or `wait` mode (HTTP 503)."""


class EngineOverloadedError(RuntimeError):
    """More than `max_waiting` requests are queued (HTTP 503)."""


@attrs.frozen(kw_only=True)
class SamplingSpec:
    """The validated sampling parameters the engine acts on (a subset of vLLM's)."""

    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_tokens: int = 0
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    logprobs: int | None = None


@attrs.define(eq=False)
class EngineRequest:
    """One request's state; mutated only under the engine's lock, read once `done` is set."""

    external_id: str
    prompt: list[int]
    spec: SamplingSpec
    max_tokens: int
    generator: torch.Generator | None
    output: list[int] = attrs.Factory(list)
    sampled: list[TokenLogprob] = attrs.Factory(list)
    top: list[list[TokenLogprob]] = attrs.Factory(list)
    labels: list[str] = attrs.Factory(list)
    finish_reason: FinishReason | None = None
    stop_reason: int | str | None = None
    error: str | None = None
    abort_requested: bool = False
    in_step: bool = False
    done: threading.Event = attrs.Factory(threading.Event)


class Engine:
    """Batched decoding of a `LlamaForCausalLM` with abort, pause, reload and version labels."""

    def __init__(
        self,
        model: LlamaForCausalLM,
        *,
        weights_dir: Path | None = None,
        max_batch: int = 256,
        max_waiting: int = 4096,
        seed: int = 0,
        min_step_s: float = 0.0,
        queue_when_paused: bool = False,
    ) -> None:
        self.model = model.eval()
        self.max_model_len = model.config.max_position_embeddings
        self.vocab_size = model.config.vocab_size
        self.weights_dir = weights_dir
        self.max_batch = max_batch
        self.max_waiting = max_waiting
        self.min_step_s = min_step_s  # > 0 imitates a slower model (tests, benchmarks)
        self._seeds = random.Random(seed)
        self._cond = threading.Condition()
        self._model_lock = threading.Lock()
        self._active: list[EngineRequest] = []
        self._held: list[EngineRequest] = []  # sent during an abort/wait pause (0.32)
        self.queue_when_paused = queue_when_paused
        self._pause_mode: PauseMode | None = None
        self._stepping = False
        self._stopping = False
        self._label = INITIAL_WEIGHT_VERSION
        self._thread = threading.Thread(target=self._run, name="engine", daemon=True)
        self.steps_total = 0
        self.tokens_total = 0

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> Engine:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Finish every request with `abort`, then end the engine thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        with self._cond:
            for request in self._active + self._held:
                self._finish(request, "abort")
            self._active.clear()
            self._held.clear()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._stopping

    @property
    def unfinished(self) -> int:
        """Requests queued or running (not yet finished)."""
        with self._cond:
            return len(self._active) + len(self._held)

    # ---- requests --------------------------------------------------------------------
    def submit(self, external_id: str, prompt: list[int], spec: SamplingSpec) -> EngineRequest:
        """Queue a request; raises `EngineInputError`, `EnginePausedError` or overload."""
        max_tokens = self._check_request(prompt, spec)
        seed = spec.seed if spec.seed is not None else self._seeds.getrandbits(63)
        greedy = spec.temperature < 1e-5
        generator = None if greedy else torch.Generator().manual_seed(seed)
        request = EngineRequest(external_id, list(prompt), spec, max_tokens, generator)
        with self._cond:
            held = self._pause_mode in ("abort", "wait")
            if held and not self.queue_when_paused:
                raise EnginePausedError("Generation is paused. Please retry after it resumes.")
            if len(self._active) + len(self._held) >= self.max_waiting:
                raise EngineOverloadedError(f"more than {self.max_waiting} requests queued")
            (self._held if held else self._active).append(request)
            self._cond.notify_all()
        return request

    def _check_request(self, prompt: list[int], spec: SamplingSpec) -> int:
        if spec.seed is not None and not -(2**63) <= spec.seed < 2**64:
            raise EngineInputError(f"seed must fit in 64 bits, got {spec.seed}.", "seed")
        if any(token >= self.vocab_size for token in prompt):
            raise EngineInputError(
                f"Token id {max(prompt)} is out of vocabulary (vocab size {self.vocab_size}).",
                "token_ids",
            )
        room = self.max_model_len - len(prompt)
        if room < 1:
            raise EngineInputError(
                f"The prompt (length {len(prompt)}) is longer than the maximum model length "
                f"of {self.max_model_len}.",
                "token_ids",
            )
        max_tokens = room if spec.max_tokens is None else spec.max_tokens
        if max_tokens > room:
            raise EngineInputError(
                f"This model's maximum context length is {self.max_model_len} tokens. However, "
                f"you requested {len(prompt) + max_tokens} tokens ({len(prompt)} in the "
                f"prompt, {max_tokens} in the completion).",
                "max_tokens",
            )
        return max_tokens

    def abort(self, external_ids: Iterable[str] | None) -> int:
        """Abort the requests with these ids (all when `None`); unknown ids are ignored."""
        with self._cond:
            wanted = None if external_ids is None else set(external_ids)
            pool = self._active + self._held
            hits = [r for r in pool if wanted is None or r.external_id in wanted]
            for request in hits:
                request.abort_requested = True
                if not request.in_step:
                    self._finish(request, "abort")
            self._active = [r for r in self._active if not r.done.is_set()]
            self._held = [r for r in self._held if not r.done.is_set()]
            self._cond.notify_all()
            return len(hits)

    # ---- pause, resume, weights ------------------------------------------------------
    def pause(self, mode: PauseMode, timeout_s: float = 60.0) -> None:
        """Pause as vLLM does in `mode`; returns once no step is running (and, for `wait`,
        once in-flight requests have finished)."""
        with self._cond:
            self._pause_mode = mode
            self._cond.notify_all()
        if mode == "abort":
            with self._cond:
                running = [r.external_id for r in self._active]
            self.abort(running)
        with self._cond:
            settled = self._cond.wait_for(
                lambda: not self._stepping and (mode != "wait" or not self._active), timeout_s
            )
        if not settled:
            raise TimeoutError(f"pause({mode}) did not settle within {timeout_s} s")

    def resume(self) -> None:
        with self._cond:
            self._pause_mode = None
            self._active.extend(self._held)
            self._held.clear()
            self._cond.notify_all()

    @property
    def is_paused(self) -> bool:
        return self._pause_mode is not None

    @property
    def weight_version(self) -> str:
        return self._label

    def set_weight_version(self, label: str) -> None:
        """Label the tokens of every later step; the only way the label changes."""
        with self._cond:
            self._label = label

    def reload_weights(self, weights_dir: Path | None) -> None:
        """Load a checkpoint directory in place, between two steps (the initial one if None)."""
        directory = weights_dir or self.weights_dir
        if directory is None:
            raise ValueError("no weights_path given and the engine has no initial weights")
        with self._model_lock:
            load_weights_into(self.model, directory)
        self.weights_dir = directory

    # ---- the engine thread -----------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopping or self._runnable())
                if self._stopping:
                    return
                batch = self._active[: self.max_batch]
                for request in batch:
                    request.in_step = True
                label = self._label
                self._stepping = True
            try:
                outcome: list[tuple[TokenLogprob, list[TokenLogprob]]] | str = self._step(batch)
            except Exception as error:  # a failed step fails its requests, not the server
                outcome = f"{type(error).__name__}: {error}"
            with self._cond:
                self._apply(batch, outcome, label)
                self._stepping = False
                self._cond.notify_all()

    def _runnable(self) -> bool:
        return bool(self._active) and self._pause_mode not in ("keep", "abort")

    def _step(self, batch: list[EngineRequest]) -> list[tuple[TokenLogprob, list[TokenLogprob]]]:
        """One forward pass over the batch and one sampled token per request."""
        if self.min_step_s > 0:
            time.sleep(self.min_step_s)
        sequences = [r.prompt + r.output for r in batch]
        lengths = torch.tensor([len(s) for s in sequences])
        tokens = torch.full((len(batch), int(lengths.max())), PAD_ID, dtype=torch.long)
        for row, sequence in enumerate(sequences):
            tokens[row, : len(sequence)] = torch.tensor(sequence)
        with self._model_lock, torch.inference_mode():
            logits = self.model(tokens)[torch.arange(len(batch)), lengths - 1].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        rows = [self._row_params(r) for r in batch]
        sampled = sampled_logprobs(logprobs, sample_tokens(logits, rows))
        tops = [
            top_logprobs(logprobs[i], sampled[i], r.spec.logprobs or 0) if r.spec.logprobs else []
            for i, r in enumerate(batch)
        ]
        return list(zip(sampled, tops, strict=True))

    @staticmethod
    def _row_params(request: EngineRequest) -> RowParams:
        generator = request.generator
        uniform = 0.0 if generator is None else float(torch.rand(1, generator=generator))
        spec = request.spec
        return RowParams(
            temperature=spec.temperature, top_p=spec.top_p, top_k=spec.top_k, uniform=uniform
        )

    def _apply(
        self,
        batch: list[EngineRequest],
        outcome: list[tuple[TokenLogprob, list[TokenLogprob]]] | str,
        label: str,
    ) -> None:
        self.steps_total += 1
        for index, request in enumerate(batch):
            request.in_step = False
            if request.done.is_set():
                continue
            if isinstance(outcome, str):
                request.error = outcome
                self._finish(request, "error")
            elif request.abort_requested:
                self._finish(request, "abort")
            else:
                sampled, top = outcome[index]
                self._append(request, sampled, top, label)
        self._active = [r for r in self._active if not r.done.is_set()]

    def _append(
        self, request: EngineRequest, sampled: TokenLogprob, top: list[TokenLogprob], label: str
    ) -> None:
        request.output.append(sampled.token_id)
        request.sampled.append(sampled)
        request.top.append(top)
        request.labels.append(label)
        self.tokens_total += 1
        token, spec = sampled.token_id, request.spec
        may_stop = len(request.output) >= spec.min_tokens
        if may_stop and token in spec.stop_token_ids:
            request.stop_reason = token
            self._finish(request, "stop")
        elif may_stop and token == EOS_ID and not spec.ignore_eos:
            self._finish(request, "stop")
        elif len(request.output) >= request.max_tokens:
            self._finish(request, "length")

    @staticmethod
    def _finish(request: EngineRequest, reason: FinishReason) -> None:
        if not request.done.is_set():
            request.finish_reason = reason
            request.done.set()
