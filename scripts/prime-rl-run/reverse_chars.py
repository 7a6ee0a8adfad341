"""A verifiers v1 taskset that loads nothing: reverse a short string, 40 fixed tasks.

prime-rl's orchestrator loads its tasks client-side (`vf.load_taskset`); this one needs no
dataset download. Its reward is scored by the environment stand-in of `run.py`.
"""

import verifiers.v1 as vf

WORDS = [f"{a}{b}{c}" for a in "abcd" for b in "efghi" for c in "jk"]


class ReverseData(vf.TaskData):
    answer: str


class ReverseTask(vf.Task[ReverseData]):
    pass


class ReverseCharsTaskset(vf.Taskset[ReverseTask, vf.TasksetConfig]):
    def load(self) -> list[ReverseTask]:
        return [
            ReverseTask(ReverseData(idx=i, prompt=word, answer=word[::-1]), self.config.task)
            for i, word in enumerate(WORDS)
        ]


__all__ = ["ReverseCharsTaskset"]
