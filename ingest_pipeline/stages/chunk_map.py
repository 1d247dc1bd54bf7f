"""The ``chunk_map/<profile>`` stage: merge the claims of a profile's chunker order per
page, first in order wins, mint chunk ids and count tokens (table ``chunks``); withdraw a
chunk map whose file no longer reads; and what a batch's chunk maps show: the chunk map
checks as findings, and a page picture with the chunk boxes drawn."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ingest_pipeline.contract import ChunkPiece, ContractError, Layout, PageOutput, validate_bbox
from ingest_pipeline.embedding import Embedder
from ingest_pipeline.faults import crash_point
from ingest_pipeline.memo import BoundedMemo
from ingest_pipeline.merge import merge_claims
from ingest_pipeline.registry import ChunkerRegistry
from ingest_pipeline.settings import Profile
from ingest_pipeline.stages.claims import claim_content, claim_metas, load_winning_claims
from ingest_pipeline.stages.common import (
    STAGE_VERSIONS, UNCHANGED, Finding, NoChunks, Outcome, StageError, UpstreamMissing, fingerprint_of, now,
)
from ingest_pipeline.stages.pages import load_pages
from ingest_pipeline.stages.sources import load_source, source_bytes
from ingest_pipeline.store import Store, piece_row
from ingest_pipeline.token_limits import bounded_counts, relink, split_to_limit, table_problems

def empty_reason(store: Store, profile: str, document: str) -> str | None:
    """Why a document has zero chunks in a profile's chunk map, when that is a success."""
    meta = store.chunk_map_meta(profile, document) or {}
    return meta.get("no_chunks") if meta.get("empty") else None


def build_chunk_map(
    store: Store, registry: ChunkerRegistry, profile: Profile, embedder: Embedder, document: str, run_id: str,
    force: bool = False,
) -> Outcome:
    """Merge the claims of the profile's chunker order into the document's chunk map."""
    try:
        source, _ = load_source(store, document)
        pages, pages_fp = load_pages(store, document)
    except UpstreamMissing as exc:
        withdrawn = withdraw_chunk_map(store, profile.name, document)
        if withdrawn is None:
            raise
        raise StageError(f"withdrawn from search: the file no longer reads ({exc}); its {withdrawn} chunks "
                         f"stay in the lake's history") from None
    order = [registry.info(c) for c in registry.order_for(profile.chunkers)]
    metas = claim_metas(store, order, document)
    claim_fps = [claim_content(m) for m in metas]
    fingerprint = fingerprint_of(STAGE_VERSIONS["chunk_map"], profile.name, profile.options(), pages_fp, claim_fps,
                                 embedder.model_id, embedder.max_tokens)
    previous = store.chunk_map_meta(profile.name, document)
    if previous and previous.get("fingerprint") == fingerprint and not force:
        if previous.get("no_chunks") and not previous.get("empty"):
            raise NoChunks(previous["no_chunks"])
        return Outcome(document, "unchanged", {**previous.get("summary", {}), **UNCHANGED})
    claims = load_winning_claims(store, order, metas, document, pages)
    expand = Expander(profile, embedder, source["path"])
    chunk_map = merge_claims(document, pages, claims, expand=expand)
    relinked = relink([c.piece for c in chunk_map.chunks])
    chunk_map = replace(chunk_map, chunks=tuple(c if p is c.piece else replace(c, piece=p)
                                                for c, p in zip(chunk_map.chunks, relinked)))
    readers = {p.page: p.reader for p in pages}
    texts = [(c.piece.embed_text or c.piece.text) for c in chunk_map.chunks if not c.piece.is_image]
    token_counts = iter(expand.counts(texts))
    rows = []
    for chunk in chunk_map.chunks:
        piece = chunk.piece
        rows.append({
            "chunk_id": chunk.chunk_id, "label": chunk.label, "profile": profile.name, "document_id": document,
            "path": source["path"], "page": chunk.page, "index": chunk.index, **piece_row(piece),
            "chars": len(piece.text) if piece.text else 0,
            "tokens": None if piece.is_image else next(token_counts),
            "chunker": chunk.chunker, "config_hash": chunk.config_hash, "reader": readers.get(chunk.page),
            "source_sha256": source["sha256"], "run_id": run_id,
        })
    by_chunker: dict[str, int] = {}
    for chunk in chunk_map.chunks:
        by_chunker[chunk.chunker] = by_chunker.get(chunk.chunker, 0) + 1
    grid_problems = table_problems([c.piece for c in chunk_map.chunks])
    summary = {"chunks": len(rows), "by_chunker": by_chunker, "dropped": chunk_map.dropped,
               "failed_chunkers": [c.chunker for c in claims if c.error],
               "split_parts": sum(1 for c in chunk_map.chunks if "token_split" in c.piece.meta),
               "table_grid_problems": [{"label": chunk_map.chunks[p["index"]].label, "problem": p["problem"]}
                                       for p in grid_problems][:20]}
    no_chunks = None if rows else _why_no_chunks(pages, summary)
    # Nothing to chunk is not an error (SPEC F06) when every page read and no chunker
    # raised: a blank file, blank pages, Markdown whose only content is skipped. Pages that
    # failed or chunkers that raised leave a broken document, and that stays a failure.
    empty = bool(no_chunks) and not summary["failed_chunkers"] and all(p.readable for p in pages)
    if empty:
        if any(p.status == "read" for p in pages):
            no_chunks += "; the chunkers kept nothing of the read pages"
        summary["no_chunks"] = no_chunks
    store.write_chunk_map(profile.name, document, rows,
                          meta={"fingerprint": fingerprint, "summary": summary,
                                "order": [i.ref for i in order], "no_chunks": no_chunks, "empty": empty})
    crash_point("chunk_maps")
    if no_chunks and not empty:
        raise NoChunks(no_chunks)
    # the rows as chunk_rows reads them back (the table's columns hold these values as they are)
    for row in rows:  # written: the image bytes leave the rows the checks read
        del row["image"]
    kept = {"rows": rows,
            "pages": [{"document_id": document, "page": p.page, "status": p.status, "text": p.text} for p in pages]}
    return Outcome(document, "empty" if empty else "new", summary, kept)


