"""The live runtime: inference over vLLM's HTTP contract, a torch GRPO trainer, and the
CPU twin of `vllm serve` (in `twin/`) that CI trains against.

Modules, one idea each: `digits` (the task), `model` (a small Llama in Hugging Face
layout), `protocol` and `client` (the inference contract and its one HTTP implementation),
`transport` (keep-alive HTTP/1.1), `endpoints` (several replicas as one), `broadcast`,
`publish` and `trainer` (GRPO steps published as checkpoints), `driver` and `session` (the
run). `twin/` holds the CPU twin: `sampling` and `engine` (batched decoding), `validation`,
`responses` and `server` (vLLM's HTTP routes), `launch` (starting servers).

Importing this package needs torch, safetensors and httpx (the `train` extra).
"""
