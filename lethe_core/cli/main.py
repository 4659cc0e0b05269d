"""`lethe-lab` command line (also `python -m lethe_core`).

Every command checks all of its values (`lethe_core.cli.checks`) before it loads a dataset, a
model or a pool, and every user-facing failure, click's own parse errors included, is one
`error: ...` line with exit code 2.
"""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer

from lethe_core.cli import checks as check

app = typer.Typer(add_completion=False, no_args_is_help=True, help="lethe-lab: memory retrieval workbench (hybrid retrieval, cached pools, clustered RIF).")
data_app = typer.Typer(no_args_is_help=True, help="Inspect datasets.")
pools_app = typer.Typer(no_args_is_help=True, help="Build the candidate-pool cache.")
app.add_typer(data_app, name="data")
app.add_typer(pools_app, name="pools")
rif_app = typer.Typer(no_args_is_help=True, help="Clustered retrieval-induced forgetting: replay the paper's experiments from cached pools.")
app.add_typer(rif_app, name="rif")
reranker_app = typer.Typer(no_args_is_help=True, help="Train and inspect offline rerankers.")
app.add_typer(reranker_app, name="reranker")
cache_app = typer.Typer(no_args_is_help=True, help="Inspect the reranker pair-score cache.")
app.add_typer(cache_app, name="cache")
notebooks_app = typer.Typer(no_args_is_help=True, help="Execute the checkpoint notebooks and regenerate notebooks/README.md.")
app.add_typer(notebooks_app, name="notebooks")
docs_app = typer.Typer(no_args_is_help=True, help="Regenerate the generated blocks of README.md and docs/*.md from results folders.")
app.add_typer(docs_app, name="docs")

DATASET_HELP = "locomo | locomo-audited | realtalk | locomo-haystack[-msg][:N_TURNS] | nfcorpus | longmemeval | beir (with --path) | synthetic[:N_TURNS]"
PathOpt = typer.Option(None, "--path", help="dataset file or folder (default: ../shared/data/..., or LETHE_<NAME>_PATH)")
RerankerOpt = typer.Option("auto", "--reranker", help=check.RERANKER_FORMS)
CalibOpt = typer.Option(False, "--calibration/--no-calibration", help="ablation: read the affine-calibrated logit (where the "
                        "reranker has one) instead of the raw logit, the paper's reading and the default")
StageOpt = typer.Option("ce", "--second-stage", help="ce (reranker order, the paper's) | fused (validated fusion weight, when the reranker has one)")
LimitOpt = typer.Option(None, "--limit-queries", help="evaluate only the first N queries (N >= 1)")
ConvOpt = typer.Option(None, "--conversations", help="keep only the first N conversations (N >= 1; quick runs)")
KLegOpt = typer.Option(30, "--k-leg", help="depth of each first-stage leg (30; the deep pools of notebooks 14 and 06 use 80 and 100)")
EncoderOpt = typer.Option("minilm", "--encoder", help="minilm (bundled all-MiniLM-L6-v2) | a sentence-transformers folder | test:hash")
BackendOpt = typer.Option("auto", "--backend", help=f"cross-encoder inference backend: {' | '.join(check.BACKENDS)}")
OverwriteOpt = typer.Option(False, "--overwrite", help="recompute even when a finished run with the same config exists (default: reuse it)")
JsonOpt = typer.Option(False, "--json", help="one JSON object on stdout")
TokenizerOpt = typer.Option("regex", "--tokenizer", help="BM25 tokenizer: regex (the reference's) | split | regex-stop | regex-porter")
ScopeOpt = typer.Option("global", "--scope", help="global (one pool of every turn, the paper's) | conversation (each question searches its own conversation)")


def _fail(exc: Exception) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


def _guard(fn):
    """Turn expected user-facing failures into one clear line and exit code 2."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from lethe_core.datasets.errors import DatasetError
        from lethe_core.retrieval.dense import EncoderUnavailable
        from lethe_core.rerankers import RerankerUnavailable

        try:
            return fn(*args, **kwargs)
        except (DatasetError, RerankerUnavailable, EncoderUnavailable, ValueError, KeyError) as exc:
            _fail(exc)

    return wrapper


def _fold_alias(reranker: Optional[str], dataset: str) -> Optional[str]:
    """`fold` names DATASET's fold teacher (for LoCoMo the one `make run` trains), so a Makefile step can ask for it
    without knowing the recipe's name on this machine."""
    from lethe_core.rerankers.recipes import fold_teacher_spec

    return fold_teacher_spec(dataset) if reranker == "fold" else reranker


def _check_run(dataset: str, path: Optional[str], limit_queries: Optional[int] = None, conversations: Optional[int] = None,
               reranker: Optional[str] = None, encoder: Optional[str] = None, k_leg: Optional[int] = None,
               second_stage: Optional[str] = None, backend: Optional[str] = None, tokenizer: Optional[str] = None,
               scope: Optional[str] = None) -> None:
    """The values shared by the commands that build pools; the cheap checks first, the hub probe last."""
    from lethe_core.util.paths import writable_home

    check.dataset(dataset, path)
    check.at_least("--limit-queries", limit_queries, 1)
    check.at_least("--conversations", conversations, 1)
    check.conversations(dataset, conversations)
    check.at_least("--k-leg", k_leg, 1)
    if second_stage is not None:
        from lethe_core.retrieval.second_stage import MODES

        check.choice("--second-stage", second_stage, MODES)
    if backend is not None:
        check.choice("--backend", backend, check.BACKENDS)
    if tokenizer is not None:
        from lethe_core.retrieval.text import TOKENIZERS

        check.choice("--tokenizer", tokenizer, tuple(TOKENIZERS))
    if scope is not None:
        from lethe_core.retrieval.pipeline import SCOPES

        check.choice("--scope", scope, SCOPES)
    writable_home()
    if encoder is not None:
        check.encoder(encoder)
    if reranker is not None:
        check.reranker(reranker)


