"""The CPU twin of `vllm serve`: vLLM's RL HTTP routes over a small torch engine on loopback.

Tests and CPU training run against it; it behaves like vLLM wherever the client can tell
(the routes, their schemas, their errors), so the client that talks to it talks to vLLM.
"""
