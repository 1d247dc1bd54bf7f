"""A profile's merge over the stored claims: the first version in order to claim a page wins it
whole (the rule of stages.merge), read from the claim tables as Arrow, with the pieces'
embedding texts made by the profile's Expander and parts of pieces over the model's limit in
place of their piece."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest_pipeline.contract import PageOutput
from ingest_pipeline.embedding.token_limits import relink, relinked_metas
from ingest_pipeline.registry import ChunkerInfo
from ingest_pipeline.runtime.budget import check as budget_check
from ingest_pipeline.stages.claims import load_winning_claims
from ingest_pipeline.stages.embedding_text import Expander, named_title
from ingest_pipeline.stages.merge import merge_claims
from ingest_pipeline.storage import tables
from ingest_pipeline.storage.store import Store, claim_pieces, meta_json, piece_row

log = logging.getLogger(__name__)


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
    dropped = {"failed_page_text": 0, "whitespace": 0, "unknown_page": 0}
    found = _winning_claims(store, order, metas, document, status, dropped)
    if found is None:
        return None
    table, failed = found
    broken = [p for p, s in status.items() if s in ("failed", "unreadable")]
    if broken:
        text_there = pc.and_(
            pc.is_in(table.column("page"), value_set=pa.array(broken, pa.int32())),
            pc.is_null(table.column("image")),
        )
        dropped["failed_page_text"] = pc.sum(text_there).as_py() or 0
        table = table.filter(pc.invert(text_there))
    table = _expanded(table, document, expand, dropped)
    return Merged(_relinked(table), {k: v for k, v in dropped.items() if v}, failed)


def _winning_claims(
    store: Store,
    order: Sequence[ChunkerInfo],
    metas: Sequence[dict[str, Any]],
    document: str,
    status: dict[int, str],
    dropped: dict[str, int],
) -> tuple[pa.Table, list[str]] | None:
    """The rows of the claims that win their pages, each with its own chunker and config
    hash, in page and piece order; and the versions that raised. None for a claim written
    without today's columns."""
    known = pa.array(sorted(status), pa.int32())
    taken: set[int] = set()
    won: list[pa.Table] = []
    failed: list[str] = []
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
        winning = pc.is_in(page, value_set=pa.array(sorted(wins), pa.int32()))
        if not pc.all(winning).as_py():  # a claim that wins all its pages is kept as read, not copied
            claim = claim.filter(winning)
        if claim.num_rows:
            config_hash = meta.get("config_hash", info.config_hash)
            for name, value in (("chunker", info.ref), ("config_hash", config_hash)):
                claim = claim.set_column(
                    claim.schema.get_field_index(name), name, pa.array([value] * claim.num_rows, pa.string())
                )
            won.append(claim)
    table = pa.concat_tables(won) if won else tables.CLAIMS.empty_table()
    if not _in_order(table):  # claims come in page and piece order: a sort would only copy them
        table = table.sort_by([("page", "ascending"), ("piece", "ascending")])
    return table, failed


def _in_order(table: pa.Table) -> bool:
    """Whether the rows already stand in page and piece order."""
    if table.num_rows < 2:
        return True
    page = table.column("page").to_numpy()
    piece = table.column("piece").to_numpy()
    later_page, same_page = page[1:] > page[:-1], page[1:] == page[:-1]
    return bool(np.all(later_page | (same_page & (piece[1:] >= piece[:-1]))))


def _expanded(table: pa.Table, document: str, expand: Expander, dropped: dict[str, int]) -> pa.Table:
    """The rows with the profile's embedding texts, parts of a piece over the model's limit
    in place of their piece, and blank text left out."""
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
    parts = _cut_misfits(table, misfits, document, expand, dropped)
    # The rows in order: runs of rows kept as they are, each misfit's parts where it stood.
    segments: list[pa.Table] = []
    run = None  # where the current run of kept rows began
    for i, text in enumerate(texts):
        budget_check()
        if i in parts or (is_text[i] and (not text or not text.strip())):
            if run is not None:
                segments.append(table.slice(run, i - run))
                run = None
            if i in parts:
                segments.append(parts.pop(i))
            else:
                dropped["whitespace"] += 1
        elif run is None:
            run = i
    if run is not None:
        if run == 0:
            return table  # every row kept as it is
        segments.append(table.slice(run))
    return pa.concat_tables(segments).combine_chunks() if segments else table.slice(0, 0)


def _cut_misfits(
    table: pa.Table, misfits: list[int], document: str, expand: Expander, dropped: dict[str, int]
) -> dict[int, pa.Table]:
    """Each misfit row's parts (``expand.fit``) as rows of table ``claims``, whitespace left
    out. A slice of misfits at a time is decoded, cut and made Arrow, so a big table's
    pieces, their cell objects and their rows as dicts are never all alive at once."""
    if not misfits:
        return {}
    columns = {name: table.column(name).to_pylist() for name in ("page", "chunker", "config_hash")}
    parts: dict[int, pa.Table] = {}
    for start in range(0, len(misfits), _MISFITS_AT_ONCE):
        some = misfits[start : start + _MISFITS_AT_ONCE]
        rows: list[dict[str, Any]] = []
        spans = []
        for i, (_, piece) in zip(some, claim_pieces(table.take(pa.array(some, pa.int64())))):
            budget_check()
            first = len(rows)
            for part in expand.fit(piece):
                if not part.is_image and (not part.text or not part.text.strip()):
                    dropped["whitespace"] += 1
                    continue
                row = {"document_id": document, "piece": 0, **piece_row(part)}
                rows.append({**row, **{name: values[i] for name, values in columns.items()}})
            spans.append((i, first, len(rows) - first))
        cut = pa.Table.from_pylist(rows, schema=tables.CLAIMS)
        parts.update((i, cut.slice(first, count)) for i, first, count in spans)
    return parts


_MISFITS_AT_ONCE = 256


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


def merged_by_pieces(
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
