"""Retrieval quality per profile: question sets, recall@k and MRR@10, and two baselines
computed with the same model in the same run (one chunk per page; LangChain's
RecursiveCharacterTextSplitter at 1000 characters per page).

A question's answer is located by document (Docugami: a hit is any chunk of a named
document) or by page (FinanceBench: a hit is a chunk of an evidence document on an
evidence page). Profiles that are not indexed are embedded for the evaluation through
the embedding cache and searched, like the served one, in a LanceDB table of their own
in a temporary folder."""

from __future__ import annotations

import csv
import fnmatch
import json
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ingest_pipeline.retrieval.intervals import KS, bootstrap_intervals
from ingest_pipeline.stages import EmbeddingCache
from ingest_pipeline.storage import queries
from ingest_pipeline.storage.catalog import query

if TYPE_CHECKING:
    from ingest_pipeline.parts import Parts

QA_ENV = "INGEST_QA"
# Shared question sets by name: (folder under a qa root, loader)
NAMED_SETS = {
    "docugami": "docugami-sec10q",
    "financebench": "financebench-dev",
    "financebench-dev": "financebench-dev",
}


@dataclass(frozen=True)
class Question:
    text: str
    sources: tuple[str, ...]  # globs over file names; a hit is a chunk of a matching document
    kind: str
    chunk_type: str
    # (file name, 1-based page) of each evidence page; empty: any page of a source counts
    pages: tuple[tuple[str, int], ...] = ()

    def relevant(self, path: str, page: int | None = None) -> bool:
        name = path.rsplit("/", 1)[-1]
        if self.pages:
            return any(name == n and page == p for n, p in self.pages)
        return self.of_document(path)

    def of_document(self, path: str) -> bool:
        """Whether ``path`` is one of the documents the answer is in (whatever the page)."""
        name = path.rsplit("/", 1)[-1]
        if self.pages:
            return any(name == n for n, _ in self.pages)
        return any(fnmatch.fnmatch(name, g) or fnmatch.fnmatch(path, g) for g in self.sources)


@dataclass(frozen=True)
class QuestionSet:
    name: str
    questions: tuple[Question, ...]
    documents: str  # the folder holding the set's documents
    more_documents: tuple[str, ...] = ()  # further folders, when sets are asked together

    @property
    def folders(self) -> list[str]:
        return [self.documents, *self.more_documents]


def together(sets: Sequence[QuestionSet]) -> QuestionSet:
    """Several question sets asked as one: their questions in order, their documents' folders."""
    if len(sets) == 1:
        return sets[0]
    return QuestionSet(
        "+".join(s.name for s in sets),
        tuple(q for s in sets for q in s.questions),
        sets[0].documents,
        tuple(f for s in sets[1:] for f in s.folders),
    )


