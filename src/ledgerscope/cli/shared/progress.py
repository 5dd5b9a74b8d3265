"""Rich progress bars for the sweep: one bar per stage, advancing per partition."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ledgerscope.pipeline.run.sweep import Progress as SweepProgress

STAGE_BARS = ("chunk", "embed", "index", "questions", "write")


class RichSweepProgress(SweepProgress):
    def __init__(self) -> None:
        self.bars = Progress(
            TextColumn("{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[where]}", markup=False),
            console=Console(stderr=True, highlight=False),
            transient=False,
        )
        self.tasks: dict[str, int] = {}
        self.questions = 0

    def __enter__(self) -> RichSweepProgress:
        self.bars.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.bars.__exit__(*exc)

    def start(self, plan: dict) -> None:
        partitions = sum(len(v) for v in plan["arms"].values())
        self.questions = plan["questions"]
        for name in STAGE_BARS:
            total = partitions * plan["questions"] if name == "questions" else partitions
            self.tasks[name] = self.bars.add_task(name, total=total, where="")

    def stage(self, arm: str, phase: str, stage: str) -> None:
        if stage in self.tasks:
            self.bars.advance(self.tasks[stage])
            self.bars.update(self.tasks[stage], where=f"{arm} phase {phase}")

    def question(self, arm: str, phase: str) -> None:
        self.bars.advance(self.tasks["questions"])

    def partition_skipped(self, arm: str, phase: str) -> None:
        for name, task in self.tasks.items():
            self.bars.advance(task, self.questions if name == "questions" else 1)
