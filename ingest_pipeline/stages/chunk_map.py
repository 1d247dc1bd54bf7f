"""The ``chunk_map/<profile>`` stage: merge the claims of a profile's chunker order per
page, first in order wins, mint chunk ids and count tokens (table ``chunks``); withdraw a
chunk map whose file no longer reads; and what a batch's chunk maps show: the chunk map
checks as findings, and a page picture with the chunk boxes drawn."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ingest_pipeline.contract import ChunkPiece, ContractError, Layout, PageOutput, validate_bbox
from ingest_pipeline.embedding.minilm import Embedder
from ingest_pipeline.embedding.token_limits import bounded_counts, relink, relinked_metas, split_to_limit
from ingest_pipeline.identity import chunk_id
from ingest_pipeline.registry import ChunkerInfo, ChunkerRegistry
from ingest_pipeline.runtime.faults import crash_point
from ingest_pipeline.runtime.memo import BoundedMemo
from ingest_pipeline.settings import Profile
from ingest_pipeline.stages.claims import claim_content, claim_metas, load_winning_claims
from ingest_pipeline.stages.common import (
    STAGE_VERSIONS,
    UNCHANGED,
    Finding,
    NoChunks,
    Outcome,
    StageError,
    UpstreamMissing,
    fingerprint_of,
    now,
)
from ingest_pipeline.stages.merge import merge_claims
from ingest_pipeline.stages.pages import load_pages
from ingest_pipeline.stages.sources import load_source, source_bytes
from ingest_pipeline.storage import tables
from ingest_pipeline.storage.store import Store, claim_pieces, meta_json, piece_row

log = logging.getLogger(__name__)


def empty_reason(store: Store, profile: str, document: str) -> str | None:
    """Why a document has zero chunks in a profile's chunk map, when that is a success."""
    meta = store.chunk_map_meta(profile, document) or {}
    return meta.get("no_chunks") if meta.get("empty") else None