def load_questions(path: str, subset: str | None = None) -> tuple[Question, ...]:
    """Questions from a CSV with the columns Question, Source Docs, Question Type and
    Source Chunk Type (the Docugami layout); ``subset`` lists 0-based row indices to keep."""
    with open(path, encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    if subset:
        keep = [int(x) for x in Path(subset).read_text().split()]
        rows = [rows[i] for i in keep]
    return tuple(
        Question(
            text=row["Question"].strip(),
            sources=tuple(g.strip() for g in re.split(r"[;,]", row["Source Docs"]) if g.strip()),
            kind=row.get("Question Type", "").strip() or "unknown",
            chunk_type=row.get("Source Chunk Type", "").strip() or "unknown",
        )
        for row in rows
    )


def load_page_questions(folder: str) -> tuple[Question, ...]:
    """Questions from a FinanceBench-style ``questions.jsonl``: each names its evidence
    documents and their zero-based ``evidence_page_num`` (kept here 1-based)."""
    out = []
    with open(os.path.join(folder, "questions.jsonl"), encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            row = json.loads(line)
            evidence = row.get("evidence") or []
            pages = tuple(
                sorted(
                    {
                        (f"{e.get('doc_name') or row['doc_name']}.pdf", int(e["evidence_page_num"]) + 1)
                        for e in evidence
                        if e.get("evidence_page_num") is not None
                    }
                )
            )
            out.append(
                Question(
                    text=row["question"].strip(),
                    sources=tuple(sorted({n for n, _ in pages} or {f"{row['doc_name']}.pdf"})),
                    kind=row.get("question_type") or "unknown",
                    chunk_type=row.get("question_reasoning") or "unknown",
                    pages=pages,
                )
            )
    return tuple(out)


def qa_roots(data: str) -> list[Path]:
    """Where named question sets are looked up: ``$INGEST_QA``, ``<storage root>/qa``, then a
    ``shared/qa`` folder beside any parent of the storage root or the working directory."""
    roots = [Path(os.environ[QA_ENV])] if os.environ.get(QA_ENV) else []
    roots.append(Path(data) / "qa")
    for start in (Path(data).resolve(), Path.cwd().resolve()):
        roots += [parent / "shared" / "qa" for parent in (start, *start.parents)]
    return roots


def _named_folder(name: str, data: str) -> Path:
    folder = NAMED_SETS[name]
    for root in qa_roots(data):
        if (root / folder).is_dir():
            return (root / folder).resolve()
    raise FileNotFoundError(
        f"question set {name!r}: no folder {folder}/ under ${QA_ENV}, {data}/qa "
        f"or a shared/qa beside the storage root"
    )


def question_set(name: str, data: str) -> QuestionSet:
    """``docugami`` (SEC 10-Qs, located by document), ``financebench`` (10-Ks and 10-Qs,
    located by page), ``samples`` (the bundled sample documents' questions, shipped with
    the package), a folder holding ``questions.jsonl`` and ``pdfs/``, or a CSV whose
    documents sit beside it in ``docs/``."""
    if name == "docugami":
        folder = _named_folder(name, data)
        return QuestionSet(
            "docugami",
            load_questions(str(folder / "qna_data.csv"), str(folder / "subset_row_indices.txt")),
            str(folder / "docs"),
        )
    if name in NAMED_SETS:
        folder = _named_folder(name, data)
        return QuestionSet(folder.name, load_page_questions(str(folder)), str(folder / "pdfs"))
    if name == "samples":
        from importlib.resources import as_file, files

        with as_file(files("ingest_pipeline") / "questions" / "samples.csv") as path:
            questions = load_questions(str(path))
        return QuestionSet("samples", questions, os.path.join(data, "sources"))
    path = Path(name)
    if path.is_dir() and (path / "questions.jsonl").exists():
        return QuestionSet(path.name, load_page_questions(str(path)), str(path / "pdfs"))
    return QuestionSet(path.stem, load_questions(str(path)), str(path.parent / "docs"))


Ranked = Sequence[Sequence[tuple[str, int]]]


def score(questions: Sequence[Question], ranked: Ranked) -> dict[str, Any]:
    """recall@k (a relevant chunk among the top k: of a named document, or on an evidence
    page when the set locates answers by page), MRR@10, and hit@5 by question kind."""
    n = len(questions)
    firsts = []
    for question, hits in zip(questions, ranked):
        first = next((i for i, (p, page) in enumerate(hits[:10]) if question.relevant(p, page)), None)
        firsts.append(first)
    metrics: dict[str, Any] = {"questions": n}
    for k in KS:
        metrics[f"recall@{k}"] = round(sum(1 for f in firsts if f is not None and f < k) / n, 4) if n else 0.0
    metrics["mrr@10"] = round(sum(1 / (f + 1) for f in firsts if f is not None) / n, 4) if n else 0.0
    metrics["intervals"] = bootstrap_intervals(firsts)
    metrics["first_hits"] = firsts
    # Document level: the answer's document among the top k, whatever the page (tells a
    # wrong document from a wrong page when the page-level figures miss).
    documents = [
        next((i for i, (p, _) in enumerate(hits[:10]) if question.of_document(p)), None)
        for question, hits in zip(questions, ranked)
    ]
    for k in KS:
        metrics[f"document_recall@{k}"] = (
            round(sum(1 for f in documents if f is not None and f < k) / n, 4) if n else 0.0
        )
    metrics["document_intervals"] = {
        key: value for key, value in bootstrap_intervals(documents).items() if key.startswith("recall")
    }
    groups: dict[str, list[int | None]] = {}
    for question, first in zip(questions, firsts):
        groups.setdefault(f"type:{question.kind}", []).append(first)
        groups.setdefault(f"chunk:{question.chunk_type}", []).append(first)
    metrics["by_kind"] = {
        key: {
            "questions": len(v),
            "hit@5": round(sum(1 for f in v if f is not None and f < 5) / len(v), 4),
            "mrr@10": round(sum(1 / (f + 1) for f in v if f is not None) / len(v), 4),
        }
        for key, v in sorted(groups.items())
    }
    return metrics


def _with_interval(row: dict[str, Any], measure: str) -> str:
    low, high = (row.get("intervals") or {}).get(measure, (float("nan"), float("nan")))
    return f"{row[measure]:.3f} [{low:.3f},{high:.3f}]"


class NothingToEvaluate(Exception):
    """No document of the question set is ingested: recall over no chunks would read as a
    score of 0, not as the missing ingest it is."""


def set_documents(parts: Parts, qs: QuestionSet, crowd: bool = False) -> dict[str, str]:
    """document_id -> path of the ingested documents that belong to the question set (with
    ``crowd``, of every document in the storage root: the set's answers among all the rest)."""
    from ingest_pipeline.documents import collect

    rows = query(parts.lake, queries.SOURCE_PATHS).to_pylist()
    if crowd:
        return {r["document_id"]: r["path"] for r in rows}
    ids = {e.document_id for e in collect(parts.settings, qs.folders)}
    return {r["document_id"]: r["path"] for r in rows if r["document_id"] in ids}


def _embed_cached(parts: Parts, texts: Sequence[str], embedder=None) -> np.ndarray:
    embedder = embedder or parts.embedder.served()
    return EmbeddingCache(parts.store, embedder.model_id).vectors(embedder, texts, run="eval")


def eval_index(parts: Parts, profile: str, docs: dict[str, str], folder: str):
    """A LanceDB table in ``folder`` holding an unindexed profile's chunks of the set's
    documents, embedded through the cache, with the same full-text index as a served one."""
    import pyarrow as pa

    from ingest_pipeline.storage.vector_index import VectorIndex, index_schema, search_text

    embedder = parts.embedder.for_profile(profile)
    table = query(parts.lake, queries.PROFILE_CHUNKS_OF_DOCUMENTS, [profile, sorted(docs)])
    rows = table.to_pylist()
    vectors = _embed_cached(parts, [r["embed_text"] or r["text"] for r in rows], embedder)
    index = VectorIndex(folder, vectors.shape[1] if len(vectors) else embedder.dim)
    for row, vector in zip(rows, vectors):
        row["modality"] = "text"
        row["vector"] = vector.tolist()
        row["search_text"] = search_text(row)
    if rows:
        data = pa.Table.from_pylist(rows, schema=index_schema(index.dim))
        with index.writing():
            index.open(profile, create=True).add(data)
        index.refresh_text_index(profile)
    return index


def profile_ranking(
    parts: Parts,
    profile: str,
    qs: QuestionSet,
    docs: dict[str, str],
    question_vectors: np.ndarray,
    mode: str = "hybrid",
    index=None,
    method: str = "served",
) -> list[list[tuple[str, int]]]:
    """Each question's ranked (path, page) through served search: ``served`` as a user gets
    it (the documents a question names first, one result per page), ``passages`` one result
    per passage with no document pass (the method before documents had records)."""
    from ingest_pipeline.retrieval.search import Request, Searcher

    searcher = Searcher(parts, index)
    ranked = []
    for question, vector in zip(qs.questions, question_vectors):
        request = Request(
            question.text,
            profile,
            k=10,
            mode=mode,
            group="page" if method == "served" else "none",
            documents=sorted(docs) if docs else None,
            named_first=method == "served",
        )
        hits = searcher.search(request, vector.tolist()).hits
        ranked.append([(h["path"], h["page"]) for h in hits])
    return ranked


def _brute_force(units: list[tuple[str, str, int]], parts: Parts, question_vectors: np.ndarray):
    vectors = _embed_cached(parts, [t for t, _, _ in units])
    where = [(p, page) for _, p, page in units]
    scores = question_vectors @ vectors.T if len(vectors) else np.zeros((len(question_vectors), 0))
    ranked = []
    for row in scores:
        order = np.argsort(-row, kind="stable")[:10]
        ranked.append([where[i] for i in order])
    tokens = parts.embedder.served().count_tokens([t for t, _, _ in units]) if units else []
    return ranked, len(units), (float(np.mean(tokens)) if tokens else 0.0)


def baseline_units(parts: Parts, docs: dict[str, str]) -> dict[str, list[tuple[str, str, int]] | None]:
    """The baselines' chunks (text, path, page): whole pages, and 1000-character recursive
    splits per page (None without the splitter, which comes with the dev extra)."""
    pages = (
        query(parts.lake, queries.READ_PAGE_TEXTS_OF_DOCUMENTS, [sorted(docs)]).to_pylist() if docs else []
    )
    units = {
        "baseline:page": [(p["text"], docs[p["document_id"]], p["page"]) for p in pages if p["text"].strip()]
    }
    try:
        from langchain_text_splitters import RecursiveCharacterTextSplitter
    except ImportError:  # the baseline needs the dev extra; say so instead of failing
        units["baseline:recursive_1000"] = None
        return units
    splitter = RecursiveCharacterTextSplitter(chunk_size=1000)
    units["baseline:recursive_1000"] = [
        (piece, docs[p["document_id"]], p["page"])
        for p in pages
        for piece in splitter.split_text(p["text"])
        if piece.strip()
    ]
    return units


def profile_stats(parts: Parts, profile: str, docs: dict[str, str]) -> tuple[int, float]:
    row = query(parts.lake, queries.PROFILE_CHUNK_COUNT_AND_MEAN_TOKENS, [profile, sorted(docs)]).to_pylist()[
        0
    ]
    return row["n"], float(row["t"] or 0.0)


def evaluate(
    parts: Parts,
    qs: QuestionSet,
    profiles: Sequence[str],
    baselines: bool = True,
    mode: str = "hybrid",
    progress: Callable[[str], None] | None = None,
    methods: Sequence[str] = ("served",),
    crowd: bool = False,
) -> list[dict[str, Any]]:
    """One row of metrics per profile (served search mode) and per baseline. A profile
    that is not indexed is embedded (through the cache) into a temporary LanceDB table
    and searched the same way; its row says ``indexed: false``."""
    docs = set_documents(parts, qs, crowd)
    if not docs:
        raise NothingToEvaluate(
            f"none of the documents of question set {qs.name!r} ({', '.join(qs.folders)}) is in the "
            f"lake of {parts.settings.data}: ingest them first (eval does, without --skip-ingest)"
        )
    from ingest_pipeline.retrieval.query_text import searched_text

    # the questions' vectors, once per embedder: as served search reads them for the
    # profiles, as written for the baselines (a plain pipeline embeds what it is asked)
    texts = {True: [searched_text(q.text) for q in qs.questions], False: [q.text for q in qs.questions]}
    by_model: dict[tuple[str, bool], np.ndarray] = {}

    def vectors_of(embedder, searched: bool = True) -> np.ndarray:
        key = (embedder.model_id, searched)
        if key not in by_model:
            by_model[key] = embedder.embed_queries(texts[searched])
        return by_model[key]

    rows = []
    with tempfile.TemporaryDirectory(prefix="ingest-eval-") as scratch:
        for profile in profiles:
            indexed = parts.settings.is_indexed(profile)
            if progress:
                progress(
                    f"profile {profile}"
                    + ("" if indexed else " (not indexed: embedding it for the evaluation)")
                )
            embedder = parts.embedder.for_profile(profile)
            index = None if indexed else eval_index(parts, profile, docs, scratch)
            chunks, tokens = profile_stats(parts, profile, docs)
            for method in methods:
                ranked = profile_ranking(
                    parts, profile, qs, docs, vectors_of(embedder), mode=mode, index=index, method=method
                )
                rows.append(
                    {
                        "name": profile if method == "served" else f"{profile} ({method})",
                        "kind": "profile",
                        "method": method,
                        "embedder": embedder.ref,
                        "model": embedder.model_id,
                        "mode": mode,
                        "indexed": indexed,
                        "chunks": chunks,
                        "mean_tokens": round(tokens, 1),
                        **score(qs.questions, ranked),
                    }
                )
    if baselines:
        rows += _baseline_rows(parts, qs, docs, vectors_of(parts.embedder.served(), searched=False), progress)
    return rows


def _baseline_rows(
    parts: Parts, qs: QuestionSet, docs: dict[str, str], vectors: np.ndarray, progress
) -> list[dict[str, Any]]:
    """The baselines' rows: each unit embedded by the served embedder and searched by vector
    with the questions as written (``vectors``)."""
    rows = []
    served = parts.embedder.served()
    for name, units in baseline_units(parts, docs).items():
        if progress:
            progress(name)
        if units is None:
            rows.append({"name": name, "kind": "baseline", "unavailable": "install the dev extra"})
            continue
        ranked, count, tokens = _brute_force(units, parts, vectors)
        rows.append(
            {
                "name": name,
                "kind": "baseline",
                "embedder": served.ref,
                "model": served.model_id,
                "mode": "vector",
                "indexed": False,
                "chunks": count,
                "mean_tokens": round(tokens, 1),
                **score(qs.questions, ranked),
            }
        )
    return rows


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    head = (
        f"{'':28} {'embedder':10} {'mode':7} {'chunks':>7} {'tokens':>7} {'R@1':>6} "
        f"{'R@5 [95% interval]':>21} {'R@10':>6} {'MRR@10 [95% interval]':>22} {'docR@5':>6} "
        f"{'table':>6} {'text':>6}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        if "unavailable" in r:
            lines.append(f"{r['name']:28} unavailable: {r['unavailable']}")
            continue
        kinds = r["by_kind"]
        table, text = (_figure(kinds.get(f"chunk:{kind}", {}).get("mrr@10")) for kind in ("Table", "Text"))
        name = r["name"] + ("" if r.get("indexed", True) or r["kind"] != "profile" else " *")
        lines.append(
            f"{name:28} {r.get('embedder', ''):10} {r['mode']:7} {r['chunks']:>7} {r['mean_tokens']:>7} "
            f"{r['recall@1']:>6.3f} {_with_interval(r, 'recall@5'):>21} {r['recall@10']:>6.3f} "
            f"{_with_interval(r, 'mrr@10'):>22} {r.get('document_recall@5', float('nan')):>6.3f} "
            f"{table:>6} {text:>6}"
        )
    lines.append("docR@5: the answer's document among the top 5, whatever the page")
    lines.append(
        "table/text: MRR@10 of questions whose answer sits in a table / in text (-: the set says not)"
    )
    lines.append("[95% interval]: bootstrap over the questions; rows whose intervals overlap may not differ")
    if any(r["kind"] == "profile" and not r.get("indexed", True) for r in rows):
        lines.append(
            "* not indexed: embedded for this evaluation through the embedding cache, into a "
            "temporary LanceDB table"
        )
    return "\n".join(lines)