def _dropped_line(dropped: Optional[dict], dataset: str, path: Optional[str], whole_file: Optional[dict] = None) -> Optional[str]:
    """One line naming what the loader dropped or changed (non-zero counts) in the data evaluated, and in the whole
    file when that was a subset with other counts; None when nothing was."""
    def counts(d):
        return ", ".join(f"{key.replace('_', ' ')}: {n:,}" for key, n in (d or {}).items() if n)

    items = counts(dropped)
    if not items and not counts(whole_file):
        return None
    where = f" --path {path}" if path else ""
    whole = f"; in the whole file: {counts(whole_file) or 'nothing'}" if whole_file is not None else ""
    subset = " in the subset evaluated" if whole_file is not None else ""
    return (f"dropped by the loader{subset}: {items or 'nothing'}{whole} (see `lethe-lab data describe {dataset}{where} --json`)")


def _echo_dropped(dropped: Optional[dict], dataset: str, path: Optional[str], whole_file: Optional[dict] = None) -> None:
    line = _dropped_line(dropped, dataset, path, whole_file)
    if line:
        typer.echo(line)


@data_app.command("describe")
@_guard
def describe(dataset: str = typer.Argument(..., help=DATASET_HELP), path: Optional[str] = PathOpt, as_json: bool = JsonOpt) -> None:
    """Counts: turns, sessions, conversations, queries by type, qrels, unresolved evidence."""
    from lethe_core.datasets import load_dataset

    check.dataset(dataset, path)
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
                reranker: str = typer.Option("auto", "--reranker", help=f"{check.RERANKER_FORMS} | fold (DATASET's fold teacher)"),
                k_leg: int = KLegOpt, encoder: str = EncoderOpt, backend: str = BackendOpt,
                tokenizer: str = TokenizerOpt, scope: str = ScopeOpt, as_json: bool = JsonOpt,
                ray: bool = typer.Option(False, "--ray", help="embed the corpus and score the unions on Ray workers (docs/distributed.md)"),
                ray_address: Optional[str] = typer.Option(None, "--ray-address", help="an existing Ray cluster (host:port, ray://host:port or auto); default: a local instance"),
                workers: int = typer.Option(2, "--workers", help="Ray workers, one CPU each")) -> None:
    """Score every query's candidate union once and cache it (resumable; `--ray` spreads the heavy stages over workers)."""
    from lethe_core.datasets import load_dataset
    from lethe_core.pools.cache import PoolBuilder
    from lethe_core.retrieval.pipeline import PipelineConfig
    from lethe_core.rerankers import resolve_reranker

    reranker = _fold_alias(reranker, dataset)
    _check_run(dataset, path, limit_queries, conversations, reranker, encoder, k_leg, backend=backend, tokenizer=tokenizer, scope=scope)
    check.at_least("--workers", workers, 1)
    if ray_address and not ray:
        raise check.ArgError("--ray-address needs --ray")
    ds = load_dataset(dataset, path, conversations, limit_queries)
    dropped = ds.dropped_entries()
    config = PipelineConfig(k_leg=k_leg, encoder=encoder, tokenizer=tokenizer, scope=scope)
    builder = PoolBuilder(ds, resolve_reranker(reranker, backend=backend), config)
    if ray:
        from lethe_core.pools.distributed import RayConfig, RayUnavailable, build_pools_on_ray

        try:
            pools = build_pools_on_ray(builder, RayConfig(workers=workers, address=ray_address))
        except RayUnavailable as exc:
            _fail(exc)
    else:
        pools = builder.build()
    n_queries, n_candidates = len(pools.query_ids()), len(pools.frame)
    if as_json:
        typer.echo(json.dumps({"dataset": ds.name, "reranker": pools.reranker, "n_queries": n_queries, "candidates": n_candidates,
                               "directory": str(pools.directory), **dropped}))
        return
    typer.echo(f"{n_queries} query pools ({n_candidates:,} candidates) in {pools.directory} [reranker {pools.reranker}]")
    _echo_dropped(dropped["dropped"], dataset, path, dropped.get("dropped_whole_file"))


