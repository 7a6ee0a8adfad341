"""A verifiers v1 taskset that loads nothing: reverse a short string, 40 fixed tasks.

prime-rl's orchestrator loads its tasks client-side (`vf.load_taskset`) and its env server
scores them (the reward below); this one needs no dataset download.
"""

import verifiers.v1 as vf

WORDS = [f"{a}{b}{c}" for a in "abcd" for b in "efghi" for c in "jk"]


class ReverseData(vf.TaskData):
    answer: str


class ReverseTask(vf.Task[ReverseData]):
    @vf.reward
    async def reversed_chars(self, trace: vf.Trace) -> float:
        """The share of the answer's characters the last reply has in place."""
        replies = trace.assistant_messages
        said = str(replies[-1].content or "") if replies else ""
        answer = self.data.answer
        return sum(a == b for a, b in zip(said, answer, strict=False)) / len(answer)


class ReverseCharsTaskset(vf.Taskset[ReverseTask, vf.TasksetConfig]):
    def load(self) -> list[ReverseTask]:
        return [
            ReverseTask(ReverseData(idx=i, prompt=word, answer=word[::-1]), self.config.task)
            for i, word in enumerate(WORDS)
        ]


__all__ = ["ReverseCharsTaskset"]
