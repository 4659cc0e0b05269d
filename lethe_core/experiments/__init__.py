"""Experiments: a typed config plus `run()` that writes `data/results/<name>/`."""

from .systems import SYSTEMS, SystemsExperiment, evaluate_systems

__all__ = ["SYSTEMS", "SystemsExperiment", "evaluate_systems"]
