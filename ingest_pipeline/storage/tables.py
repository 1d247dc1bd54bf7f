"""Schemas of the lake's tables (the catalog's views keep these names)."""

from __future__ import annotations

import pyarrow as pa

BBOX = pa.struct([("x0", pa.float64()), ("y0", pa.float64()), ("x1", pa.float64()), ("y1", pa.float64())])

SOURCES = pa.schema(
    [
        ("document_id", pa.string()),
        ("path", pa.string()),
        ("uri", pa.string()),
        ("media_type", pa.string()),
        ("bytes", pa.int64()),
        ("sha256", pa.string()),
        ("mtime", pa.timestamp("us", tz="UTC")),
        ("status", pa.string()),
        ("observed_at", pa.timestamp("us", tz="UTC")),
        ("run_id", pa.string()),
        ("route", pa.string()),  # the [[routes]] entry that took it ("default" without routes)
    ]
)

INVENTORY = pa.schema(
    [
        ("document_id", pa.string()),
        ("path", pa.string()),
        ("uri", pa.string()),
        ("registered_at", pa.timestamp("us", tz="UTC")),
        ("root", pa.string()),  # the folder the file was found under (trusted for its links)
    ]
)

PAGES = pa.schema(
    [
        ("document_id", pa.string()),
        ("page", pa.int32()),
        ("status", pa.string()),
        ("reason", pa.string()),
        ("reader", pa.string()),
        ("width", pa.float64()),
        ("height", pa.float64()),
        ("text", pa.string()),
        ("source_sha256", pa.string()),
        ("run_id", pa.string()),
        # The reader settings this page's output depends on, as JSON (OCR on/off and DPI for
        # an image-only PDF page; password presence, never its value), else null.
        ("reader_config", pa.string()),
        # Every rung of the reader ladder the page went through, in order, as JSON
        # [{"reader", "status", "reason"}]: the last one is the page's verdict.
        ("ladder", pa.string()),
    ]
)

PAGE_LINES = pa.schema(
    [
        ("document_id", pa.string()),
        ("page", pa.int32()),
        ("line", pa.int32()),
        ("text", pa.string()),
        ("x0", pa.float64()),
        ("y0", pa.float64()),
        ("x1", pa.float64()),
        ("y1", pa.float64()),
        ("space_width", pa.float64()),
        ("space_height", pa.float64()),
        ("confidence", pa.float64()),
        ("bbox", BBOX),
    ]
)

PIECE_FIELDS = [
    ("text", pa.string()),
    ("image", pa.binary()),
    ("bbox", BBOX),
    ("bbox_reason", pa.string()),
    ("role", pa.string()),
    ("layout", pa.string()),
    ("header_path", pa.list_(pa.string())),
    ("content_type", pa.string()),
    ("embed_text", pa.string()),
    ("meta", pa.string()),
]

CLAIMS = pa.schema(
    [
        ("document_id", pa.string()),
        ("chunker", pa.string()),
        ("config_hash", pa.string()),
        ("page", pa.int32()),
        ("piece", pa.int32()),
        *PIECE_FIELDS,
        ("source_sha256", pa.string()),
        ("run_id", pa.string()),
    ]
)

CHUNKS = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("label", pa.string()),
        ("profile", pa.string()),
        ("document_id", pa.string()),
        ("path", pa.string()),
        ("page", pa.int32()),
        ("index", pa.int32()),
        *PIECE_FIELDS,
        ("chars", pa.int32()),
        ("tokens", pa.int32()),
        ("chunker", pa.string()),
        ("config_hash", pa.string()),
        ("reader", pa.string()),
        ("source_sha256", pa.string()),
        ("run_id", pa.string()),
    ]
)

EMBEDDINGS = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("profile", pa.string()),
        ("document_id", pa.string()),
        ("model", pa.string()),
        ("text_sha256", pa.string()),
        ("vector", pa.list_(pa.float32())),
        ("cache", pa.string()),  # embedded (by the model, in run_id) | cached (its vector was already known)
        ("run_id", pa.string()),
    ]
)

EMBEDDING_CACHE = pa.schema(
    [
        ("text_sha256", pa.string()),
        ("vector", pa.list_(pa.float32())),
    ]
)

ERRORS = pa.schema(
    [
        ("document_id", pa.string()),
        ("path", pa.string()),
        ("stage", pa.string()),
        ("error", pa.string()),
        ("reason", pa.string()),
        ("run_id", pa.string()),
        ("at", pa.timestamp("us", tz="UTC")),
    ]
)

# What a document is (records/): fields read from its own bytes, ``read_from`` saying where
# each was read (JSON: field -> {"page", "bbox"} or {"metadata": key} or an override).
DOCUMENTS = pa.schema(
    [
        ("document_id", pa.string()),
        ("path", pa.string()),
        ("title", pa.string()),
        ("organisation", pa.string()),
        ("period", pa.string()),
        ("year", pa.int32()),
        ("kind", pa.string()),
        ("language", pa.string()),
        ("pages", pa.int32()),
        ("names", pa.list_(pa.string())),
        ("read_from", pa.string()),
        ("note", pa.string()),
        ("source_sha256", pa.string()),
        ("run_id", pa.string()),
    ]
)

# What each config hash stands for (storage/configs.py): the values as JSON, the owner
# (chunker id@version) and the code version, first and last seen.
CONFIGS = pa.schema(
    [
        ("config_hash", pa.string()),
        ("owner", pa.string()),
        ("config", pa.string()),
        ("code_version", pa.string()),
        ("first_seen", pa.timestamp("us", tz="UTC")),
        ("last_seen", pa.timestamp("us", tz="UTC")),
    ]
)

PUBLIC = {
    "sources": SOURCES,
    "documents": DOCUMENTS,
    "pages": PAGES,
    "page_lines": PAGE_LINES,
    "claims": CLAIMS,
    "chunks": CHUNKS,
    "embeddings": EMBEDDINGS,
    "errors": ERRORS,
    "configs": CONFIGS,
}


def bbox_value(bbox) -> dict | None:
    if bbox is None:
        return None
    x0, y0, x1, y1 = bbox
    return {"x0": x0, "y0": y0, "x1": x1, "y1": y1}
