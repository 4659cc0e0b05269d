"""Reading experiment results: the one place the dashboard and the notebooks get their data from.

Schema (version `SCHEMA_VERSION`, recorded as `schema_version` in both JSON files) of a RIF run folder
`data/results/rif-<dataset>-<protocol>-<reranker>-<hash>/`; `load_run` checks the keys and columns named in
SUMMARY_KEYS, ARM_KEYS, CONFIG_KEYS and COLUMNS below:

- `config.json`    the RIFExperiment config plus `schema_version`, `reranker_resolved`, `pool_key`, `dataset_fingerprint`,
                   `burn_in`, `seeds`, `calibrated`, `second_stage_resolved`.
- `summary.json`   `{schema_version, dataset, protocol, reranker, run_id, n_queries, seeds, burn_in, calibrated, second_stage,
                   seed_convention ("seed mean per query": every mean, CI and p below is over queries of their
                   seed-averaged metric), arms: [{name, kind, k, rule, ndcg@10: {mean, ci, seed_mean, seed_sd},
                   delta_ndcg: {mean, ci, conversation_ci, seed_mean, seed_sd},
                   p, p_holm, recall@30: {...}, delta_recall, p_recall, p_recall_holm, delta_vs_control,
                   p_vs_control, suppressed_entries: {split: {entries, docs}}, behaviour: {...},
                   buckets (paper protocol)}], learning_curve (prequential)}`
- `per_query.parquet` one row per (seed, arm, query[, split]): query_id, qtype, arm, seed, split, bucket,
                   cluster, ndcg@10, recall@10, pool_recall@30, top1_logit, top10 (list of corpus
                   positions), exact_episode, sibling_confusion, wrong_family, stale_fact,
                   stale_fact_temporal, abstain@0/2/4, position (prequential), protocol.
- `snapshots.parquet` suppression every 500 steps for the paper seed: arm, seed, split, step, cluster,
                   doc_idx, doc_id, value (only entries with value > 0).
- `query_map.parquet` (paper protocol) query_id, x, y (2-D UMAP of the query embeddings), cluster (K=30).
- `write_id`       in config.json and summary.json, and `lethe_write_id` in each Parquet file's schema metadata: the
                   write that made the file (`results.store`). A folder whose files come from different writes (a rerun
                   stopped before its summary.json, two writers) is refused as partial; folders from before write ids
                   carry none and load as before.

`replay_context` rebuilds a run's inputs for the dashboard and the report from its config.json, which is data, not
a command: the dataset by name, a path only inside the data folders (`data_roots`), a generated dataset only up to
`max_replay_turns()` turns.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pandas as pd

from lethe_core.datasets import load_dataset
from lethe_core.pools.cache import load_pools, pools_dir
from lethe_core.results.store import PARQUET_WRITE_ID, mixed, read_json
from lethe_core.retrieval.bm25 import BM25Params
from lethe_core.retrieval.dense import EmbeddingCache, LazyEncoder
from lethe_core.retrieval.pipeline import PipelineConfig, query_vectors
from lethe_core.rif.protocols import PROTOCOLS, ReplayContext
from lethe_core.rif.state import CAP, WINNER_RELIEF
from lethe_core.util.paths import cache_dir, default_dataset_path, home_dir, results_dir, shared_data_dir

# Bump when a writer adds or renames something a reader relies on: folders with another version are
# refused with the command that regenerates them, instead of failing later with a KeyError on one page.
SCHEMA_VERSION = 3  # 3: every table reads the seed mean per query (was seed 42), with a conversation-level CI

# What a run's mechanism read (summary key `logit_reading`): the raw logit is the paper's reading and the default;
# the calibrated one is the `--calibration` ablation, so named in every table.
LOGIT_READINGS = {"raw": "raw logit (the paper's reading)", "calibrated": "calibrated logit (ablation)"}


def logit_reading(summary: dict) -> str:
    """"raw" or "calibrated": the summary's `logit_reading`, else (runs written before it) its boolean `calibrated`."""
    if summary.get("logit_reading") in LOGIT_READINGS:
        return summary["logit_reading"]
    return "calibrated" if summary.get("calibrated") else "raw"


