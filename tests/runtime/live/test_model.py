"""The task, the model's Hugging Face layout, and the sampling rules."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from rolloutlog.runtime.live.digits import (
    BOS_ID,
    EOS_ID,
    SEP_ID,
    reward,
    task_from_id,
)
from rolloutlog.runtime.live.model import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    CheckpointError,
    ModelConfig,
    build_model,
    load_checkpoint,
    save_checkpoint,
)
from rolloutlog.runtime.live.twin.sampling import RowParams, sample_tokens

# The parameter names of transformers' LlamaForCausalLM (untied embeddings), per layer.
HF_LAYER_NAMES = [
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
]


def test_a_task_id_names_the_same_digits_everywhere():
    task = task_from_id("g7")
    assert task == task_from_id("g7")
    assert 4 <= len(task.digits) <= 6 and all(0 <= d <= 9 for d in task.digits)
    assert task.prompt_ids == [BOS_ID, *task.digits, SEP_ID]
    assert task.target_ids == [*sorted(task.digits), EOS_ID]
    lengths = {len(task_from_id(f"t{i}").digits) for i in range(200)}
    assert lengths == {4, 5, 6}
    with pytest.raises(ValueError):
        task_from_id("")


def test_reward_is_the_fraction_of_positions_right():
    task = task_from_id("g7")
    target = task.target_ids
    assert reward(task, target) == 1.0
    assert reward(task, []) == 0.0
    assert reward(task, target[:-1]) == pytest.approx((len(target) - 1) / len(target))
    assert reward(task, [*target, 3]) == pytest.approx(len(target) / (len(target) + 1))
    wrong_first = [(target[0] + 1) % 10, *target[1:]]
    assert reward(task, wrong_first) == pytest.approx((len(target) - 1) / len(target))


def test_checkpoints_use_hugging_face_llama_names_and_config(tmp_path):
    model = build_model(seed=0)
    layers = model.config.num_hidden_layers
    expected = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"} | {
        f"model.layers.{i}.{name}" for i in range(layers) for name in HF_LAYER_NAMES
    }
    assert set(model.state_dict()) == expected
    save_checkpoint(model, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [CONFIG_FILE, WEIGHTS_FILE]
    config = json.loads((tmp_path / CONFIG_FILE).read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert config["head_dim"] == 32 and config["eos_token_id"] == EOS_ID
    assert config["tie_word_embeddings"] is False


def test_a_checkpoint_round_trips_exactly(tmp_path):
    model = build_model(
        ModelConfig(hidden_size=64, num_attention_heads=2, num_key_value_heads=1), seed=3
    )
    save_checkpoint(model, tmp_path)
    loaded = load_checkpoint(tmp_path)
    assert loaded.config == model.config
    tokens = torch.tensor([task_from_id("x").prompt_ids])
    with torch.no_grad():
        assert torch.equal(loaded(tokens), model(tokens))


def test_right_padding_does_not_change_a_sequences_logits():
    model = build_model(seed=0)
    short = torch.tensor([[11, 3, 1, 10]])
    padded = torch.tensor([[11, 3, 1, 10, 13, 13, 13]])
    with torch.no_grad():
        assert torch.allclose(model(short)[0], model(padded)[0, :4], atol=1e-6)


def test_a_checkpoint_that_does_not_fit_is_refused_by_name(tmp_path):
    model = build_model(seed=0)
    save_checkpoint(model, tmp_path)
    tensors = dict(model.state_dict())
    del tensors["lm_head.weight"]
    save_file(tensors, str(tmp_path / WEIGHTS_FILE))
    with pytest.raises(CheckpointError, match=r"lm_head\.weight"):
        load_checkpoint(tmp_path)
    (tmp_path / CONFIG_FILE).write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(CheckpointError, match="llama"):
        load_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="no such file"):
        load_checkpoint(tmp_path / "absent")


def _rows(count: int, **params: float) -> list[RowParams]:
    base = {"temperature": 1.0, "top_p": 1.0, "top_k": 0}
    return [RowParams(**{**base, **params, "uniform": (i + 0.5) / count}) for i in range(count)]


def test_sampling_honours_greedy_top_k_and_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    many = logits.repeat(200, 1)
    assert set(sample_tokens(many, _rows(200, temperature=0.0)).tolist()) == {0}
    assert set(sample_tokens(many, _rows(200, top_k=2)).tolist()) == {0, 1}
    assert set(sample_tokens(many, _rows(200, top_p=0.7)).tolist()) == {0, 1}
    assert set(sample_tokens(many, _rows(200)).tolist()) == {0, 1, 2, 3}
    counts = torch.bincount(sample_tokens(many, _rows(200)), minlength=4).tolist()
    assert counts == [100, 60, 30, 10]  # inverse CDF on evenly spaced uniforms


def test_transformers_loads_the_checkpoint_and_computes_the_same_logits(tmp_path):
    """Skipped unless `transformers` is importable (it is not a test dependency). Run by
    hand with transformers 5.24: identical logits (max abs diff 0.0), GQA included."""
    transformers = pytest.importorskip("transformers")
    for config in (ModelConfig(), ModelConfig(hidden_size=64, num_attention_heads=2,
                                              num_key_value_heads=1)):  # fmt: skip
        ours = build_model(config, seed=3)
        save_checkpoint(ours, tmp_path / str(config.hidden_size))
        theirs = transformers.LlamaForCausalLM.from_pretrained(
            tmp_path / str(config.hidden_size), torch_dtype=torch.float32
        ).eval()
        tokens = torch.tensor([task_from_id(f"hf-{i}").prompt_ids[:6] for i in range(4)])
        with torch.no_grad():
            assert torch.allclose(ours(tokens), theirs(tokens).logits, atol=1e-5)