@app.command("systems")
@_guard
def systems(dataset: str = typer.Argument(..., help=DATASET_HELP), path: Optional[str] = PathOpt,
            limit_queries: Optional[int] = LimitOpt, conversations: Optional[int] = ConvOpt,
            reranker: str = RerankerOpt, k_leg: int = KLegOpt, second_stage: str = StageOpt, calibration: bool = CalibOpt,
            encoder: str = EncoderOpt, backend: str = BackendOpt, tokenizer: str = TokenizerOpt, scope: str = ScopeOpt,
            overwrite: bool = OverwriteOpt, as_json: bool = JsonOpt) -> None:
    """The systems table (vector, bm25, rrf, vector_rerank, full, control) from cached pools."""
    from lethe_core.experiments.setup import DataSpec
    from lethe_core.experiments.systems import SystemsExperiment, pool_recall
    from lethe_core.results.runs import LOGIT_READINGS, logit_reading
    from lethe_core.retrieval.pipeline import PipelineConfig

    _check_run(dataset, path, limit_queries, conversations, reranker, encoder, k_leg, second_stage, backend, tokenizer, scope)
    config = PipelineConfig(k_leg=k_leg, encoder=encoder, tokenizer=tokenizer, scope=scope)
    data = DataSpec(dataset=dataset, path=path, reranker=reranker, backend=backend, conversations=conversations,
                    limit_queries=limit_queries, pipeline=config, second_stage=second_stage, calibration=calibration)
    summary = SystemsExperiment(data).run(mode="overwrite" if overwrite else "reuse")
    if as_json:
        typer.echo(json.dumps(summary))
        return
    typer.echo(f"\n{summary['dataset']}: {summary['n_queries']:,} queries, reranker {summary['reranker']}, "
               f"second stage {summary['second_stage']}, {LOGIT_READINGS[logit_reading(summary)]}")
    typer.echo(f"{'system':<15}{'NDCG@10':>9}{'95% CI':>18}{'R@10':>8}{'poolR':>10}{'p vs rrf':>10}")
    for s in summary["systems"]:
        lo, hi = s["ndcg@10_ci"]
        p = f"{s['p_vs_rrf']:.4f}" if "p_vs_rrf" in s else "-"
        typer.echo(f"{s['name']:<15}{s['ndcg@10']:>9.4f}   [{lo:.4f}, {hi:.4f}]{s['recall@10']:>8.4f}{pool_recall(s):>10.4f}{p:>10}")
    typer.echo("poolR: recall of the candidates each system reorders (the top 30; the whole union for control)")
    _echo_dropped(summary.get("dropped"), dataset, path, summary.get("dropped_whole_file"))
    typer.echo(f"per-query results: {summary['results_dir']}")


@reranker_app.command("train")
@_guard
def reranker_train(dataset: str = typer.Argument("locomo", help="a dataset with conversations (locomo)"), path: Optional[str] = PathOpt,
                   folds: int = typer.Option(2, "--folds", help="K folds by conversation (K >= 2), or 1: one model on every "
                                             "conversation but a validation one, to score another dataset (a cross-dataset teacher)"),
                   name: Optional[str] = typer.Option(None, "--name", help="saved as data/models/NAME, used as trained:NAME "
                                                      "(default: minilm-2fold for LoCoMo's 2 folds, DATASET-all for --folds 1, "
                                                      "else DATASET-Kfold)"),
                   epochs: int = typer.Option(1, "--epochs"), lr: float = typer.Option(3e-5, "--lr"),
                   negatives: int = typer.Option(7, "--negatives", help="hard negatives per positive"),
                   observations: bool = typer.Option(True, "--observations/--no-observations", help="LoCoMo observations as extra pseudo-queries"),
                   max_groups: Optional[int] = typer.Option(None, "--max-groups", help="cap training groups per fold (smoke runs)"),
                   budget: float = typer.Option(1.0, "--budget", help="share of each fold's training groups used, in (0, 1]"),
                   precision: str = typer.Option("fp32", "--precision", help="fp32, bf16 (autocast) or auto (bf16 where the CPU has it natively)"),
                   seed: int = typer.Option(13, "--seed")) -> None:
    """Train one cross-encoder per fold of conversations (or one on the whole dataset), offline, from the bundled MiniLM."""
    from lethe_core.util.paths import writable_home
    from lethe_core.rerankers.recipes import TrainConfig
    from lethe_core.rerankers.training import default_model_name, train_folds

    check.dataset(dataset, path)
    check.at_least("--folds", folds, 1)
    name = name or default_model_name(dataset, folds)
    check.at_least("--epochs", epochs, 1)
    check.at_least("--negatives", negatives, 1)
    check.at_least("--max-groups", max_groups, 1)
    check.fraction("--budget", budget)
    if precision not in ("fp32", "bf16", "auto"):
        raise check.ArgError(f"--precision must be fp32, bf16 or auto, got {precision!r}")
    if not lr > 0:
        raise check.ArgError(f"--lr must be > 0, got {lr}")
    if not name or name != name.strip() or any(c in name for c in "/\\:") or name.startswith("."):
        raise check.ArgError(f"--name must be a plain folder name (no '/', '\\', ':' or leading '.'); got {name!r}")
    writable_home()
    cfg = TrainConfig(dataset=dataset, path=path, name=name, folds=folds, epochs=epochs, lr=lr, negatives=negatives,
                      observations=observations, max_groups=max_groups, budget=budget, seed=seed, precision=precision)
    manifest = train_folds(cfg)
    for f in manifest["folds"]:
        typer.echo(f"fold {f['fold']}: {f['train_groups']} groups, {f['train_seconds']} s ({f['train_pairs_per_s']} pairs/s), "
                   f"fusion weight {f['fuse_w']}, calibration a={f['calibration'][0]:.3f} b={f['calibration'][1]:.3f}")
    scope = f"on all of {dataset}: it scores other datasets only" if folds == 1 else "on its fold's other conversations"
    typer.echo(f"use it as --reranker trained:{name} (trained {scope})")