def build_chunk_map(
    store: Store,
    registry: ChunkerRegistry,
    profile: Profile,
    embedder: Embedder,
    document: str,
    run_id: str,
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
        raise StageError(
            f"withdrawn from search: the file no longer reads ({exc}); its {withdrawn} chunks "
            f"stay in the lake's history"
        ) from None
    order = [registry.info(c) for c in registry.order_for(profile.chunkers)]
    metas = claim_metas(store, order, document)
    claim_fps = [claim_content(m) for m in metas]
    fingerprint = fingerprint_of(
        STAGE_VERSIONS["chunk_map"],
        profile.name,
        profile.options(),
        pages_fp,
        claim_fps,
        embedder.model_id,
        embedder.max_tokens,
    )
    previous = store.chunk_map_meta(profile.name, document)
    if previous and previous.get("fingerprint") == fingerprint and not force:
        if previous.get("no_chunks") and not previous.get("empty"):
            raise NoChunks(previous["no_chunks"])
        return Outcome(document, "unchanged", {**previous.get("summary", {}), **UNCHANGED})
    expand = Expander(profile, embedder, source["path"])
    # None for a claim stored without today's columns: then the pieces' way
    merged = merge_claim_tables(store, order, metas, document, pages, expand) or _merged_by_pieces(
        store, order, metas, document, pages, expand
    )
    written = _chunk_table(merged.table, document, source, profile.name, run_id, pages, expand)
    summary = _summary(merged, written)
    no_chunks = None if written.num_rows else _why_no_chunks(pages, summary)
    # Nothing to chunk is not an error (SPEC F06) when every page read and no chunker
    # raised: a blank file, blank pages, Markdown whose only content is skipped. Pages that
    # failed or chunkers that raised leave a broken document, and that stays a failure.
    empty = bool(no_chunks) and not summary["failed_chunkers"] and all(p.readable for p in pages)
    if empty:
        if any(p.status == "read" for p in pages):
            no_chunks += "; the chunkers kept nothing of the read pages"
        summary["no_chunks"] = no_chunks
    store.write_chunk_map(
        profile.name,
        document,
        written,
        meta={
            "fingerprint": fingerprint,
            "summary": summary,
            "order": [i.ref for i in order],
            "no_chunks": no_chunks,
            "empty": empty,
        },
    )
    crash_point("chunk_maps")
    if no_chunks and not empty:
        raise NoChunks(no_chunks)
    # the rows as chunk_rows reads them back; the image bytes leave the rows the checks read
    kept = {
        "rows": written.drop_columns(["image"]).to_pylist(),
        "pages": [
            {"document_id": document, "page": p.page, "status": p.status, "text": p.text} for p in pages
        ],
    }
    return Outcome(document, "empty" if empty else "new", summary, kept)


def _chunk_table(
    merged: pa.Table,
    document: str,
    source: dict[str, Any],
    profile: str,
    run_id: str,
    pages: Sequence[PageOutput],
    expand: Expander,
) -> pa.Table:
    """A merged document's chunk map (``tables.CHUNKS``): each chunk's index on its page,
    its id and label, its characters and its tokens as the model counts them."""
    page_list = merged.column("page").to_pylist()
    texts = merged.column("text").to_pylist()
    embeds = merged.column("embed_text").to_pylist()
    images = merged.column("image")
    pictured = pc.indices_nonzero(images.is_valid())
    image_bytes = dict(zip(pictured.to_pylist(), images.take(pictured).to_pylist()))
    counts = iter(
        expand.counts([e or t for i, (t, e) in enumerate(zip(texts, embeds)) if i not in image_bytes])
    )
    ids, indexes, labels, tokens = [], [], [], []
    index, last_page = 0, None
    for i, (page, text, chunker, cfg) in enumerate(
        zip(page_list, texts, merged.column("chunker").to_pylist(), merged.column("config_hash").to_pylist())
    ):
        if page != last_page:
            index, last_page = 0, page
        picture = image_bytes.get(i)
        ids.append(chunk_id(document, chunker, cfg, page, index, text if picture is None else picture))
        indexes.append(index)
        labels.append(f"page:{page}/chunk:{index}")
        tokens.append(next(counts) if picture is None else None)
        index += 1
    readers = {p.page: p.reader for p in pages}

    def same(value: Any) -> pa.Array:
        return pa.array([value] * merged.num_rows, pa.string())

    return pa.table(
        {
            "chunk_id": ids,
            "label": labels,
            "profile": same(profile),
            "document_id": same(document),
            "path": same(source["path"]),
            "page": merged.column("page"),
            "index": pa.array(indexes, pa.int32()),
            **{name: merged.column(name) for name in PIECE_COLUMNS},
            "chars": pa.array([len(t) if t else 0 for t in texts], pa.int32()),
            "tokens": pa.array(tokens, pa.int32()),
            "chunker": merged.column("chunker"),
            "config_hash": merged.column("config_hash"),
            "reader": pa.array([readers.get(p) for p in page_list], pa.string()),
            "source_sha256": same(source["sha256"]),
            "run_id": same(run_id),
        },
        schema=tables.CHUNKS,
    )


def _summary(merged: Merged, chunks: pa.Table) -> dict[str, Any]:
    """What a chunk map's materialization says of it: chunks per version, what the merge
    dropped, the versions that raised, the parts of split pieces, table grid problems. Only
    the rows whose stored JSON can hold a split or a table grid are read into Python."""
    by_chunker: dict[str, int] = {}
    for chunker in chunks.column("chunker").to_pylist():
        by_chunker[chunker] = by_chunker.get(chunker, 0) + 1

    def holding(column: str, text: str) -> pa.Table:
        return chunks.filter(pc.fill_null(pc.match_substring(chunks.column(column), text), False))

    split = holding("meta", "token_split").column("meta").to_pylist()
    problems = []
    tabled = holding("layout", '"table"').select(["label", "text", "layout", "meta"]).to_pylist()
    for row in tabled:
        if row["text"]:
            problem = _table_grid_problem(row["text"], row["layout"], row["meta"])
            if problem:
                problems.append({"label": row["label"], "problem": problem})
    return {
        "chunks": chunks.num_rows,
        "by_chunker": by_chunker,
        "dropped": merged.dropped,
        "failed_chunkers": merged.failed,
        "split_parts": sum(1 for m in split if "token_split" in json.loads(m)),
        "table_grid_problems": problems[:20],
    }


def _table_grid_problem(text: str, layout_json: str | None, meta_json: str | None) -> str | None:
    """What is wrong with a table chunk's text against its cell grid (None if nothing, or
    not a table), from the row's stored layout and meta: only a table's layout has a grid
    to check, the others are not parsed; a ragged table says so in its meta."""
    from ingest_pipeline.chunkers.grid import _grid_problem

    if not layout_json or '"table"' not in layout_json:
        return None
    layout = Layout.from_json(layout_json)
    if layout is None or layout.table is None:
        return None
    return _grid_problem(text, layout.table, '"ragged": true' in (meta_json or ""))


@dataclass(frozen=True)
class Merged:
    """A document's chunk map before its ids: the winning claims' rows (table ``claims``'s
    columns, each row's own chunker and config hash) in chunk order, the embedding texts
    as the profile makes them, parts of split pieces in place of their piece, blank text
    left out; what the merge dropped, and the chunker versions that raised."""

    table: pa.Table
    dropped: dict[str, int]
    failed: list[str]


PIECE_COLUMNS = tuple(
    name
    for name in tables.CLAIMS.names
    if name in tables.CHUNKS.names
    and name not in ("document_id", "page", "chunker", "config_hash", "source_sha256", "run_id")
)


def merge_claim_tables(
    store: Store,
    order: Sequence[ChunkerInfo],
    metas: Sequence[dict[str, Any]],
    document: str,
    pages: Sequence[PageOutput],
    expand: Expander,
) -> Merged | None:
    """``merge_claims`` and the profile's ``Expander`` over the stored claims as Arrow tables:
    the first version in order to claim a page wins it whole, text on failed or unreadable
    pages and on pages the document does not have is dropped, and only a piece that does
    not pass the Expander whole becomes a ``ChunkPiece`` (a claim of pdf@1 holds thousands
    of lines; decoding each into a piece and encoding it again was most of a chunk map's
    time). None for a claim written without today's columns."""
    status = {p.page: p.status for p in pages}
    known = pa.array(sorted(status), pa.int32())
    taken: set[int] = set()
    won: list[pa.Table] = []
    failed: list[str] = []
    dropped = {"failed_page_text": 0, "whitespace": 0, "unknown_page": 0}
    for info, meta in zip(order, metas, strict=True):
        if meta.get("error") is not None:
            log.warning("chunker %s raised on %s and was skipped: %s", info.ref, document, meta["error"])
            failed.append(info.ref)
            continue
        claimed = meta.get("claimed_pages")
        wins: set[int] = set()
        if claimed is not None:
            wins = {p for p in claimed if p in status and p not in taken}
            taken |= wins
            if not wins and all(p in status for p in claimed):
                continue
        claim = store.claim_table(info.asset_name, document)
        if claim is None or not claim.num_rows:
            continue
        if claim.schema.names != tables.CLAIMS.names:
            return None  # written before today's columns: the pieces' way reads it
        page = claim.column("page")
        if claimed is None:
            wins = set(pc.unique(page).to_pylist()) & set(status) - taken
            taken |= wins
        dropped["unknown_page"] += claim.num_rows - pc.sum(pc.is_in(page, value_set=known)).as_py()
        claim = claim.filter(pc.is_in(page, value_set=pa.array(sorted(wins), pa.int32())))
        if claim.num_rows:
            config_hash = meta.get("config_hash", info.config_hash)
            for name, value in (("chunker", info.ref), ("config_hash", config_hash)):
                claim = claim.set_column(
                    claim.schema.get_field_index(name), name, pa.array([value] * claim.num_rows, pa.string())
                )
            won.append(claim)
    table = pa.concat_tables(won) if won else tables.CLAIMS.empty_table()
    table = table.sort_by([("page", "ascending"), ("piece", "ascending")])
    broken = [p for p, s in status.items() if s in ("failed", "unreadable")]
    if broken:
        text_there = pc.and_(
            pc.is_in(table.column("page"), value_set=pa.array(broken, pa.int32())),
            pc.is_null(table.column("image")),
        )
        dropped["failed_page_text"] = pc.sum(text_there).as_py() or 0
        table = table.filter(pc.invert(text_there))

    is_text = pc.is_null(table.column("image")).to_pylist()
    rows = [i for i, t in enumerate(is_text) if t]
    texts = table.column("text").to_pylist()
    embeds = table.column("embed_text").to_pylist()
    metas_of = table.column("meta").to_pylist()
    named = ""
    if expand.title:
        named = named_title(
            json.loads(metas_of[i]) for i in rows if metas_of[i] and "document_title" in metas_of[i]
        )
    planned, passes = expand.plan([texts[i] for i in rows], [embeds[i] for i in rows], named)
    if expand.title:
        for i, embed in zip(rows, planned):
            embeds[i] = embed
        table = table.set_column(
            table.schema.get_field_index("embed_text"), "embed_text", pa.array(embeds, pa.string())
        )
    misfits = [i for i, ok in zip(rows, passes) if not ok]
    misfit_pieces = claim_pieces(table.take(pa.array(misfits, pa.int64()))) if misfits else []
    parts = {i: expand.fit(piece) for i, (_, piece) in zip(misfits, misfit_pieces)}

    keep: list[int] = []
    extra: list[dict[str, Any]] = []
    columns = (
        {name: table.column(name).to_pylist() for name in ("page", "chunker", "config_hash")} if parts else {}
    )
    for i, text in enumerate(texts):
        if i in parts:
            for piece in parts[i]:
                if not piece.is_image and (not piece.text or not piece.text.strip()):
                    dropped["whitespace"] += 1
                    continue
                keep.append(table.num_rows + len(extra))
                extra.append(
                    {
                        "document_id": document,
                        "piece": 0,
                        **piece_row(piece),
                        **{name: values[i] for name, values in columns.items()},
                    }
                )
        elif is_text[i] and (not text or not text.strip()):
            dropped["whitespace"] += 1
        else:
            keep.append(i)
    if extra:
        table = pa.concat_tables([table, pa.Table.from_pylist(extra, schema=tables.CLAIMS)])
    if extra or len(keep) != table.num_rows:  # parts stand where their piece stood
        table = table.take(pa.array(keep, pa.int64()))
    return Merged(_relinked(table), {k: v for k, v in dropped.items() if v}, failed)


def _relinked(table: pa.Table) -> pa.Table:
    """``relink`` over the merged rows: only Markdown chunks' metas are read."""
    column = table.column("meta")
    if not pc.any(pc.match_substring(column, "chk_")).as_py():
        return table
    metas = column.to_pylist()
    marked = [i for i, m in enumerate(metas) if m and "chk_" in m]
    renumbered = relinked_metas([json.loads(metas[i]) for i in marked])
    if not renumbered:
        return table
    for k, meta in renumbered.items():
        metas[marked[k]] = meta_json(meta)
    return table.set_column(table.schema.get_field_index("meta"), "meta", pa.array(metas, pa.string()))


def _merged_by_pieces(
    store: Store,
    order: Sequence[ChunkerInfo],
    metas: Sequence[dict[str, Any]],
    document: str,
    pages: Sequence[PageOutput],
    expand: Expander,
) -> Merged:
    """``Merged`` the way ``merge_claims`` makes it, piece by piece, then ``relink``."""
    claims = load_winning_claims(store, order, metas, document, pages)
    chunk_map = merge_claims(document, pages, claims, expand=expand)
    relinked = relink([c.piece for c in chunk_map.chunks])
    rows = [
        {
            "document_id": document,
            "page": c.page,
            "piece": c.index,
            **piece_row(p),
            "chunker": c.chunker,
            "config_hash": c.config_hash,
        }
        for c, p in zip(chunk_map.chunks, relinked)
    ]
    return Merged(
        pa.Table.from_pylist(rows, schema=tables.CLAIMS),
        chunk_map.dropped,
        [c.chunker for c in claims if c.error],
    )


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


def named_title(metas: Iterable[Mapping[str, Any]]) -> str:
    """The first title a chunker read in the document itself (``meta["document_title"]``;
    pdf@4 takes it from the first page), or ""."""
    return next((m["document_title"] for m in metas if m.get("document_title")), "")


def titled(title: str, named: str) -> str:
    """The file name's title, followed by the title the document gave itself unless the
    file name already says it: "2022 Q3 AAPL (Apple Inc.)"."""
    if not named or named.casefold() in title.casefold():
        return title
    return f"{title} ({named})"


def with_named_title(title: str, pieces: Sequence[ChunkPiece]) -> str:
    """``titled`` with the title the pieces' chunker read in the document."""
    return titled(title, named_title(p.meta for p in pieces))


def texts_ahead(profile: Profile, embedder: Embedder, path: str, pieces: Sequence[ChunkPiece]) -> list[str]:
    """The embedding texts the profile's chunk map will make of a document's pieces when
    their chunker wins every page they are on (as the version that leads a profile for the
    document's format does): the pieces through the chunk map's own ``Expander``, blank
    parts left out as the merge leaves them out."""
    kept = [p for p in pieces if not p.is_image]
    if not kept:
        return []
    return [
        p.embed_text or p.text
        for parts in Expander(profile, embedder, path)(kept)
        for p in parts
        if p.text and p.text.strip()
    ]


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
                fresh = dict(
                    zip(
                        unseen,
                        bounded_counts(self.embedder.token_offsets, unseen, self.embedder.count_tokens),
                    )
                )
                _COUNTED.keep(self.embedder.model_id, fresh)
                counted.update(fresh)
            self.known.update(counted)
        return [self.known[t] for t in texts]

    def plan(
        self, texts: Sequence[str | None], embeds: Sequence[str | None], named: str = ""
    ) -> tuple[list[str | None], list[bool]]:
        """For pieces given by their texts and embedding texts: each one's embedding text as
        the model will see it (the title in front, when the profile asks for it; ``named``
        is the title the document itself gave), and whether it passes as it is. One that
        does not pass goes through ``fit``. Counts every text it needs in one batch."""
        if self.title:
            title = titled(self.title, named)
            embeds = [f"{title}\n{e or t}" for t, e in zip(texts, embeds)]
        limit = self.embedder.max_tokens
        seen = [e or t for t, e in zip(texts, embeds)]
        apart = [_prefix_apart(t, e) for t, e in zip(texts, embeds)]
        # an embedding text that is not a prefix and the text (pdf@4 leaves numbers out):
        # split_to_limit sizes the text alone, so its count joins the same batch
        self.counts([s for s in seen if s] + [t for t, a in zip(texts, apart) if not a and t])
        known, passes = self.known, []
        for text, whole_text, whole in zip(texts, seen, apart):
            tokens = known[whole_text] if whole_text else None
            if not self.profile.split_oversized:
                passes.append(tokens is None or tokens <= limit)
            else:  # fits: what split_to_limit would answer, without tokenizing again
                passes.append(
                    tokens is not None and tokens <= limit and (whole or not text or known[text] <= limit)
                )
        return list(embeds), passes

    def fit(self, piece: ChunkPiece) -> list[ChunkPiece]:
        """A piece that did not pass (its embedding text is over the model's limit): cut
        into parts that fit, or flagged when the profile keeps it whole."""
        if not self.profile.split_oversized:
            return [replace(piece, meta={**piece.meta, "token_overflow": True})]
        return split_to_limit(piece, self.embedder.token_offsets, self.embedder.max_tokens)

    def __call__(self, pieces: Sequence[ChunkPiece]) -> list[list[ChunkPiece]]:
        embeds, passes = self.plan(
            [p.text for p in pieces], [p.embed_text for p in pieces], named_title(p.meta for p in pieces)
        )
        if self.title:
            pieces = [replace(p, embed_text=e) for p, e in zip(pieces, embeds)]
        return [[piece] if ok else self.fit(piece) for piece, ok in zip(pieces, passes)]


def _prefix_apart(text: str | None, embed: str | None) -> bool:
    """A piece's embedding text is its text, or its text after a prefix that ends in
    whitespace, so the text's tokens are the embedding text's last ones."""
    if not embed or embed == text:
        return True
    head = len(embed) - len(text or "")
    return bool(text) and head > 0 and embed.endswith(text) and embed[head - 1].isspace()


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


def chunk_map_findings(
    store: Store,
    profile: str,
    documents: Sequence[str],
    max_tokens: int,
    kept: dict[str, dict[str, Any]] | None = None,
) -> tuple[dict[str, list[dict[str, Any]]], list[Finding]]:
    """A batch's chunk rows per document (image bytes left out) and the chunk map's checks
    over them: each document's rows and pages are read once, or taken from ``kept`` (per
    document, the ``rows`` and ``pages`` the stage just wrote and read)."""
    kept = kept or {}

    def held_or_read(doc: str, key: str, read):
        held = kept.get(doc, {})
        return held[key] if key in held else read()

    rows_by_doc = {
        doc: held_or_read(doc, "rows", lambda: store.chunk_rows(profile, doc)) for doc in documents
    }
    rows = [r for doc in documents for r in rows_by_doc[doc]]
    columns = ["document_id", "page", "status", "text"]
    pages_read = [
        r
        for doc in documents
        for r in held_or_read(doc, "pages", lambda: store.page_rows(doc, columns=columns))
        if r["status"] == "read" and r["text"]
    ]
    return rows_by_doc, [*chunk_row_findings(rows, max_tokens), page_text_finding(pages_read, rows)]


def _words(text: str) -> list[str]:
    """The text's words in lower case. The text is lowered whole first when that is the
    same as lowering word by word: when every character lowers to one character (a
    character that lowers to one keeps being, or not being, a word character: checked
    over all of Unicode) and there is no capital sigma, whose lower case depends on what
    follows it. Otherwise word by word ("İ" lowers to two characters, one of them not a
    word character)."""
    lowered = text.lower()
    if text.isascii() or (len(lowered) == len(text) and "\u03a3" not in text):
        return _WORD.findall(lowered)
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
        share = sum(n for w, n in Counter(words).items() if w in have) / len(words)
        if share < COVERAGE_FLOOR:
            low.append({"document": page["document_id"], "page": page["page"], "covered": round(share, 3)})
    return Finding(
        "page_text_covered",
        not low,
        "pages_below_floor",
        low,
        {"count": len(low), "pages": len(pages), "floor": COVERAGE_FLOOR},
        warn=True,
    )


def chunk_row_findings(rows: list[dict[str, Any]], max_tokens: int) -> list[Finding]:
    """Valid boxes, unique chunk ids, no empty chunk, within the token limit (or flagged),
    table grids consistent with their text."""
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
        if (
            not (row.get("text") or "").strip()
            and row.get("content_type") != "image"
            and row.get("text") is not None
        ):
            empty.append(where)
        meta = row.get("meta") or ""
        if '"token_overflow": true' in meta:
            flagged += 1
        problem = _table_grid_problem(row.get("text") or "", row.get("layout"), meta)
        if problem:
            grids.append(
                {
                    "document": row["document_id"],
                    "page": row["page"],
                    "chunk_id": row["chunk_id"],
                    "problem": problem,
                }
            )
        if row.get("tokens") and row["tokens"] > max_tokens and '"token_overflow": true' not in meta:
            over.append({**where, "tokens": row["tokens"]})
    return [
        Finding("valid_boxes", not bad_boxes, "invalid", bad_boxes, {"count": len(bad_boxes)}),
        Finding("unique_chunk_ids", not dupes, "duplicates", dupes, {"count": len(dupes)}),
        Finding("no_empty_chunks", not empty, "empty", empty, {"count": len(empty)}),
        Finding(
            "within_token_limit",
            not over,
            "over_limit_unflagged",
            over,
            {"count": len(over), "flagged": flagged, "max_tokens": max_tokens},
        ),
        Finding("table_grid_consistent", not grids, "tables", grids, {"count": len(grids)}),
    ]


def page_picture(store: Store, passwords: Any, rows: list[dict[str, Any]]) -> str | None:
    """Markdown showing the first page with geometry among ``rows``, its chunk boxes drawn
    on the page rendered from the source bytes (None when no row has a box, or the bytes
    can no longer be read)."""
    from ingest_pipeline.readers.base import password_for
    from ingest_pipeline.stages.page_pictures import preview_markdown_image, render_page_preview

    first = next((r for r in rows if r["bbox"] is not None), None)
    if first is None:
        return None
    same_page = [
        r
        for r in rows
        if r["document_id"] == first["document_id"] and r["page"] == first["page"] and r["bbox"] is not None
    ]
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
    png = render_page_preview(
        content,
        source["media_type"],
        first["page"],
        boxes,
        labels=[str(r["index"]) for r in same_page],
        aspect=aspect,
        password=password_for(source["path"], passwords),
    )
    if png is None:
        return None
    where = f"{first['path']}, page {first['page']}"
    return f"{where}:\n\n" + preview_markdown_image(png, f"{first['path']} p{first['page']}")