SUMMARY_KEYS = ("schema_version", "dataset", "protocol", "reranker", "run_id", "n_queries", "seeds", "burn_in", "calibrated",
                "second_stage", "seed_convention", "arms")
ARM_KEYS = ("name", "kind", "k", "rule", "ndcg@10", "delta_ndcg", "p", "p_holm", "recall@30", "delta_recall", "p_recall",
            "p_recall_holm", "suppressed_entries", "behaviour")
ARM_METRIC_KEYS = ("ndcg@10", "delta_ndcg", "recall@30", "delta_recall")  # each {mean, ci, ...}
BEHAVIOUR_KEYS = ("exact_episode", "sibling_confusion", "wrong_family", "abstain@0", "abstain@2", "abstain@4")
CONFIG_KEYS = ("schema_version", "dataset", "path", "conversations", "limit_queries", "protocol", "reranker", "reranker_resolved",
               "seeds", "burn_in", "alpha", "eta", "eager_decay", "second_stage", "calibration", "pool_key", "pipeline")
PIPELINE_KEYS = ("encoder", "pool_size", "bm25")
COLUMNS = {
    "per_query.parquet": ("query_id", "qtype", "arm", "seed", "split", "bucket", "cluster", "ndcg@10", "recall@10", "pool_recall@30",
                          "top1_logit", "top10", *BEHAVIOUR_KEYS),
    "snapshots.parquet": ("arm", "seed", "split", "step", "cluster", "doc_idx", "doc_id", "value"),
    "query_map.parquet": ("query_id", "x", "y", "cluster"),
}
REQUIRED_FILES = ("config.json", "summary.json", "per_query.parquet", "snapshots.parquet")  # query_map: paper protocol only


class ResultsError(RuntimeError):
    """A results folder is missing, partial, stale or corrupt; the message says what and the command that regenerates it."""


def regenerate_command(config: dict) -> str:
    """The `lethe-lab rif run` line that rebuilds a run with its own options, so it finds (or builds) the same pools.

    The resolved reranker is named rather than `auto`, and burn-in and second stage are always spelled out:
    those are what a changed cache or default would otherwise silently change.
    """
    c = config
    seeds = c.get("seeds")
    parts = ["lethe-lab", "rif", "run", str(c.get("dataset") or "locomo"), "--protocol", str(c.get("protocol") or "paper")]
    if seeds:
        parts += ["--seeds", str(len(seeds) if isinstance(seeds, list) else seeds)]
    reranker = c.get("reranker_resolved") or c.get("reranker")
    if reranker:
        parts += ["--reranker", str(reranker)]
    for key, flag in (("path", "--path"), ("conversations", "--conversations"), ("limit_queries", "--limit-queries"),
                      ("burn_in", "--burn-in"), ("second_stage", "--second-stage")):
        if c.get(key) is not None:
            parts += [flag, str(c[key])]
    if c.get("arms"):
        parts += ["--arms", ",".join(a for a in c["arms"] if a != "baseline") or "baseline"]
    for key, default in (("alpha", 0.3), ("eta", 0.1), ("decay", 0.005), ("cap", 1.0), ("reinforce", 0.05)):
        if c.get(key) is not None and float(c[key]) != default:
            parts += [f"--{key}", str(c[key])]
    if c.get("eager_decay"):
        parts.append("--eager-decay")
    if c.get("calibration") is True:  # the ablation; the raw reading is the default
        parts.append("--calibration")
    if c.get("backend") not in (None, "auto"):
        parts += ["--backend", str(c["backend"])]
    encoder = (c.get("pipeline") or {}).get("encoder")
    if encoder and encoder != "minilm":
        parts += ["--encoder", str(encoder)]
    return shlex.join(parts)


def _fail(path: Path, what: str, config: dict) -> ResultsError:
    return ResultsError(f"{path}: {what}. Regenerate it with `{regenerate_command(config)}`")


def _missing(mapping: dict, keys: tuple[str, ...]) -> list[str]:
    return [k for k in keys if k not in mapping]