@reranker_app.command("curve")
@_guard
def reranker_curve(dataset: str = typer.Argument("locomo", help="a dataset with conversations (locomo)"),
                   point: Optional[list[str]] = typer.Option(None, "--point", help="BUDGET:EPOCHS:NEGATIVES, repeatable "
                                                             "(default 0.1:1:7 0.25:1:7 0.5:1:7 1:1:7 1:2:7)"),
                   precision: str = typer.Option("auto", "--precision", help="fp32, bf16 or auto"),
                   backend: str = BackendOpt, as_json: bool = JsonOpt) -> None:
    """Learning curve: train each recipe (resumable) and print held-out `full` and `control` NDCG@10 (second stage ce)."""
    from lethe_core.experiments.learning_curve import DEFAULT_POINTS, LearningCurveConfig, markdown_table
    from lethe_core.util.paths import writable_home

    check.dataset(dataset, None)
    check.choice("--precision", precision, ("fp32", "bf16", "auto"))
    check.choice("--backend", backend, check.BACKENDS)
    points = []
    for text in point or []:
        try:
            b, e, n = text.split(":")
            points.append((float(b), int(e), int(n)))
        except ValueError:
            raise check.ArgError(f"--point must be BUDGET:EPOCHS:NEGATIVES (e.g. 0.25:1:7), got {text!r}") from None
        check.fraction("--point budget", points[-1][0])
        check.at_least("--point epochs", points[-1][1], 1)
        check.at_least("--point negatives", points[-1][2], 1)
    writable_home()
    summary = LearningCurveConfig(dataset, points=tuple(points) or DEFAULT_POINTS, precision=precision, backend=backend).run()
    typer.echo(json.dumps(summary) if as_json else markdown_table(summary["points"]))


@reranker_app.command("ensure")
@_guard
def reranker_ensure() -> None:
    """Make sure `--reranker auto` has a cross-encoder: train the first-run fold recipe when none is on disk (resumable)."""
    from lethe_core.rerankers.training import ensure_reranker

    typer.echo(f"reranker: {ensure_reranker()}")


@reranker_app.command("report")
@_guard
def reranker_report_cmd(name: Optional[str] = typer.Argument(None, help="a trained model; default: the dataset's fold teacher (the one `make run` trains)"), dataset: str = typer.Option("locomo", "--dataset"),
                        out: str = typer.Option("RERANKER.md", "--out"), backend: str = BackendOpt) -> None:
    """Write the training report (folds, validation choices, logit distributions, evaluation with p vs rrf)."""
    from dataclasses import replace
    from pathlib import Path

    from lethe_core.experiments.setup import DataSpec
    from lethe_core.experiments.systems import SystemsExperiment
    from lethe_core.report.reranker_md import reranker_report, splice_teachers, teachers_block

    from lethe_core.rerankers.recipes import fold_teacher

    check.dataset(dataset, None)
    name = name or fold_teacher(dataset)
    check.reranker(f"trained:{name}", "NAME")
    check.choice("--backend", backend, check.BACKENDS)
    if Path(out).is_dir():
        raise check.ArgError(f"--out {out} is a folder; give a file name (e.g. RERANKER.md)")
    data = DataSpec(dataset, reranker=f"trained:{name}", backend=backend, progress=False)
    systems = [SystemsExperiment(replace(data, second_stage=stage)).run() for stage in ("fused", "ce")]
    text = reranker_report(name, systems)
    kept = teachers_block(Path(out).read_text()) if Path(out).is_file() else None
    Path(out).write_text(splice_teachers(text, kept) if kept else text)  # the teachers table is `reranker teachers`' own
    typer.echo(f"wrote {out}")


@reranker_app.command("teachers")
@_guard
def reranker_teachers(backend: str = typer.Option("onnx", "--backend", help="torch, onnx (fp32, default), onnx-int8 or auto"),
                      out: str = typer.Option("RERANKER.md", "--out")) -> None:
    """Fold vs cross-dataset teacher on LoCoMo and REALTALK: their systems tables (built when missing), written as
    RERANKER.md's teacher table (the rest of the file is kept)."""
    from pathlib import Path

    from lethe_core.experiments.teacher_matrix import TeacherMatrix
    from lethe_core.report.reranker_md import splice_teachers, teachers_section

    check.choice("--backend", backend, check.BACKENDS)
    if Path(out).is_dir():
        raise check.ArgError(f"--out {out} is a folder; give a file name (e.g. RERANKER.md)")
    systems = TeacherMatrix(backend=backend).systems()
    before = Path(out).read_text() if Path(out).is_file() else ""
    Path(out).write_text(splice_teachers(before, teachers_section(systems)))
    for s in systems:
        rows = {r["name"]: r["ndcg@10"] for r in s["systems"]}
        typer.echo(f"{s['dataset']:<10} {s['reranker']:<32} rrf {rows['rrf']:.4f}  full {rows['full']:.4f}  control {rows['control']:.4f}")
    typer.echo(f"wrote the teacher table of {out}")


def _fmt_p(p) -> str:
    return "-" if p is None else f"{p:.4f}"


