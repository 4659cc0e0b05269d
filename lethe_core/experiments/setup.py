"""One data spec for every study: which data, reranker and first stage a study reads, checked once and loaded once.

`DataSpec` holds the fields every study used to declare for itself (dataset, path, reranker, backend, conversations,
limit_queries, pipeline, second_stage, calibration, progress) with their checks; `DataSpec.load()` is the load step
they all repeated: the dataset, then on first use the reranker, the pool builder, the pools and the packed pools
(`Loaded`). A study is a dataclass deriving from `DataStudy`: its field `data: DataSpec` plus its own knobs only; its
`run()` loads the spec, names the run (`run_id`) and computes it unless the run store holds it finished (`results.store`).

A study records its config flat, as before the data fields moved into `data` (`DataStudy.flat_config`), so run ids,
config.json and summary.json's "config" keep their keys and values. A study that never read a shared field
(`unused_data`, e.g. `calibration` for the usage-stream studies) leaves it out of its config, and refuses a spec
that sets it to anything but its default.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable

from lethe_core.datasets import Dataset, load_dataset
from lethe_core.inference import BACKENDS
from lethe_core.pools.cache import PackedPools, PoolBuilder, Pools
from lethe_core.results.store import DEFAULT_SAVE_MODE, reuse_or_run, run_dir
from lethe_core.rerankers import resolve_reranker
from lethe_core.retrieval.pipeline import PipelineConfig
from lethe_core.retrieval.second_stage import DEFAULT_MODE, MODES
from lethe_core.util.paths import cache_dir


@dataclass(frozen=True)
class DataSpec:
    """What a study reads: the dataset (and its cut), the reranker and how it runs, the first stage, the second stage."""

    dataset: str = "locomo"
    path: str | None = None  # the dataset's file or folder (default: the shared data)
    reranker: str | None = "auto"  # None: no reranker (first-stage measures only; the recall study)
    backend: str = "auto"  # reranker inference backend (torch | onnx | onnx-int8 | auto)
    conversations: int | None = None  # keep only the first N conversations (quick runs)
    limit_queries: int | None = None  # keep only the first N queries
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    second_stage: str = DEFAULT_MODE  # ce: the reranker's order | fused: the validated fusion with the first stage
    # The logit RIF's strength sigmoid(-x), abstain@T and the other logit thresholds read. Default: the raw logit, the
    # paper's reading. True (`--calibration`) reads the affine-calibrated one where the reranker has it: an ablation,
    # named so in every table (docs/method.md, "Which logit").
    calibration: bool = False
    progress: bool = True

    def __post_init__(self):
        if self.second_stage not in MODES:
            raise ValueError(f"second stage must be one of {MODES}, got {self.second_stage!r}")
        if self.backend not in ("auto", *BACKENDS):
            raise ValueError(f"backend must be one of {('auto', *BACKENDS)}, got {self.backend!r}")
        for name in ("conversations", "limit_queries"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 when set, got {value}")
        if not isinstance(self.pipeline, PipelineConfig):
            raise TypeError(f"pipeline must be a PipelineConfig, got {type(self.pipeline).__name__}")

    def load_dataset(self) -> Dataset:
        return load_dataset(self.dataset, self.path, self.conversations, self.limit_queries)

    def load(self, cache_root: str | Path | None = None) -> "Loaded":
        """The dataset now; the reranker, pools and packed pools on first use (pools under `cache_root`)."""
        return Loaded(self, self.load_dataset(), cache_root)

    def config(self, omit: Iterable[str] = ()) -> dict:
        """The fields as a study records them (pipeline as a dict), less `omit`."""
        omit = set(omit)
        return {k: v for k, v in asdict(self).items() if k not in omit}

    def check_unused(self, unused: Iterable[str]) -> None:
        """A study that does not read the fields `unused` refuses a spec that sets any of them."""
        default = DataSpec()
        changed = [name for name in unused if getattr(self, name) != getattr(default, name)]
        if changed:
            raise ValueError(f"this study does not read {', '.join(changed)}; leave it at its default")


class Loaded:
    """A loaded DataSpec: the dataset, then (each made once, when first asked for) the reranker, the pool builder of
    the spec's pipeline, its pools and the pools packed in query order (calibrated or raw, as the spec says)."""

    def __init__(self, spec: DataSpec, dataset: Dataset, cache_root: str | Path | None = None):
        self.spec, self.dataset = spec, dataset
        self.root = Path(cache_root or cache_dir())
        self._once: dict = {}

    def once(self, key, make: Callable[[], Any]) -> Any:
        """`make()` the first time `key` is asked for, the same value after: what a study derives from the loaded data
        both to name its run and to compute it (a dedup result, extra pools) is made once."""
        if key not in self._once:
            self._once[key] = make()
        return self._once[key]

    @property
    def query_ids(self) -> list[str]:
        return [q.id for q in self.dataset.queries]

    @cached_property
    def reranker(self):
        return None if self.spec.reranker is None else resolve_reranker(self.spec.reranker, backend=self.spec.backend)

    def builder_for(self, pipeline: PipelineConfig | None = None, dataset: Dataset | None = None) -> PoolBuilder:
        """A pool builder of this reranker and cache root for another pipeline or dataset (nothing is built)."""
        return PoolBuilder(dataset or self.dataset, self.reranker, pipeline or self.spec.pipeline, root=self.root,
                           progress=self.spec.progress)

    @cached_property
    def builder(self) -> PoolBuilder:
        return self.builder_for()

    @cached_property
    def pools(self) -> Pools:
        return self.builder.build()

    @cached_property
    def packed(self) -> PackedPools:
        return self.pools.packed(self.query_ids, self.spec.calibration)