def _check_columns(path: Path, config: dict) -> str | None:
    """Read only the Parquet footer: cheap, and a truncated or overwritten file has none. Returns the file's write id."""
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # noqa: BLE001 - any reader failure means the same thing here: unreadable
        raise _fail(path, f"unreadable or truncated ({type(exc).__name__}: {str(exc)[:120]})", config) from None
    missing = _missing(dict.fromkeys(schema.names), COLUMNS.get(path.name, ()))
    if missing:
        raise _fail(path, f"lacks columns {missing} (written by another version)", config)
    value = (schema.metadata or {}).get(PARQUET_WRITE_ID)
    return value.decode("utf-8", "replace") if value is not None else None


@dataclass
class Run:
    path: Path
    config: dict
    summary: dict
    _frames: dict = field(default_factory=dict, repr=False)

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def label(self) -> str:
        s = self.summary
        return f"{s['dataset']} / {s['protocol']} / {s['reranker']} / seeds {len(s['seeds'])} ({self.run_id[-10:]})"

    def _parquet(self, name: str) -> pd.DataFrame:
        if name not in self._frames:
            path = self.path / name
            try:
                frame = pd.read_parquet(path)
            except Exception as exc:  # noqa: BLE001 - the footer was fine at load time; the body is not
                raise _fail(path, f"unreadable ({type(exc).__name__}: {str(exc)[:120]})", self.config) from None
            self._frames[name] = frame
        return self._frames[name]

    @property
    def per_query(self) -> pd.DataFrame:
        return self._parquet("per_query.parquet")

    @property
    def snapshots(self) -> pd.DataFrame:
        return self._parquet("snapshots.parquet")

    @property
    def query_map(self) -> pd.DataFrame | None:
        if not (self.path / "query_map.parquet").exists():
            return None
        return self._parquet("query_map.parquet")

    @cached_property
    def arms(self) -> list[str]:
        return [a["name"] for a in self.summary["arms"]]


def _options_from_name(path: Path) -> dict:
    """Dataset and protocol from the folder name `rif-<dataset>-<protocol>-...`, when both JSON files are unreadable."""
    parts = path.name.split("-")
    for i, part in enumerate(parts[2:], start=2):
        if part in PROTOCOLS:
            return {"dataset": "-".join(parts[1:i]), "protocol": part}
    return {}


def _summary_problems(summary: dict) -> list[str]:
    problems = [f"summary.json lacks {_missing(summary, SUMMARY_KEYS)}"] if _missing(summary, SUMMARY_KEYS) else []
    arms = summary.get("arms", [])
    if not isinstance(arms, list) or not all(isinstance(a, dict) for a in arms) or ("arms" in summary and not arms):
        return problems + ["summary.json's arms are not a list of arm objects"]
    for arm in arms:
        missing = _missing(arm, ARM_KEYS)
        missing += [f"{k}.{sub}" for k in ARM_METRIC_KEYS if isinstance(arm.get(k), dict) for sub in ("mean", "ci") if sub not in arm[k]]
        missing += [f"behaviour.{k}" for k in _missing(arm.get("behaviour") or {}, BEHAVIOUR_KEYS)]
        if missing:
            return problems + [f"arm {arm.get('name', '?')!r} in summary.json lacks {missing}"]  # the first such arm is enough to say it
    return problems