def _print_rif(summary: dict, dataset: str, path: Optional[str]) -> None:
    from lethe_core.results.runs import LOGIT_READINGS, logit_reading

    typer.echo(f"\n{summary['dataset']} / protocol {summary['protocol']}: {summary['n_queries']:,} queries, seeds {summary['seeds']}, "
               f"reranker {summary['reranker']} (second stage {summary['second_stage']}; RIF read the {LOGIT_READINGS[logit_reading(summary)]}); "
               f"every column reads the {summary.get('seed_convention', 'first seed')}, CIs over queries")
    typer.echo(f"{'arm':<22}{'NDCG@10':>8}{'95% CI':>18}{'seed sd':>8}{'delta':>9}{'95% CI':>20}{'p':>8}{'p_holm':>8}"
               f"{'R@30':>8}{'dR@30':>8}{'suppressed':>11}")
    for a in summary["arms"]:
        n, d, r = a["ndcg@10"], a["delta_ndcg"], a["recall@30"]
        supp = sum(v["entries"] for v in a["suppressed_entries"].values()) if a["suppressed_entries"] else 0
        typer.echo(f"{a['name']:<22}{n['mean']:>8.4f}  [{n['ci'][0]:.4f}, {n['ci'][1]:.4f}]{n['seed_sd']:>8.4f}"
                   f"{d['mean']:>+9.4f}  [{d['ci'][0]:+.4f}, {d['ci'][1]:+.4f}]{_fmt_p(a['p']):>8}{_fmt_p(a['p_holm']):>8}"
                   f"{r['mean']:>8.4f}{a['delta_recall']['mean']:>+8.4f}{supp:>11,.0f}")
    _echo_dropped(summary.get("dropped"), dataset, path, summary.get("dropped_whole_file"))
    typer.echo(f"results: {summary['results_dir']}")


def _check_rif(protocol: str, seeds: int, alpha: Optional[float] = None, eta: Optional[float] = None,
               burn_in: Optional[int] = None, decay: Optional[float] = None, cap: Optional[float] = None,
               reinforce: Optional[float] = None) -> None:
    from lethe_core.rif.protocols import PROTOCOLS

    check.choice("--protocol", protocol, PROTOCOLS)
    check.at_least("--seeds", seeds, 1)
    check.at_least("--burn-in", burn_in, 0)
    check.at_least("--alpha", alpha, 0)
    check.at_least("--eta", eta, 0)
    check.at_least("--decay", decay, 0)
    check.at_least("--cap", cap, 0)
    check.at_least("--reinforce", reinforce, 0)


@rif_app.command("run")
@_guard
def rif_run(dataset: str = typer.Argument(..., help=DATASET_HELP), path: Optional[str] = PathOpt,
            protocol: str = typer.Option("paper", "--protocol", help="paper | heldout | prequential"),
            arms: Optional[str] = typer.Option(None, "--arms", help="comma-separated arm names (default: all)"),
            seeds: int = typer.Option(5, "--seeds", help="number of seeds, starting at the paper's 42"),
            burn_in: Optional[int] = typer.Option(None, "--burn-in", help="burn-in steps (default 5,000; 3,000 for nfcorpus)"),
            alpha: float = typer.Option(0.3, "--alpha"), eta: float = typer.Option(0.1, "--eta"),
            decay: float = typer.Option(0.005, "--decay", help="lambda: suppression decay per step"),
            cap: float = typer.Option(1.0, "--cap", help="maximum suppression of an entry"),
            reinforce: float = typer.Option(0.05, "--reinforce", help="relief of a winner per retrieval"),
            eager_decay: bool = typer.Option(False, "--eager-decay", help="decay at read time instead of lazily on update"),
            limit_queries: Optional[int] = LimitOpt, conversations: Optional[int] = ConvOpt,
            reranker: str = RerankerOpt, second_stage: str = StageOpt, calibration: bool = CalibOpt,
            encoder: str = EncoderOpt, backend: str = BackendOpt, overwrite: bool = OverwriteOpt, as_json: bool = JsonOpt) -> None:
    """Replay RIF arms under a protocol from cached pools; prints the table and writes data/results/<run>/."""
    from lethe_core.experiments.rif import RIFExperiment
    from lethe_core.experiments.setup import DataSpec
    from lethe_core.retrieval.pipeline import PipelineConfig

    _check_rif(protocol, seeds, alpha, eta, burn_in, decay, cap, reinforce)
    arm_names = check.arm_names(arms, RIFExperiment.ks)
    _check_run(dataset, path, limit_queries, conversations, reranker, encoder, None, second_stage, backend)
    data = DataSpec(dataset=dataset, path=path, reranker=reranker, backend=backend, conversations=conversations,
                    limit_queries=limit_queries, pipeline=PipelineConfig(encoder=encoder), second_stage=second_stage,
                    calibration=calibration)
    exp = RIFExperiment(data, protocol=protocol, arms=arm_names, seeds=seeds, burn_in=burn_in, alpha=alpha, eta=eta,
                        decay=decay, cap=cap, reinforce=reinforce, eager_decay=eager_decay)
    summary = exp.run(mode="overwrite" if overwrite else "reuse")
    if as_json:
        typer.echo(json.dumps(summary))
    else:
        _print_rif(summary, dataset, path)


