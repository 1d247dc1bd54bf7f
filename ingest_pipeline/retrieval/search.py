"""Served search: filters, the documents a query names, results grouped for citing, and the
text to hand a model with the provenance of every part.

One path for every caller (the command line, ``serve`` and ``eval``), so what is measured
is what is served. A query runs in two passes when it names documents (their organisation,
period or kind, read from their records): the named documents' passages first, ranked again
by the section the query names and by the pages several passages support
(``retrieval.headings``), then every passage, the first pass's hits ranked above the second's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ingest_pipeline.records.matching import DocumentPrior
from ingest_pipeline.retrieval.filters import DOCUMENT_FIELDS, parse, to_lance
from ingest_pipeline.retrieval.headings import NAMED_CANDIDATES, ranked_by_headings
from ingest_pipeline.retrieval.query_text import searched_text

GROUPS = ("page", "document", "none")
MAX_PASSAGES = 5  # passages shown under one page or document
CONTEXTS = ("page", "section", "neighbours")
HIT_KEYS = (
    "chunk_id",
    "document_id",
    "path",
    "page",
    "index",
    "bbox",
    "bbox_reason",
    "role",
    "label",
    "text",
    "header_path",
    "score",
    "chunker",
    "config_hash",
    "reader",
    "source_sha256",
    "run_id",
)


@dataclass
class Request:
    query: str
    profile: str | None = None
    k: int = 5
    mode: str = "hybrid"
    where: str | Mapping[str, Any] | None = None
    group: str = "page"
    context: str | None = None
    documents: Sequence[str] | None = None  # only these documents (eval's question sets)
    named_first: bool = True  # the documents the query names, ranked first


@dataclass
class Result:
    profile: str
    hits: list[dict[str, Any]]  # one per group (page, document) or per passage
    named: list[str] = field(default_factory=list)  # the documents the query was found to name


class Searcher:
    """Search over one storage root's parts; the document records are read once per
    searcher (``serve`` keeps one; ``refresh`` reads them again)."""

    def __init__(self, parts, index=None) -> None:
        self.parts = parts
        self.index = index or parts.index  # eval passes a temporary one for an unindexed profile
        self._records: list[dict[str, Any]] | None = None
        self._prior: DocumentPrior | None = None

    def refresh(self) -> None:
        self._records, self._prior = None, None

    @property
    def records(self) -> list[dict[str, Any]]:
        if self._records is None:
            self._records = self.parts.store.record_rows()
        return self._records

    @property
    def prior(self) -> DocumentPrior:
        if self._prior is None:
            self._prior = DocumentPrior(self.records)
        return self._prior

    def record(self, document: str) -> dict[str, Any] | None:
        return self.prior.records.get(document)

    def search(self, request: Request, vector: Sequence[float] | None = None) -> Result:
        """Hits for ``request``; ``vector`` the query's embedding when the caller has it."""
        if request.group not in GROUPS:
            raise ValueError(f"group must be one of {GROUPS}")
        if request.context is not None and request.context not in CONTEXTS:
            raise ValueError(f"context must be one of {CONTEXTS}")
        parts = self.parts
        text = searched_text(request.query)  # without sentences on the answer's form
        profile = request.profile or parts.settings.default_profile
        embedder = parts.embedder.for_profile(profile)
        if request.mode != "text" and self.index is parts.index:
            parts.index.check_model(profile, embedder.model_id)
            if vector is None:
                vector = embedder.embed_queries([text])[0].tolist()
        where = to_lance(parse(request.where), self.records) if request.where else None
        within = list(request.documents) if request.documents is not None else None
        wide = max(40, 8 * request.k) if request.group != "none" else max(request.k, 10)
        named = self._named(text, within) if request.named_first else []

        def run(documents: Iterable[str] | None, k: int) -> list[dict[str, Any]]:
            return self.index.search(
                profile, text, vector, k=k, mode=request.mode, documents=documents, where=where
            )

        hits = run(named, max(wide, NAMED_CANDIDATES)) if named else []
        hits = ranked_by_headings(hits, text, pages=request.group == "page") if hits else []
        seen = {h["chunk_id"] for h in hits}
        hits += [h for h in run(within, wide) if h["chunk_id"] not in seen]
        passages = [{key: h.get(key) for key in HIT_KEYS} for h in hits]
        grouped = group_hits(passages, request.group)[: request.k]
        if request.context:
            for item in grouped:
                item["context"] = context_of(parts, profile, item, request.context)
        for item in grouped:
            item["document"] = _card(self.record(item["document_id"]))
        return Result(profile, grouped, named)

    def _named(self, query: str, within: list[str] | None) -> list[str]:
        named = list(self.prior.preferred(query))
        if within is not None:
            allowed = set(within)
            named = [d for d in named if d in allowed]
        return named


def _card(record: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {k: record.get(k) for k in (*DOCUMENT_FIELDS, "pages")}


def group_hits(passages: list[dict[str, Any]], group: str) -> list[dict[str, Any]]:
    """Passages in rank order, gathered into one result per page or per document: the result
    carries its best passage's fields and rank, and every passage under ``passages``;
    ``none`` keeps one result per passage."""
    if group == "none":
        return [dict(p, passages=[p]) for p in passages]
    results: dict[tuple, dict[str, Any]] = {}
    for passage in passages:
        key = (passage["document_id"], passage["page"]) if group == "page" else (passage["document_id"],)
        if key not in results:  # the best passage's fields, so a result reads as its best hit
            results[key] = dict(passage, passages=[])
        if len(results[key]["passages"]) < MAX_PASSAGES:
            results[key]["passages"].append(passage)
    return list(results.values())


def context_of(parts, profile: str, item: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    """The text to hand a model for a result, in parts, each with its provenance: the whole
    page (``page``), the passages under the best passage's heading path (``section``), or the
    best passage with the chunks before and after it (``neighbours``)."""
    document, best = item["document_id"], item["passages"][0]
    if kind == "page":
        pages = {best["page"]} if best.get("page") else set()
        rows = parts.store.page_rows(document, columns=["page", "text", "reader"])
        return [
            {"text": r["text"], "document_id": document, "page": r["page"], "source": f"page {r['page']}"}
            for r in rows
            if r["page"] in pages and r["text"]
        ]
    chunks = sorted(parts.store.chunk_rows(profile, document), key=lambda r: r["index"])
    if kind == "section":
        heading = list(best.get("header_path") or [])
        chosen = [r for r in chunks if list(r.get("header_path") or []) == heading] if heading else []
        chosen = chosen or [r for r in chunks if r["chunk_id"] == best["chunk_id"]]
    else:
        at = next((i for i, r in enumerate(chunks) if r["chunk_id"] == best["chunk_id"]), None)
        chosen = chunks[max(0, at - 1) : at + 2] if at is not None else []
    return [
        {
            "text": r["text"],
            "document_id": document,
            "chunk_id": r["chunk_id"],
            "page": r["page"],
            "bbox": r.get("bbox"),
            "header_path": r.get("header_path"),
            "source": "chunk",
        }
        for r in chosen
        if r.get("text")
    ]