def load_run(path: str | Path) -> Run:
    """A run folder checked against the schema (every JSON key and Parquet column the readers use), or a ResultsError.

    Validating here, once, is what lets every page show one message for a bad folder instead of a
    KeyError wherever the first missing key happens to be read.
    """
    path = Path(path)
    if not path.is_dir():
        raise ResultsError(f"no results folder at {path}")
    config, summary = read_json(path / "config.json"), read_json(path / "summary.json")
    options = config or summary or _options_from_name(path)
    missing = [f for f in REQUIRED_FILES if not (path / f).is_file()]
    if missing:
        raise _fail(path, f"partial results ({', '.join(missing)} missing: the run did not finish)", options)
    for name, data in (("config.json", config), ("summary.json", summary)):
        if data is None:
            raise _fail(path / name, "corrupt (not a readable JSON object)", options)
    found = summary.get("schema_version", 1)  # folders from before versioning carry none: schema 1
    if found != SCHEMA_VERSION or config.get("schema_version", 1) != SCHEMA_VERSION:
        raise _fail(path, f"stale results (schema {found}; this lethe-lab reads schema {SCHEMA_VERSION})", options)
    problems = _summary_problems(summary)
    if _missing(config, CONFIG_KEYS):
        problems.append(f"config.json lacks {_missing(config, CONFIG_KEYS)}")
    elif not isinstance(config["pipeline"], dict) or _missing(config["pipeline"], PIPELINE_KEYS):
        problems.append(f"config.json's pipeline lacks {_missing(config['pipeline'] if isinstance(config['pipeline'], dict) else {}, PIPELINE_KEYS)}")
    if problems:
        raise _fail(path, "partial results (" + "; ".join(problems) + ")", options)
    ids = {p.name: _check_columns(p, config) for p in sorted(path.glob("*.parquet"))}
    problem = mixed(path, ids)
    if problem:  # a rerun stopped (or a second writer ran) before its summary.json: numbers of two runs side by side
        raise _fail(path, f"partial results: a mixed folder ({problem}; the run that wrote it did not finish)", options)
    return Run(path, config, summary)


def list_runs(root: str | Path | None = None, prefix: str = "rif-") -> tuple[list[Run], list[str]]:
    """Every loadable run under the results folder, newest first, and a message per broken folder."""
    root = Path(root or results_dir())
    runs, problems = [], []
    if not root.exists():
        return runs, problems
    for d in sorted((p for p in root.iterdir() if p.is_dir() and p.name.startswith(prefix)), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            runs.append(load_run(d))
        except ResultsError as exc:
            problems.append(str(exc))
    return runs, problems


# A replay loads the run's dataset on a page view (and for the report): a results folder naming a huge generated
# dataset would cost seconds and a GB each time, so names asking for more turns than this are refused.
DEFAULT_MAX_REPLAY_TURNS = 150_000  # the haystack study's largest size is 145,000 turns
_SIZED_NAME = re.compile(r"(synthetic|locomo-haystack(?:-msg)?):([0-9]+)")
_DEFAULT_PATH_NAMES = ("locomo", "nfcorpus", "longmemeval")


def max_replay_turns() -> int:
    """The most turns a replay generates for a dataset a results folder names: `LETHE_MAX_REPLAY_TURNS`, default
    DEFAULT_MAX_REPLAY_TURNS."""
    raw = os.environ.get("LETHE_MAX_REPLAY_TURNS", "").strip()
    if not raw:
        return DEFAULT_MAX_REPLAY_TURNS
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"LETHE_MAX_REPLAY_TURNS must be a whole number of turns >= 1, got {raw!r}")
    return int(raw)


def data_roots() -> list[Path]:
    """Where a results folder's dataset path may point: the shared data, LETHE_HOME, and the default dataset paths
    (each `LETHE_<NAME>_PATH` included), resolved."""
    roots = [shared_data_dir(), home_dir(), *(default_dataset_path(name) for name in _DEFAULT_PATH_NAMES)]
    return list(dict.fromkeys(Path(os.path.realpath(r)) for r in roots))


