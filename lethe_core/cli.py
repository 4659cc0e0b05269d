"""`lethe-lab` command line (also `python -m lethe_core`)."""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="lethe-lab: memory retrieval workbench (hybrid retrieval, cached pools, clustered RIF).")
data_app = typer.Typer(no_args_is_help=True, help="Inspect datasets.")
pools_app = typer.Typer(no_args_is_help=True, help="Build the candidate-pool cache.")
app.add_typer(data_app, name="data")
app.add_typer(pools_app, name="pools")

DATASET_HELP = "locomo | nfcorpus | longmemeval | beir (with --path) | synthetic[:N_TURNS]"
PathOpt = typer.Option(None, "--path", help="dataset file or folder (default: ../shared/data/..., or LETHE_<NAME>_PATH)")
RerankerOpt = typer.Option("auto", "--reranker", help="auto | hub:<name> | local:<folder> | test:lexical")
LimitOpt = typer.Option(None, "--limit-queries", help="evaluate only the first N queries")
ConvOpt = typer.Option(None, "--conversations", help="keep only the first N conversations (quick runs)")
KLegOpt = typer.Option(30, "--k-leg", help="depth of each first-stage leg (30, or 80)")


def _fail(exc: Exception) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


def _guard(fn):
    """Turn expected user-facing failures into one clear line and exit code 2."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from .datasets.errors import DatasetError
        from .retrieval.dense import EncoderUnavailable
        from .retrieval.rerank import RerankerUnavailable

        try:
            return fn(*args, **kwargs)
        except (DatasetError, RerankerUnavailable, EncoderUnavailable, ValueError, KeyError) as exc:
            _fail(exc)

    return wrapper


@data_app.command("describe")
@_guard
def describe(dataset: str = typer.Argument(..., help=DATASET_HELP), path: Optional[str] = PathOpt,
             as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout")) -> None:
    """Counts: turns, sessions, conversations, queries by type, qrels, unresolved evidence."""
    from .datasets import load_dataset

    info = load_dataset(dataset, path).describe()
    if as_json:
        typer.echo(json.dumps(info, default=str))
        return
    typer.echo(f"{info['dataset']}  ({info['source']})")
    if not info["corpus_present"]:
        typer.echo(f"  corpus: MISSING. {info['corpus_hint']}")
    for key in ("turns", "sessions", "conversations", "queries", "qrels"):
        typer.echo(f"  {key:<14}{info[key]:>8,}")
    for qtype, n in info["queries_by_type"].items():
        typer.echo(f"    {qtype:<22}{n:>6,}")
    for name, n in info["extra_query_sets"].items():
        typer.echo(f"  extra set {name}: {n:,} queries")
    if info["unresolved_evidence"]:
        typer.echo(f"  unresolved evidence ids ({len(info['unresolved_evidence'])}):")
        for item in info["unresolved_evidence"]:
            typer.echo(f"    {item['conversation']} question {item['question']}: {item['raw']!r}")


@pools_app.command("build")
@_guard
def pools_build(dataset: str = typer.Argument(..., help=DATASET_HELP), path: Optional[str] = PathOpt,
                limit_queries: Optional[int] = LimitOpt, conversations: Optional[int] = ConvOpt,
                reranker: str = RerankerOpt, k_leg: int = KLegOpt) -> None:
    """Score every query's candidate union once and cache it (resumable)."""
    from .experiments.systems import SystemsExperiment
    from .pools import PoolBuilder
    from .retrieval.pipeline import PipelineConfig
    from .retrieval.rerank import resolve_reranker

    exp = SystemsExperiment(dataset, path, reranker, limit_queries, conversations, PipelineConfig(k_leg=k_leg))
    ds = exp.load()
    pools = PoolBuilder(ds, resolve_reranker(reranker), exp.pipeline).build()
    typer.echo(f"{len(pools.query_ids())} query pools ({len(pools.frame):,} candidates) in {pools.directory} [reranker {pools.reranker}]")


@app.command("systems")
@_guard
def systems(dataset: str = typer.Argument(..., help=DATASET_HELP), path: Optional[str] = PathOpt,
            limit_queries: Optional[int] = LimitOpt, conversations: Optional[int] = ConvOpt,
            reranker: str = RerankerOpt, k_leg: int = KLegOpt,
            as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout")) -> None:
    """The systems table (vector, bm25, rrf, vector_rerank, full, control) from cached pools."""
    from .experiments.systems import SystemsExperiment
    from .retrieval.pipeline import PipelineConfig

    summary = SystemsExperiment(dataset, path, reranker, limit_queries, conversations, PipelineConfig(k_leg=k_leg)).run()
    if as_json:
        typer.echo(json.dumps(summary))
        return
    typer.echo(f"\n{summary['dataset']}: {summary['n_queries']:,} queries, reranker {summary['reranker']}")
    typer.echo(f"{'system':<15}{'NDCG@10':>9}{'95% CI':>18}{'R@10':>8}{'poolR@30':>10}{'p vs rrf':>10}")
    for s in summary["systems"]:
        lo, hi = s["ndcg@10_ci"]
        p = f"{s['p_vs_rrf']:.4f}" if "p_vs_rrf" in s else "-"
        typer.echo(f"{s['name']:<15}{s['ndcg@10']:>9.4f}   [{lo:.4f}, {hi:.4f}]{s['recall@10']:>8.4f}{s['pool_recall@30']:>10.4f}{p:>10}")
    typer.echo(f"per-query results: {summary['results_dir']}")


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
