"""A small Llama-architecture causal LM built in code, saved and loaded in Hugging Face layout.

Why Llama: it is the architecture every inference server loads first. The module mirrors
`transformers`' `LlamaForCausalLM` parameter by parameter (names, shapes, RMSNorm, rotary
embedding with `rotate_half`, SwiGLU MLP, no biases), so a checkpoint written here
(`config.json` + `model.safetensors`) is a valid Hugging Face checkpoint that `vllm serve`
could load, and the CPU engine, the trainer and vLLM compute the same logits.

Why this size: the digit-sorting task has a 16-token vocabulary and sequences of at most
15 tokens, so a 2-layer, 128-wide model (~0.4 M parameters) learns it quickly while one
decode step of a 64-sequence batch stays around a millisecond on one CPU core. The head
dimension is 32, a size every vLLM attention backend supports.

Weights are read with `safetensors` only: never `torch.load`, never pickle.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import attrs
import torch
from safetensors.torch import load_file, save
from torch import nn
from torch.nn import functional

from rolloutlog.events.whole_file import naming
from rolloutlog.runtime.live.digits import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
# Readable by group and others: an inference server often runs as another user on a
# shared filesystem (safetensors writes its file 0600, whatever the umask says).
CHECKPOINT_FILE_MODE = 0o644


class CheckpointError(ValueError):
    """A checkpoint directory is missing a file, or its tensors do not fit the model."""


@attrs.frozen(kw_only=True)
class ModelConfig:
    """The architecture, with Hugging Face's `LlamaConfig` key names."""

    vocab_size: int = VOCAB_SIZE
    hidden_size: int = 128
    intermediate_size: int = 256
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    max_position_embeddings: int = 128
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    initializer_range: float = 0.02

    def __attrs_post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"hidden_size {self.hidden_size} must divide by "
                f"num_attention_heads {self.num_attention_heads}"
            )
        if self.num_attention_heads % self.num_key_value_heads != 0:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def to_hf(self) -> dict[str, Any]:
        """The `config.json` that `transformers` and vLLM read for `LlamaForCausalLM`."""
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            **attrs.asdict(self),
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "attention_bias": False,
            "mlp_bias": False,
            "tie_word_embeddings": False,
            "bos_token_id": BOS_ID,
            "eos_token_id": EOS_ID,
            "pad_token_id": PAD_ID,
            "torch_dtype": "float32",
            "use_cache": True,
        }

    @classmethod
    def from_hf(cls, data: dict[str, Any]) -> ModelConfig:
        """Read back the keys this module understands; refuse another architecture."""
        if data.get("model_type") != "llama":
            raise CheckpointError(f"config.json: model_type must be 'llama', got {data!r:.200}")
        names = [field.name for field in attrs.fields(cls)]
        return cls(**{name: data[name] for name in names if name in data})


