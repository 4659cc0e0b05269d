"""BEIR-style folders (NFCorpus): corpus.jsonl, queries as JSONL or TSV, qrels as BEIR TSV or TREC."""

from __future__ import annotations

import math
from pathlib import Path

from lethe_core.datasets.errors import DatasetError, iter_text_lines, parse_json, require
from lethe_core.datasets.model import Corpus, Dataset, Query, Turn

QUERY_FILES = ("queries.jsonl", "queries.test.tsv", "queries.tsv")
QRELS_FILES = ("qrels/test.tsv", "qrels.test.trec", "qrels.test.tsv", "qrels.trec", "qrels.tsv")


def _first(folder: Path, names: tuple[str, ...]) -> Path | None:
    return next((folder / n for n in names if (folder / n).exists()), None)


def _read_jsonl(path: Path):
    for lineno, line in iter_text_lines(path):
        if line.strip():
            yield lineno, parse_json(line, path, record=f"line {lineno}")


def load_corpus(path: Path) -> Corpus:
    turns = []
    seen = set()
    for lineno, rec in _read_jsonl(path):
        r = f"line {lineno}"
        doc_id = require(rec, "_id", str, path, r)
        title = require(rec, "title", str, path, r, optional=True) or ""
        text = require(rec, "text", str, path, r)
        if doc_id in seen:
            raise DatasetError(path, f"duplicate _id {doc_id!r}", record=r, field="_id")
        seen.add(doc_id)
        turns.append(Turn(id=doc_id, text=f"{title} {text}".strip(), session_id=doc_id, conversation_id=doc_id))
    if not turns:
        raise DatasetError(path, "the corpus is empty (no documents)")
    return Corpus(turns)


def load_queries(path: Path) -> dict[str, str]:
    """Query id -> text from JSONL (`_id`, `text`) or TSV (`id<TAB>text`); a repeated id is an error, not an overwrite."""
    rows: list[tuple[str, str, str]] = []  # (record, id, text)
    if path.suffix == ".jsonl":
        for lineno, rec in _read_jsonl(path):
            r = f"line {lineno}"
            rows.append((r, require(rec, "_id", str, path, r), require(rec, "text", str, path, r)))
    else:
        for lineno, line in iter_text_lines(path):
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) < 2:
                raise DatasetError(path, "expected 'query-id<TAB>text'", record=f"line {lineno}", field="text")
            rows.append((f"line {lineno}", parts[0], parts[1]))
    out: dict[str, str] = {}
    for r, qid, text in rows:
        if qid in out:
            raise DatasetError(path, f"duplicate query id {qid!r}", record=r, field="_id")
        out[qid] = text
    if not out:
        raise DatasetError(path, "no queries (the file is empty)")
    return out


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """BEIR TSV (`query-id corpus-id score`, header) or TREC (`qid 0 docid rel`)."""
    trec = path.suffix == ".trec"
    qrels: dict[str, dict[str, int]] = {}
    for lineno, line in iter_text_lines(path):
        parts = line.split()
        if not parts or (lineno == 1 and not trec and parts[0] == "query-id"):
            continue
        if len(parts) != (4 if trec else 3):
            fmt = "qid 0 docid rel" if trec else "query-id corpus-id score"
            raise DatasetError(path, f"expected {len(fmt.split())} columns '{fmt}', got {len(parts)}", record=f"line {lineno}")
        qid, doc, rel = (parts[0], parts[2], parts[3]) if trec else parts
        try:
            grade = float(rel)
        except ValueError:
            raise DatasetError(path, f"relevance must be a number, got {rel!r}", record=f"line {lineno}", field="rel") from None
        if not (math.isfinite(grade) and grade.is_integer()):
            raise DatasetError(path, f"relevance must be a whole-number grade, got {rel!r}", record=f"line {lineno}", field="rel")
        if grade > 0:
            qrels.setdefault(qid, {})[doc] = int(grade)
    return qrels


def load_beir(folder: str | Path, name: str = "beir") -> Dataset:
    folder = Path(folder)
    if folder.is_file():
        raise DatasetError(folder, "is a file; expected a BEIR folder (corpus.jsonl, queries.jsonl or .tsv, qrels/test.tsv or .trec)")
    if not folder.is_dir():
        raise DatasetError(folder, "BEIR folder not found")
    qfile = _first(folder, QUERY_FILES)
    rfile = _first(folder, QRELS_FILES)
    if qfile is None:
        raise DatasetError(folder, f"no queries file (looked for {', '.join(QUERY_FILES)})")
    if rfile is None:
        raise DatasetError(folder, f"no qrels file (looked for {', '.join(QRELS_FILES)})")
    cfile = folder / "corpus.jsonl"
    corpus = load_corpus(cfile) if cfile.exists() else None
    texts = load_queries(qfile)
    qrels = load_qrels(rfile)
    issues = []
    queries = []
    for qid, text in texts.items():
        if qid not in qrels:
            continue
        rel = qrels[qid]
        if corpus is not None:
            missing = [d for d in rel if d not in corpus.index]
            if missing:
                issues.append({"kind": "unknown_qrel_docs", "query": qid, "docs": missing})
                rel = {d: g for d, g in rel.items() if d in corpus.index}
        if rel:
            queries.append(Query(id=qid, text=text, qrels=rel, qtype="test", conversation_id=None))
        else:
            issues.append({"kind": "dropped_query", "query": qid, "reason": "every qrel names an unknown document"})
    for qid in sorted(qrels.keys() - texts.keys()):
        issues.append({"kind": "qrels_without_query", "query": qid})
    if not queries:
        raise DatasetError(rfile, f"no query in {qfile.name} has a positive qrel here"
                           + (" that names a document in corpus.jsonl" if corpus is not None else ""))
    return Dataset(
        name=name,
        source=folder,
        corpus=corpus,
        queries=queries,
        issues=issues,
        corpus_hint=f"Put the BEIR corpus file at {cfile} (one JSON object per line with _id, title, text).",
        order={qid: i for i, qid in enumerate(texts)},
    )
