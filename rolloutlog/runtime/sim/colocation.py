"""Training and inference on the same compute (`world.colocated`): each slows the other.

A colocated run (the CPU twin; a GPU cluster whose trainer shares the inference GPUs) has
no separate trainer nodes. While the trainer trains, every server's decode steps and
prefill take `1 + colocation_coupling` times as long, and a batch trains `1 +
colocation_coupling · busy` times as long, `busy` the fraction of servers with requests on
them when it starts. A GPU cluster with separate trainer nodes is not colocated.
"""

from __future__ import annotations

from rolloutlog.runtime.sim.shared_inference import SharedInference


class Colocation:
    """The coupling between the trainer and the shared servers of one run."""

    def __init__(self, coupling: float, inference: SharedInference) -> None:
        self.coupling, self.inference = coupling, inference

    def training_started(self, now: float) -> float:
        """A batch starts training: slow the servers; the factor on its training time."""
        factor = 1.0 + self.coupling * self.inference.busy_fraction(now)
        self.inference.slow(now, 1.0 + self.coupling)
        return factor

    def training_ended(self, now: float) -> None:
        """Training stopped: the servers run at full speed again."""
        self.inference.slow(now, 1.0)