@dataclass
class DataStudy:
    """Base of the studies that read one DataSpec. Subclasses add their own fields (all with defaults)."""

    data: DataSpec = field(default_factory=DataSpec)
    unused_data: ClassVar[tuple[str, ...]] = ()  # DataSpec fields the study does not read: left out of its config
    needs_reranker: ClassVar[bool] = True

    def __post_init__(self):
        if not isinstance(self.data, DataSpec):
            raise TypeError(f"data must be a DataSpec, got {type(self.data).__name__}")
        self.data.check_unused(self.unused_data)
        if self.needs_reranker and self.data.reranker is None:
            raise ValueError(f"{type(self).__name__} needs a reranker")

    def config(self, loaded: Loaded) -> dict:
        """What the run records as its config and names its folder by (default: `flat_config()`)."""
        return self.flat_config()

    def config_extra(self) -> dict:
        """Entries a study adds to its config after the data and its own fields (nested parameters spelled out)."""
        return {}

    def run_id(self, loaded: Loaded, config: dict | None = None) -> str:
        """The name of the run's results folder."""
        raise NotImplementedError

    def _compute(self, loaded: Loaded, out: Path, config: dict) -> dict:
        """Compute the run and write its folder `out` (summary.json last); returns the summary."""
        raise NotImplementedError

    def run(self, results_root: str | Path | None = None, cache_root: str | Path | None = None,
            mode: str = DEFAULT_SAVE_MODE) -> dict:
        """Load the data (caches under `cache_root`), name the run, and compute it into `<results_root>/<run id>/` unless
        `mode="reuse"` finds it finished there (`results.store`); returns its summary."""
        loaded = self.data.load(cache_root)
        config = self.config(loaded)
        out = run_dir(self.run_id(loaded, config), results_root)
        return reuse_or_run(out, config, lambda: self._compute(loaded, out, config), mode)

    def flat_config(self, progress: bool = True) -> dict:
        """The study's config as it is recorded: the data fields it reads, then its own (nested dataclasses as dicts);
        `progress=False` leaves progress out."""
        own = asdict(self)
        own.pop("data")
        out = {**self.data.config(self.unused_data), **own}
        if not progress:
            out.pop("progress")
        return out