@rif_app.command("sweep")
@_guard
def rif_sweep(dataset: str = typer.Argument(..., help=DATASET_HELP), path: Optional[str] = PathOpt,
              protocol: str = typer.Option("paper", "--protocol", help="paper | heldout | prequential"),
              param: str = typer.Option("k", "--param", help="k | alpha | eta"),
              values: str = typer.Option("1,10,30,50,100", "--values", help="comma-separated values (integers >= 1 for k, numbers >= 0 otherwise)"),
              rule: str = typer.Option("gap", "--rule", help="uniform | gap"),
              seeds: int = typer.Option(1, "--seeds"), limit_queries: Optional[int] = LimitOpt,
              conversations: Optional[int] = ConvOpt, reranker: str = RerankerOpt, encoder: str = EncoderOpt,
              backend: str = BackendOpt, as_json: bool = JsonOpt) -> None:
    """NDCG@10 delta vs baseline as one parameter varies (K, alpha or eta)."""
    from lethe_core.experiments.rif import RIFExperiment
    from lethe_core.experiments.setup import DataSpec
    from lethe_core.retrieval.pipeline import PipelineConfig

    _check_rif(protocol, seeds)
    check.choice("--param", param, check.SWEEP_PARAMS)
    check.choice("--rule", rule, check.RULES)
    grid = check.numbers("--values", values, integer=param == "k", lo=1 if param == "k" else 0)
    _check_run(dataset, path, limit_queries, conversations, reranker, encoder, backend=backend)
    data = DataSpec(dataset=dataset, path=path, reranker=reranker, backend=backend, conversations=conversations,
                    limit_queries=limit_queries, pipeline=PipelineConfig(encoder=encoder), progress=False)
    rows = []
    for v in grid:
        k = int(v) if param == "k" else 30
        arm = f"global-{rule}" if k == 1 else f"clustered{k}-{rule}"
        kw = {"alpha": v} if param == "alpha" else {"eta": v} if param == "eta" else {}
        s = RIFExperiment(data, protocol=protocol, arms=[arm], ks=(k,) if k > 1 else (), seeds=seeds, map=False, **kw).run()
        a = s["arms"][-1]
        rows.append({param: v, "arm": arm, "ndcg@10": a["ndcg@10"]["mean"], "delta_ndcg": a["delta_ndcg"]["mean"],
                     "delta_ci": a["delta_ndcg"]["ci"], "p": a["p"], "results_dir": s["results_dir"]})
    if as_json:
        typer.echo(json.dumps({"dataset": dataset, "protocol": protocol, "param": param, "rule": rule, "rows": rows}))
        return
    typer.echo(f"{param:>8}{'arm':>22}{'NDCG@10':>9}{'delta':>9}{'95% CI':>20}{'p':>8}")
    for r in rows:
        typer.echo(f"{r[param]:>8g}{r['arm']:>22}{r['ndcg@10']:>9.4f}{r['delta_ndcg']:>+9.4f}  [{r['delta_ci'][0]:+.4f}, {r['delta_ci'][1]:+.4f}]{_fmt_p(r['p']):>8}")


@rif_app.command("teacher")
@_guard
def rif_teacher(dataset: str = typer.Argument("locomo"), reranker: Optional[str] = typer.Option(None, "--reranker", help="default: that of the newest paper run"),
                levels: int = typer.Option(6, "--teacher-levels", help="simulated-teacher quality levels (>= 1)")) -> None:
    """The teacher-quality study on the newest full paper run (simulated teachers beside the real one), for RESULTS.md."""
    from lethe_core.experiments.teacher import run_teacher_study

    check.dataset(dataset, None)
    check.at_least("--teacher-levels", levels, 1)
    table = run_teacher_study(dataset, reranker, levels)
    typer.echo(f"teacher study: {len(table)} rows written to results/teacher-{dataset}/")


@rif_app.command("matrix")
@_guard
def rif_matrix(seeds: int = typer.Option(5, "--seeds", help="number of seeds, starting at the paper's 42"),
               backend: str = typer.Option("onnx", "--backend", help="torch, onnx (fp32, default), onnx-int8 or auto")) -> None:
    """RIF under each teacher (fold, cross-dataset) on LoCoMo and REALTALK: the three protocols under the raw reading,
    the held-out one also calibrated (the ablation). Resumable: finished runs are reused. RESULTS.md reads them."""
    from lethe_core.experiments.teacher_matrix import TeacherMatrix
    from lethe_core.results.runs import logit_reading

    check.at_least("--seeds", seeds, 1)
    check.choice("--backend", backend, check.BACKENDS)
    for s in TeacherMatrix(seeds=seeds, backend=backend).rif():
        arm = next(a for a in s["arms"] if a["name"] == "clustered30-gap")
        typer.echo(f"{s['dataset']:<10} {s['reranker']:<32} {logit_reading(s):<11} {s['protocol']:<12} "
                   f"clustered30-gap {arm['delta_ndcg']['mean']:+.4f} (Holm p {_fmt_p(arm['p_holm'])})")


@rif_app.command("report")
@_guard
def rif_report(dataset: str = typer.Argument("locomo"), reranker: Optional[str] = typer.Option(None, "--reranker", help="default (or `fold`): the dataset's fold teacher, the one `make run` trains")) -> None:
    """Write RESULTS.md from one teacher's newest finished runs of each protocol (and the teacher study, when `rif teacher` ran)."""
    from lethe_core.report.results_md import write_report

    check.dataset(dataset, None)
    typer.echo(f"wrote {write_report(dataset, _fold_alias(reranker, dataset))}")


