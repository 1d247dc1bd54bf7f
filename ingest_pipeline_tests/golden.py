"""Golden outputs of the built-in chunker versions over ../shared/corpus/files.

A golden file holds, for one chunker version and configuration hash, what that version
claims of every corpus document: per piece its label, its chunk id (as the chunk map
would number it if this version won every page it claims), its box rounded to four
decimals or its bbox_reason, role, heading path, content type, a sha256 of its text or
image bytes and a short digest of the rest (layout, meta, embedding text). One file per
version (``golden/<id>_v<version>.json``) keeps the repository small; each piece is one
line so a change reads as a plain diff.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ingest_pipeline.contract import ChunkPiece, PageChunks
from ingest_pipeline.identity import canonical_json, document_id, sha256_bytes
from ingest_pipeline.stages.merge import Claim, merge_claims

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
REGENERATE_ENV = "INGEST_REGENERATE_GOLDEN"


def golden_document_id(relpath: str) -> str:
    """The id the document would get under a storage root's sources/ at ``relpath``."""
    return document_id(f"sources:{relpath}", relpath)


def _box(bbox) -> list[float] | None:
    return None if bbox is None else [round(float(v), 4) for v in bbox]


def _rest_digest(piece: ChunkPiece) -> str:
    rest = {
        "layout": piece.layout.to_json() if piece.layout else None,
        "meta": dict(piece.meta),
        "embed_text": piece.embed_text,
    }
    return hashlib.sha256(canonical_json(rest).encode("utf-8")).hexdigest()[:16]


COLUMNS = (
    "label",
    "chunk_id",
    "sha256",
    "bbox",
    "bbox_reason",
    "role",
    "content_type",
    "header_path",
    "rest",
)
# A document with more pieces than this is kept as one digest line per page (the
# 117-page PDF alone would otherwise hold most of the repository's golden bytes).
PAGE_DIGEST_OVER = 1000


def piece_record(piece: ChunkPiece, label: str | None, cid: str | None) -> list[Any]:
    """One piece as a row of COLUMNS; label and id are None when the chunk map drops the
    piece (whitespace, text of a failed page); the sha256 (first 16 hex digits) is of the
    text or of the image bytes, marked ``img:``."""
    content = piece.image if piece.is_image else piece.text.encode("utf-8")
    digest = ("img:" if piece.is_image else "") + sha256_bytes(content)[:16]
    return [
        label,
        cid,
        digest,
        _box(piece.bbox),
        piece.bbox_reason,
        piece.layout.role if piece.layout else None,
        piece.content_type,
        list(piece.header_path),
        _rest_digest(piece),
    ]


def document_record(relpath: str, ref: str, cfg_hash: str, pages, answer: Iterable[PageChunks]) -> list:
    """One row per claimed piece in claim order, with the id and label the chunk map gives
    it when this claim is the only one (a claimed page without pieces is ``[page, "empty"]``)."""
    answer = tuple(answer)
    claim = Claim(chunker=ref, config_hash=cfg_hash, pages=answer)
    mapped = merge_claims(golden_document_id(relpath), pages, [claim])
    by_piece = {id(c.piece): c for c in mapped.chunks}
    per_page: list[tuple[int, list]] = []
    for page in answer:
        rows: list = []
        if not page.pieces:
            rows.append([f"page:{page.page}", "empty"])
        for piece in page.pieces:
            chunk = by_piece.get(id(piece))
            row = piece_record(piece, chunk.label if chunk else None, chunk.chunk_id if chunk else None)
            if chunk is None:
                row[0] = f"page:{page.page}/dropped"
            rows.append(row)
        per_page.append((page.page, rows))
    if sum(len(rows) for _, rows in per_page) <= PAGE_DIGEST_OVER:
        return [row for _, rows in per_page for row in rows]
    return [
        [
            f"page:{number}",
            f"{len(rows)} pieces",
            hashlib.sha256(canonical_json(rows).encode("utf-8")).hexdigest()[:16],
        ]
        for number, rows in per_page
    ]


def golden_path(info) -> Path:
    return GOLDEN_DIR / f"{info.asset_name}.json"


def render(ref: str, cfg_hash: str, config: Mapping[str, Any], documents: Mapping[str, list]) -> str:
    """The file text: a header, then one JSON line per piece (sorted documents)."""
    lines = [
        "{",
        f'"chunker": {json.dumps(ref)},',
        f'"config_hash": {json.dumps(cfg_hash)},',
        f'"config": {canonical_json(dict(config))},',
        f'"columns": {canonical_json(list(COLUMNS))},',
        '"documents": {',
    ]
    names = sorted(documents)
    for n, name in enumerate(names):
        records = documents[name]
        lines.append(f"{json.dumps(name)}: [")
        for i, record in enumerate(records):
            lines.append(canonical_json(record) + ("," if i < len(records) - 1 else ""))
        lines.append("]" + ("," if n < len(names) - 1 else ""))
    lines += ["}", "}"]
    return "\n".join(lines) + "\n"


def load(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def diff(expected: Mapping[str, list], actual: Mapping[str, list], limit: int = 40, total: int = 200) -> str:
    """A readable account of what changed: documents claimed or no longer claimed, then a
    unified diff of the piece lines of each changed document (at most ``limit`` lines each,
    ``total`` in all)."""
    out = []
    for name in sorted(set(expected) - set(actual)):
        out.append(f"- {name}: no longer claimed")
    for name in sorted(set(actual) - set(expected)):
        out.append(f"+ {name}: newly claimed ({len(actual[name])} pieces)")
    for name in sorted(set(expected) & set(actual)):
        if expected[name] == actual[name]:
            continue
        old = [canonical_json(r) for r in expected[name]]
        new = [canonical_json(r) for r in actual[name]]
        lines = list(difflib.unified_diff(old, new, f"golden {name}", f"now {name}", n=0, lineterm=""))
        out.append(f"~ {name}: {len(old)} -> {len(new)} pieces")
        out.extend(
            lines[:limit] + ([f"  ... {len(lines) - limit} more diff lines"] if len(lines) > limit else [])
        )
    if len(out) > total:
        out = out[:total] + [f"... {len(out) - total} more lines"]
    return "\n".join(out)
