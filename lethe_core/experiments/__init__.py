"""Experiments: a typed config (a `DataSpec` and the study's own knobs) plus `run()` that writes `data/results/<name>/`
through the run store (`lethe_core.results.store`)."""

from lethe_core.experiments.setup import DataSpec
from lethe_core.experiments.systems import SYSTEMS, SystemsExperiment, evaluate_systems

__all__ = ["SYSTEMS", "DataSpec", "SystemsExperiment", "evaluate_systems"]