def withdraw_chunk_map(store: Store, profile: str, document: str) -> int | None:
    """Move a document's served chunk map and vectors into the lake's history (out of the
    public views and of search); returns how many chunks it held, None if it had none."""
    chunks = store.chunk_map(profile, document, columns=["source_sha256"])
    if chunks is None:
        return None
    shas = sorted(set(chunks.column("source_sha256").to_pylist()) - {None}) or ["unknown"]
    version = f"{shas[0][:16]}-{now().strftime('%Y%m%dT%H%M%S%f')}"
    store.withdraw(profile, document, version, at=now())
    return chunks.num_rows


def document_title(path: str) -> str:
    """A document's title for embedding context: its file name without the extension."""
    name = path.rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return " ".join(stem.replace("_", " ").split())


def with_named_title(title: str, pieces: Sequence[ChunkPiece]) -> str:
    """The file name's title, followed by the title a chunker read in the document itself
    (``meta["document_title"]``, the first found; pdf@4 takes it from the first page)
    unless the file name already says it: "2022 Q3 AAPL (Apple Inc.)"."""
    named = next((p.meta["document_title"] for p in pieces if p.meta.get("document_title")), "")
    if not named or named.casefold() in title.casefold():
        return title
    return f"{title} ({named})"


def texts_ahead(profile: Profile, embedder: Embedder, path: str, pieces: Sequence[ChunkPiece]) -> list[str]:
    """The embedding texts the profile's chunk map will make of a document's pieces when
    their chunker wins every page they are on (as the version that leads a profile for the
    document's format does): the pieces through the chunk map's own ``Expander``, blank
    parts left out as the merge leaves them out."""
    kept = [p for p in pieces if not p.is_image]
    if not kept:
        return []
    return [p.embed_text or p.text for parts in Expander(profile, embedder, path)(kept) for p in parts
            if p.text and p.text.strip()]