class RMSNorm(nn.Module):
    """Llama's RMSNorm, computed in float32 as `LlamaRMSNorm` does."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        variance = hidden.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden.float() * torch.rsqrt(variance + self.eps))


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


class Attention(nn.Module):
    """Causal self-attention with rotary positions (Hugging Face's `rotate_half` layout)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        hidden = config.hidden_size
        self.q_proj = nn.Linear(hidden, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=False)

    def forward(self, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, length, _ = hidden.shape
        q = self.q_proj(hidden).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        attended = functional.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads
        )
        output: torch.Tensor = self.o_proj(attended.transpose(1, 2).reshape(batch, length, -1))
        return output


class MLP(nn.Module):
    """Llama's SwiGLU feed-forward block."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        output: torch.Tensor = self.down_proj(
            functional.silu(self.gate_proj(hidden)) * self.up_proj(hidden)
        )
        return output


class DecoderLayer(nn.Module):
    """Pre-norm residual block: attention, then MLP."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.self_attn = Attention(config)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        hidden = hidden + self.self_attn(self.input_layernorm(hidden), cos, sin)
        output: torch.Tensor = hidden + self.mlp(self.post_attention_layernorm(hidden))
        return output


class LlamaModel(nn.Module):
    """The decoder stack; named `model` inside `LlamaForCausalLM`, as in Hugging Face."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        exponents = torch.arange(0, config.head_dim, 2, dtype=torch.float32) / config.head_dim
        inv_freq = 1.0 / (config.rope_theta**exponents)
        self.inv_freq: torch.Tensor
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        length = input_ids.shape[1]
        positions = torch.arange(length, dtype=torch.float32)
        freqs = torch.outer(positions, self.inv_freq)
        angles = torch.cat((freqs, freqs), dim=-1)
        cos, sin = angles.cos(), angles.sin()
        hidden = self.embed_tokens(input_ids)
        for layer in self.layers:
            hidden = layer(hidden, cos, sin)
        return self.norm(hidden)  # type: ignore[no-any-return]


class LlamaForCausalLM(nn.Module):
    """Token ids `[batch, length]` in, next-token logits `[batch, length, vocab]` out.

    Sequences are right-padded: causal attention means padding after a sequence's last
    token never changes that sequence's logits, so no attention mask is needed.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=self.config.initializer_range)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.model(input_ids))  # type: ignore[no-any-return]


def build_model(config: ModelConfig | None = None, seed: int = 0) -> LlamaForCausalLM:
    """A freshly initialised model; the same seed gives the same weights."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = LlamaForCausalLM(config or ModelConfig())
    finally:
        torch.random.set_rng_state(generator_state)
    return model


def save_checkpoint(model: LlamaForCausalLM, directory: Path) -> None:
    """Write `config.json` and `model.safetensors` (Hugging Face names) into `directory`,
    both mode 0644. The bytes are written by Python, so a full disk is an `OSError` naming
    the file (safetensors' own writer raises an error that names neither)."""
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {name: tensor.detach().contiguous() for name, tensor in model.state_dict().items()}
    with naming(directory / WEIGHTS_FILE):
        (directory / WEIGHTS_FILE).write_bytes(save(tensors, metadata={"format": "pt"}))
    (directory / CONFIG_FILE).write_text(json.dumps(model.config.to_hf(), indent=2) + "\n")
    for name in (WEIGHTS_FILE, CONFIG_FILE):
        (directory / name).chmod(CHECKPOINT_FILE_MODE)


def check_checkpoint(directory: Path) -> None:
    """Raise `CheckpointError` unless a server could load `directory`: both files present and
    readable by group and others, a Llama config, every tensor with the shape it needs."""
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        path = directory / name
        if not path.is_file():
            raise CheckpointError(f"{path}: no such file")
        mode = path.stat().st_mode & 0o777
        if mode & 0o044 != 0o044:
            raise CheckpointError(
                f"{path}: mode {mode:04o} is not readable by group and others; "
                "a server running as another user could not load it"
            )
    try:
        load_checkpoint(directory)
    except CheckpointError:
        raise
    except Exception as error:  # a torn JSON or safetensors file: say which, never crash
        raise CheckpointError(
            f"{directory}: unreadable ({type(error).__name__}: {error})"
        ) from error


def load_config(directory: Path) -> ModelConfig:
    """The architecture recorded in a checkpoint's `config.json`."""
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file (not a checkpoint directory?)")
    return ModelConfig.from_hf(json.loads(path.read_text()))


def load_checkpoint(directory: Path) -> LlamaForCausalLM:
    """A model built from `config.json` with the weights of `model.safetensors`."""
    model = LlamaForCausalLM(load_config(directory))
    load_weights_into(model, directory)
    return model


def load_weights_into(model: LlamaForCausalLM, directory: Path) -> None:
    """Replace `model`'s weights in place; every tensor must be present with its shape."""
    path = directory / WEIGHTS_FILE
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file")
    tensors = load_file(str(path))
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise CheckpointError(f"{path}: missing tensors {missing}, unexpected {unexpected}")
    for name, tensor in tensors.items():
        if tensor.shape != expected[name].shape:
            raise CheckpointError(
                f"{path}: {name} has shape {tuple(tensor.shape)}, "
                f"the model needs {tuple(expected[name].shape)}"
            )
    with torch.no_grad():
        model.load_state_dict(tensors)


def parameter_count(model: nn.Module) -> int:
    """Number of trainable scalars, for logs and the docs."""
    return sum(math.prod(p.shape) for p in model.parameters())