@cache_app.command("stats")
@_guard
def cache_stats_cmd(as_json: bool = JsonOpt) -> None:
    """Pairs stored per reranker in the pair-score cache, and the last pool build's hits and misses."""
    from lethe_core.inference.pair_cache import cache_stats

    info = cache_stats()
    if as_json:
        typer.echo(json.dumps(info))
        return
    typer.echo(f"pair-score cache {info['path']}: {info['pairs']:,} pairs")
    for r in info["rerankers"]:
        typer.echo(f"  {r['identity']:<60}{r['pairs']:>12,}")
    last = info.get("last_build")
    if last:
        rate = "-" if last["hit_rate"] is None else f"{last['hit_rate']:.1%}"
        typer.echo(f"last build {last['at']} ({last['label']}, {last['reranker']}): {last['hits']:,} hits, "
                   f"{last['scored']:,} scored, hit rate {rate}")
    else:
        typer.echo("no pool build has used the cache yet")


@app.command("stats")
@_guard
def stats_cmd(file: str = typer.Argument(..., help="per-query JSON: {configs: [{name, ndcg: [...], recall: [...]}]}"),
              baseline: str = typer.Option("baseline", "--baseline"), seed: int = typer.Option(0, "--seed"),
              as_json: bool = typer.Option(False, "--json")) -> None:
    """Bootstrap CIs, paired permutation tests and Holm / Bonferroni on per-query arrays."""
    from lethe_core.measures.stats import compare_configs, load_per_query_file

    table = compare_configs(load_per_query_file(file), baseline, seed=seed)
    if as_json:
        typer.echo(json.dumps(table, allow_nan=False))  # strict JSON: inputs are validated finite
        return
    typer.echo(f"{table['n_queries']} queries, baseline {baseline}")
    for metric in ("ndcg", "recall"):
        typer.echo(f"\n{'config':<24}{metric:>8}{'95% CI':>20}{'delta':>9}{'95% CI':>20}{'p':>8}{'p_holm':>8}{'p_bonf':>8}")
        for c in table["configs"]:
            m, d = c[metric], c[f"delta_{metric}"]
            dd = "" if d is None else f"{d['mean']:>+9.4f}  [{d['ci'][0]:+.4f}, {d['ci'][1]:+.4f}]"
            typer.echo(f"{c['name']:<24}{m['mean']:>8.4f}  [{m['ci'][0]:.4f}, {m['ci'][1]:.4f}]{dd:>29}"
                       f"{_fmt_p(c[f'p_{metric}']):>8}{_fmt_p(c[f'p_{metric}_holm']):>8}{_fmt_p(c[f'p_{metric}_bonferroni']):>8}")


@notebooks_app.command("build")
@_guard
def notebooks_build(only: Optional[list[str]] = typer.Option(None, "--only", help="a checkpoint number (03) or notebook stem; repeatable"),
                    small: bool = typer.Option(False, "--small", help="the tests' small parameters (into notebooks/_build/small, no index)"),
                    force: bool = typer.Option(False, "--force", help="re-run notebooks whose inputs are unchanged"),
                    html: bool = typer.Option(True, "--html/--no-html"),
                    reranker: Optional[str] = typer.Option(None, "--reranker", help="one teacher for every notebook: a reranker spec, `fold` (LoCoMo's fold teacher, the one `make run` trains) or `auto` (resolved once, so every row names the same model); default: each notebook's own"),
                    backend: Optional[str] = typer.Option(None, "--backend", help="one inference backend for every notebook (torch, onnx, onnx-int8); default: each notebook's own"),
                    jobs: int = typer.Option(1, "--jobs", help="notebooks executed at once, each kernel on its share of the cores (`make study` uses 2)")) -> None:
    """Execute notebooks/NN_*.py at full parameters into notebooks/_build/, draw their figures into
    docs/figures/checkpoints/ and rewrite notebooks/README.md (resumable)."""
    from lethe_core.inference import BACKENDS
    from lethe_core.report.notebooks import NotebookBuild, NotebookError, discover
    from lethe_core.rerankers import resolve_reranker
    from lethe_core.util.figures import static_export_problem

    discover(only)  # unknown names fail before any kernel starts
    check.at_least("--jobs", jobs, 1)
    if backend is not None and backend not in BACKENDS:
        raise check.ArgError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if not small and (problem := static_export_problem()):
        raise check.ArgError(f"the full build draws the figures as SVG, and {problem}")
    parameters = {}
    reranker = _fold_alias(reranker, "locomo")
    if reranker is not None:
        check.reranker(reranker, "--reranker")
        parameters["reranker"] = resolve_reranker(reranker).name if reranker == "auto" else reranker
    if backend is not None:
        parameters["backend"] = backend
    try:
        log = NotebookBuild(names=only, small=small, force=force, html=html, parameters=parameters, jobs=jobs).run()
    except NotebookError as exc:
        _fail(exc)
    ran = [e for e in log if not e["skipped"]]
    typer.echo(f"{len(ran)} executed, {len(log) - len(ran)} up to date; {sum(e['seconds'] for e in ran) / 60:.1f} min")