def _within(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _replay_source(run: Run) -> tuple[str, str | None]:
    """The dataset name and path to rebuild `run` from, checked before anything is opened: the name says what is
    loaded (a generated dataset at most `max_replay_turns()` turns), and a path is followed only inside
    `data_roots()` and only to a regular file or a folder. A results file is data: it never chooses which file of
    the machine is read (its `path` could name /etc/passwd, /proc/self/environ or a FIFO), nor makes a page view
    generate a million turns."""
    c = run.config
    name, path = c["dataset"], c["path"]
    if not isinstance(name, str) or not name:
        raise _fail(run.path / "config.json", f"its dataset {name!r} is not a dataset name", c)
    sized = _SIZED_NAME.fullmatch(name)
    limit = max_replay_turns()
    if sized and int(sized.group(2)) > limit:
        raise _fail(run.path, f"its dataset {name!r} asks for {int(sized.group(2)):,} turns, more than the {limit:,} a replay "
                              "generates (LETHE_MAX_REPLAY_TURNS raises the limit)", c)
    if path is None:
        return name, None
    if not isinstance(path, str) or not path or "\0" in path:
        raise _fail(run.path / "config.json", f"its dataset path {path!r} is not a path", c)
    resolved = Path(os.path.realpath(path))
    roots = data_roots()
    if not _within(resolved, roots):
        raise _fail(run.path, f"its dataset path {path} is outside the data folders ({', '.join(map(str, roots))}); "
                              "a results folder's dataset is read only by name or from there: put the data under one of "
                              "them (or name it with LETHE_<DATASET>_PATH) and regenerate the run on it", c)
    try:
        mode = os.stat(resolved).st_mode
    except OSError:
        return name, path  # missing: the loader says so, with the path
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise _fail(run.path, f"its dataset path {path} is not a regular file or folder", c)
    return name, path


def replay_context(run: Run):
    """Rebuild the replay inputs (dataset, packed pools, query vectors) of a run from the caches, without models.

    The dataset is resolved by `_replay_source` (by name, a path only inside the data folders, a size limit) before
    anything is read. Whatever the recorded dataset path or the caches hold now, a failure is a ResultsError naming it
    and the command that rebuilds the run: the dashboard shows that line instead of the loader's traceback.
    """
    c = run.config
    try:
        pipeline = PipelineConfig(**{**c["pipeline"], "bm25": BM25Params(**c["pipeline"]["bm25"])})
    except TypeError as exc:
        raise _fail(run.path / "config.json", f"its pipeline does not match this version ({exc})", c) from None
    name, path = _replay_source(run)
    where = f" at {path}" if path else ""
    try:
        ds = load_dataset(name, path, c["conversations"], c["limit_queries"])
    except (ValueError, OSError) as exc:  # DatasetError is a ValueError
        raise _fail(run.path, f"its dataset {name!r}{where} cannot be loaded ({exc}); put the data back, or "
                              "regenerate the run on the data you have (with --path pointing at it)", c) from None
    directory = pools_dir(ds.name, c["pool_key"])
    if not (directory / "manifest.json").exists():
        raise _fail(run.path, f"the pools of this run are not cached (no {directory})", c)
    try:
        pools = load_pools(directory, ds.queries)
    except (ValueError, KeyError, OSError) as exc:
        raise _fail(run.path, f"the pools of this run at {directory} cannot be read ({exc})", c) from None
    if EmbeddingCache(cache_dir(), LazyEncoder(pipeline.encoder).name).count_missing([q.text for q in ds.queries]):
        raise _fail(run.path, "the query embeddings of this run are not cached", c)
    return ReplayContext(ds, pools.packed([q.id for q in ds.queries], c["calibration"]), query_vectors(ds.queries, pipeline),
                         c["second_stage"])


# The RIF constants of a standard run (DESIGN.md); a run with other values is a sweep point, not the headline.
STANDARD = {"alpha": 0.3, "eta": 0.1, "decay": 0.005, "cap": CAP, "reinforce": WINNER_RELIEF}


def is_standard(r: Run) -> bool:
    """A full run: every query, every arm, the standard constants (not a notebook's subset, sweep point or ablation of
    the decay), so a report reading "the newest run" never picks a side run that happened to finish later."""
    c = r.config
    if c.get("conversations") or c.get("limit_queries") or c.get("arms") or c.get("eager_decay"):
        return False
    return all(float(c.get(k, v)) == v for k, v in STANDARD.items())


def latest_runs(dataset: str, reranker: str | None = None, second_stage: str | None = None,
                reading: str | None = None, identity: str | None = None) -> dict[str, Run]:
    """The newest standard run (`is_standard`) of each protocol of `dataset`, optionally of one reranker, second stage,
    logit reading ("raw" or "calibrated") and reranker identity (weights and inference backend)."""
    runs, _ = list_runs()
    chosen: dict[str, Run] = {}
    for r in runs:  # newest first
        s = r.summary
        if s["dataset"] != dataset or (reranker and s["reranker"] != reranker) or not is_standard(r):
            continue
        if (second_stage and s.get("second_stage") != second_stage) or (reading and logit_reading(s) != reading):
            continue
        if identity and s.get("reranker_identity") != identity:
            continue
        chosen.setdefault(s["protocol"], r)
    return chosen
