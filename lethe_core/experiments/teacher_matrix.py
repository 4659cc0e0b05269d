"""The teacher matrix: RIF under each teacher and logit reading, on each real conversation dataset.

For every (dataset, teacher) of `rerankers.recipes.teacher_pairs()` (the fold teacher and the cross-dataset one),
the systems table and the RIF protocols under the raw reading (the paper's), plus the calibrated reading as an
ablation on the held-out protocol. A driver only: every run is an ordinary `SystemsExperiment` / `RIFExperiment`
results folder (reused when finished, so the study resumes), read back by RERANKER.md's teacher table and RESULTS.md's
teacher x reading table (`report`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lethe_core.datasets.splits import HELDOUT
from lethe_core.experiments.rif import RIFExperiment
from lethe_core.experiments.setup import DataSpec
from lethe_core.experiments.systems import SystemsExperiment
from lethe_core.rerankers.base import RerankerUnavailable
from lethe_core.rerankers.recipes import teacher_pairs
from lethe_core.rerankers.registry import load_reranker
from lethe_core.rif.protocols import PROTOCOLS


@dataclass
class TeacherMatrix:
    pairs: list[tuple[str, str]] = field(default_factory=teacher_pairs)  # (dataset, reranker spec)
    protocols: tuple[str, ...] = PROTOCOLS
    ablation_protocols: tuple[str, ...] = (HELDOUT,)  # also run with the calibrated reading
    seeds: int = 5
    backend: str = "onnx"  # fp32: int8 moves RIF effects by thousandths, the size of the effects compared
    progress: bool = True

    def check(self) -> None:
        """Every teacher loads, before any pool is built: one error naming each missing one and what trains it."""
        missing = []
        for _, spec in dict.fromkeys(self.pairs):
            try:
                load_reranker(spec, self.backend)
            except RerankerUnavailable as exc:
                missing.append(f"  {spec}: {str(exc).splitlines()[0]}")
        if missing:
            raise RerankerUnavailable("teachers missing:\n" + "\n".join(missing) + "\nTrain them with `make teachers`.")

    def spec(self, dataset: str, reranker: str, calibration: bool = False) -> DataSpec:
        return DataSpec(dataset=dataset, reranker=reranker, backend=self.backend, calibration=calibration, progress=self.progress)

    def systems(self) -> list[dict]:
        """The systems table (second stage ce) of every (dataset, teacher)."""
        self.check()
        return [SystemsExperiment(self.spec(d, r)).run() for d, r in self.pairs]

    def rif(self) -> list[dict]:
        """Every (dataset, teacher) x protocol under the raw reading, then the calibrated ablation runs."""
        self.check()
        runs = [(d, r, p, False) for d, r in self.pairs for p in self.protocols]
        runs += [(d, r, p, True) for d, r in self.pairs for p in self.ablation_protocols]
        return [RIFExperiment(self.spec(d, r, cal), protocol=p, seeds=self.seeds).run() for d, r, p, cal in runs]