@docs_app.command("refresh")
@_guard
def docs_refresh(files: Optional[list[str]] = typer.Argument(None, help="documents to refresh (default: README.md and docs/*.md)")) -> None:
    """Rewrite every `<!-- generated: NAME -->` block from the results folder it names; a block whose source run is
    absent here is kept as it is, and said so."""
    from pathlib import Path

    from lethe_core.report.documents import refresh
    from lethe_core.util.paths import REPO_ROOT

    paths = [Path(f) for f in files] if files else [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise check.ArgError(f"FILES must be existing documents, not found: {', '.join(missing)}")
    for path in paths:
        for name, status in refresh(path):
            typer.echo(f"{path}: {name}: {status}")


@app.command("haystack")
@_guard
def haystack(sizes: str = typer.Option("25000,50000,100000", "--sizes", help="haystack turn counts between LoCoMo's 5,882 and the full haystack, comma-separated (plain LoCoMo and the full haystack are always added)"),
             messages: bool = typer.Option(False, "--messages", help="also the message-granularity haystacks (locomo-haystack-msg)"),
             protocols: str = typer.Option("paper,heldout,prequential", "--protocols", help="comma-separated RIF protocols"),
             seeds: int = typer.Option(5, "--seeds", help="burn-in seeds (>= 1)"), path: Optional[str] = PathOpt,
             reranker: str = RerankerOpt, backend: str = BackendOpt, encoder: str = EncoderOpt, limit_queries: Optional[int] = LimitOpt,
             ray: bool = typer.Option(False, "--ray", help="build the pools on Ray workers (docs/distributed.md)"),
             ray_address: Optional[str] = typer.Option(None, "--ray-address", help="an existing Ray cluster; default: a local instance"),
             workers: int = typer.Option(2, "--workers", help="Ray workers, one CPU each"),
             publish: bool = typer.Option(False, "--publish", help="write the charts as SVG to docs/figures/haystack/ and the section into RESULTS.md (needs kaleido and Chromium)"),
             as_json: bool = JsonOpt) -> None:
    """The haystack size curve: systems and RIF on LoCoMo in growing haystacks (resumable; docs/haystack_study.md)."""
    from lethe_core.experiments.haystack_study import HaystackStudyConfig, results_section
    from lethe_core.experiments.haystack_study import publish as publish_results
    from lethe_core.retrieval.pipeline import PipelineConfig

    _check_run("locomo", path, limit_queries, None, reranker, encoder, backend=backend)
    check.at_least("--workers", workers, 1)
    try:
        turns = tuple(int(x) for x in sizes.split(",") if x.strip())
    except ValueError:
        raise check.ArgError(f"--sizes must be comma-separated integers, got {sizes!r}") from None
    config = HaystackStudyConfig(sizes=turns, granularities=("turn", "message") if messages else ("turn",),
                                 protocols=tuple(p.strip() for p in protocols.split(",") if p.strip()), seeds=seeds,
                                 reranker=reranker, backend=backend, pipeline=PipelineConfig(encoder=encoder), path=path,
                                 limit_queries=limit_queries, ray=ray, workers=workers, ray_address=ray_address)
    if publish:
        from lethe_core.util.figures import static_export_problem

        if problem := static_export_problem():  # before the study, not after it
            raise check.ArgError(f"--publish draws SVG charts, and {problem}")
    summary = config.run()
    if publish:
        typer.echo(f"wrote {publish_results(summary)}", err=True)
    if as_json:
        typer.echo(json.dumps(summary, default=str))
        return
    typer.echo(results_section(summary))
    typer.echo(f"results: {summary['results_dir']}")


@app.command("dashboard")
def dashboard(port: int = typer.Option(8501, "--port", min=1, max=65535),
              address: str = typer.Option("127.0.0.1", "--address",
                                          help="interface to listen on; anything but loopback exposes the dashboard, which has no authentication"),
              headless: bool = typer.Option(True, "--headless/--open-browser")) -> None:
    """Start the Streamlit dashboard over data/results on 127.0.0.1 (prints the URL to open)."""
    import ipaddress
    import os
    import re

    from lethe_core.util.paths import REPO_ROOT

    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?", address):
            raise typer.BadParameter(f"expected an IP address or a host name, got {address!r}", param_hint="--address") from None
        ip = None
    host = f"[{address}]" if ip is not None and ip.version == 6 else address
    everywhere = " (every interface)" if ip is not None and ip.is_unspecified else ""
    typer.echo(f"lethe-lab dashboard: open http://{host}:{port}{everywhere}")
    if not (address == "localhost" or (ip is not None and ip.is_loopback)):
        typer.echo(f"warning: the dashboard has no authentication: anyone who can reach {host}:{port} can read these results "
                   "and start replays", err=True)
    cmd = [sys.executable, "-m", "streamlit", "run", str(REPO_ROOT / "dashboard" / "app.py"), "--server.port", str(port),
           "--server.address", address, "--server.headless", str(headless).lower(), "--browser.gatherUsageStats", "false"]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, cmd)  # become the server: stopping this process stops it, no orphaned child


def main(argv: Optional[list[str]] = None) -> None:
    """Run the app outside click's standalone mode, so that its parse errors are one `error:` line too."""
    from typer._click import exceptions as click_exc  # typer (pinned 0.29) vendors its own click

    try:
        code = app(args=argv, standalone_mode=False)
    except click_exc.NoArgsIsHelpError as exc:  # a bare group: show its help, as standalone click does
        exc.show()
        code = exc.exit_code
    except click_exc.ClickException as exc:
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        typer.echo(f"error: {' '.join(exc.format_message().split())}{hint}", err=True)
        code = 2 if isinstance(exc, click_exc.UsageError) else exc.exit_code
    except typer.Abort:
        typer.echo("error: aborted", err=True)
        code = 130
    raise SystemExit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
