"""The live runtime: inference over vLLM's HTTP contract, a torch GRPO trainer, and the
CPU twin of `vllm serve` that CI trains against.

Modules, one idea each: `digits` (the task), `model` (a small Llama in Hugging Face
layout), `sampling` and `engine` (batched decoding), `validation`, `responses` and
`server` (vLLM's HTTP routes), `launch` (starting servers), `protocol` and `client` (the
inference contract and its one HTTP implementation), `endpoints` (several replicas as
one), `broadcast` and `trainer` (GRPO steps published as checkpoints).

Importing this package needs torch, safetensors and httpx (the `train` extra).
"""