class _Counted(BoundedMemo):
    """Token counts of the texts this process's chunk maps counted lately, by model: a
    batch's profiles share most of their texts (pdf@3's paragraphs are pdf@2's, and many
    are pdf@1's lines), so a profile's chunk map counts only what the ones before it did
    not. Keyed by a 16-byte digest of model and text (the texts themselves are not kept);
    about 300,000 counts, the least recently used forgotten first."""

    ENTRY = 100  # bytes a kept count holds: its digest, its slot, its number
    LIMIT = 300_000 * ENTRY

    def _cost(self, key: bytes, value: int) -> int:
        return self.ENTRY

    @staticmethod
    def _key(model: str, text: str) -> bytes:
        return hashlib.blake2b(f"{model}\0{text}".encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def counts(self, model: str, texts: Sequence[str]) -> dict[str, int]:
        found = ((t, self.get(self._key(model, t))) for t in texts)
        return {t: n for t, n in found if n is not None}

    def keep(self, model: str, counts: dict[str, int]) -> None:
        for text, n in counts.items():
            self.put(self._key(model, text), n)


_COUNTED = _Counted()


class Expander:
    """A profile's chunk pieces as the embedder will see them: the document title put in
    front of each embedding text (when the profile asks for it), and a piece over the
    model's limit split into parts that fit (or flagged, when the profile keeps it whole).

    Every embedding text is tokenized once, the whole document in one batch: a piece that
    fits passes as it is, without another call; only the few over the limit are cut, and
    ``counts`` then gives the chunk map's token counts from the same numbers."""

    def __init__(self, profile: Profile, embedder: Embedder, path: str) -> None:
        self.profile = profile
        self.embedder = embedder
        self.title = document_title(path) if profile.document_context else ""
        self.known: dict[str, int] = {}  # embedding text -> tokens, [CLS] and [SEP] included

    def counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text with [CLS] and [SEP] (long texts counted window by window)."""
        new = list(dict.fromkeys(t for t in texts if t not in self.known))
        if new:
            counted = _COUNTED.counts(self.embedder.model_id, new)
            unseen = [t for t in new if t not in counted]
            if unseen:
                fresh = dict(zip(unseen, bounded_counts(self.embedder.token_offsets, unseen, self.embedder.count_tokens)))
                _COUNTED.keep(self.embedder.model_id, fresh)
                counted.update(fresh)
            self.known.update(counted)
        return [self.known[t] for t in texts]

    def __call__(self, pieces: Sequence[ChunkPiece]) -> list[list[ChunkPiece]]:
        if self.title:
            title = with_named_title(self.title, pieces)
            pieces = [replace(p, embed_text=f"{title}\n{p.embed_text or p.text}") for p in pieces]
        limit = self.embedder.max_tokens
        texts = [p.embed_text or p.text for p in pieces]
        apart = [_prefix_apart(p) for p in pieces]
        # an embedding text that is not a prefix and the text (pdf@4 leaves numbers out):
        # split_to_limit sizes the text alone, so its count joins the same batch
        self.counts([t for t in texts if t] + [p.text for p, a in zip(pieces, apart) if not a and p.text])
        out: list[list[ChunkPiece]] = []
        for piece, text, whole in zip(pieces, texts, apart):
            tokens = self.known[text] if text else None
            if not self.profile.split_oversized:
                if tokens is not None and tokens > limit:
                    piece = replace(piece, meta={**piece.meta, "token_overflow": True})
                out.append([piece])
            elif tokens is not None and tokens <= limit and (whole or not piece.text or self.known[piece.text] <= limit):
                out.append([piece])  # fits: what split_to_limit would answer, without tokenizing again
            else:
                out.append(split_to_limit(piece, self.embedder.token_offsets, limit))
        return out


def _prefix_apart(piece: ChunkPiece) -> bool:
    """The piece's embedding text is its text, or its text after a prefix that ends in
    whitespace, so the text's tokens are the embedding text's last ones."""
    if not piece.embed_text or piece.embed_text == piece.text:
        return True
    head = len(piece.embed_text) - len(piece.text or "")
    return bool(piece.text) and head > 0 and piece.embed_text.endswith(piece.text) and piece.embed_text[head - 1].isspace()


def _why_no_chunks(pages: Sequence[PageOutput], summary: dict[str, Any]) -> str:
    """Say why a document yields no chunk, from its pages' verdicts."""
    statuses: dict[str, int] = {}
    for page in pages:
        statuses[page.status] = statuses.get(page.status, 0) + 1
    parts = [f"{n} {status}" for status, n in sorted(statuses.items())]
    reasons = sorted({p.reason for p in pages if p.reason and p.status in ("failed", "unreadable")})
    text = f"no chunks: {len(pages)} page(s), " + ", ".join(parts or ["none"])
    if reasons:
        text += " (" + "; ".join(reasons)[:200] + ")"
    if summary.get("failed_chunkers"):
        text += "; chunkers that raised: " + ", ".join(summary["failed_chunkers"])
    return text


# ---------------------------------------------------------------- what a batch's chunk maps show

COVERAGE_FLOOR = 0.95
_WORD = re.compile(r"\w+")


def chunk_map_findings(store: Store, profile: str, documents: Sequence[str], max_tokens: int,
                       kept: dict[str, dict[str, Any]] | None = None,
                       ) -> tuple[dict[str, list[dict[str, Any]]], list[Finding]]:
    """A batch's chunk rows per document (image bytes left out) and the chunk map's checks
    over them: each document's rows and pages are read once, or taken from ``kept`` (per
    document, the ``rows`` and ``pages`` the stage just wrote and read)."""
    kept = kept or {}

    def held_or_read(doc: str, key: str, read):
        held = kept.get(doc, {})
        return held[key] if key in held else read()

    rows_by_doc = {doc: held_or_read(doc, "rows", lambda: store.chunk_rows(profile, doc)) for doc in documents}
    rows = [r for doc in documents for r in rows_by_doc[doc]]
    columns = ["document_id", "page", "status", "text"]
    pages_read = [r for doc in documents
                  for r in held_or_read(doc, "pages", lambda: store.page_rows(doc, columns=columns))
                  if r["status"] == "read" and r["text"]]
    return rows_by_doc, [*chunk_row_findings(rows, max_tokens), page_text_finding(pages_read, rows)]


def _words(text: str) -> list[str]:
    """The text's words in lower case. ASCII text is lowered whole first, which changes no
    word boundary; other text word by word (lowering may change a letter into letters
    that do not all count as word characters)."""
    if text.isascii():
        return _WORD.findall(text.lower())
    return [w.lower() for w in _WORD.findall(text)]


def page_text_finding(pages: list[dict[str, Any]], rows: list[dict[str, Any]]) -> Finding:
    """Each read page's words (as its reader read them) appear in that page's chunks, at
    least COVERAGE_FLOOR of them (chunk text need not rebuild the page text exactly)."""
    texts: dict[tuple[str, int], list[str]] = {}
    for row in rows:
        if row.get("text"):
            texts.setdefault((row["document_id"], row["page"]), []).append(row["text"])
    # a page's chunk texts read as one (a space between them splits no word): one call a page
    chunk_words = {key: set(_words(" ".join(parts))) for key, parts in texts.items()}
    low = []
    for page in pages:
        words = _words(page["text"])
        if not words:
            continue
        have = chunk_words.get((page["document_id"], page["page"]), set())
        share = sum(1 for w in words if w in have) / len(words)
        if share < COVERAGE_FLOOR:
            low.append({"document": page["document_id"], "page": page["page"], "covered": round(share, 3)})
    return Finding("page_text_covered", not low, "pages_below_floor", low,
                   {"count": len(low), "pages": len(pages), "floor": COVERAGE_FLOOR}, warn=True)


def chunk_row_findings(rows: list[dict[str, Any]], max_tokens: int) -> list[Finding]:
    """Valid boxes, unique chunk ids, no empty chunk, within the token limit (or flagged),
    table grids consistent with their text."""
    from ingest_pipeline.chunkers.grid import _grid_problem

    bad_boxes, empty, over, grids = [], [], [], []
    flagged = 0
    seen, dupes = set(), []
    for row in rows:
        where = {"document": row.get("document_id"), "page": row.get("page"), "chunk_id": row["chunk_id"]}
        if row["bbox"] is not None:
            b = row["bbox"]
            try:
                validate_bbox((b["x0"], b["y0"], b["x1"], b["y1"]))
            except ContractError as exc:
                bad_boxes.append({**where, "error": str(exc)})
        if row["chunk_id"] in seen:
            dupes.append(where)
        seen.add(row["chunk_id"])
        if not (row.get("text") or "").strip() and row.get("content_type") != "image" and row.get("text") is not None:
            empty.append(where)
        meta = row.get("meta") or ""
        if '"token_overflow": true' in meta:
            flagged += 1
        raw = row.get("layout")
        # only a table's layout has a grid to check: the others are not parsed at all
        layout = Layout.from_json(raw) if raw and '"table"' in raw else None
        if layout is not None and layout.table is not None:
            problem = _grid_problem(row.get("text") or "", layout.table, '"ragged": true' in meta)
            if problem:
                grids.append({"document": row["document_id"], "page": row["page"], "chunk_id": row["chunk_id"],
                              "problem": problem})
        if row.get("tokens") and row["tokens"] > max_tokens and '"token_overflow": true' not in meta:
            over.append({**where, "tokens": row["tokens"]})
    return [
        Finding("valid_boxes", not bad_boxes, "invalid", bad_boxes, {"count": len(bad_boxes)}),
        Finding("unique_chunk_ids", not dupes, "duplicates", dupes, {"count": len(dupes)}),
        Finding("no_empty_chunks", not empty, "empty", empty, {"count": len(empty)}),
        Finding("within_token_limit", not over, "over_limit_unflagged", over,
                {"count": len(over), "flagged": flagged, "max_tokens": max_tokens}),
        Finding("table_grid_consistent", not grids, "tables", grids, {"count": len(grids)}),
    ]


def page_picture(store: Store, passwords: Any, rows: list[dict[str, Any]]) -> str | None:
    """Markdown showing the first page with geometry among ``rows``, its chunk boxes drawn
    on the page rendered from the source bytes (None when no row has a box, or the bytes
    can no longer be read)."""
    from ingest_pipeline.previews import preview_markdown_image, render_page_preview
    from ingest_pipeline.readers.base import password_for

    first = next((r for r in rows if r["bbox"] is not None), None)
    if first is None:
        return None
    same_page = [r for r in rows if r["document_id"] == first["document_id"] and r["page"] == first["page"]
                 and r["bbox"] is not None]
    try:
        source, _ = load_source(store, first["document_id"])
        content = source_bytes(source)
    except Exception:
        return None
    aspect = None
    for row in store.page_rows(first["document_id"]):
        if row["page"] == first["page"] and row["width"] and row["height"]:
            aspect = row["width"] / row["height"]
    boxes = [(r["bbox"]["x0"], r["bbox"]["y0"], r["bbox"]["x1"], r["bbox"]["y1"]) for r in same_page]
    png = render_page_preview(content, source["media_type"], first["page"], boxes,
                              labels=[str(r["index"]) for r in same_page], aspect=aspect,
                              password=password_for(source["path"], passwords))
    if png is None:
        return None
    where = f"{first['path']}, page {first['page']}"
    return f"{where}:\n\n" + preview_markdown_image(png, f"{first['path']} p{first['page']}")
