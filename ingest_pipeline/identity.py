"""Deterministic identities: document ids, config hashes and chunk ids."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

_SLUG_DROP = re.compile(r"[^a-z0-9]+")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: str) -> str:
    """The sha256 of a local file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def document_id(key: str, label: str | None = None) -> str:
    """A partition-safe id (only ``[a-z0-9_-]``): a slug of ``label`` (the relative path)
    plus a short hash of ``key`` (what makes the document unique)."""
    slug = _SLUG_DROP.sub("-", (label or key).lower()).strip("-")[:60].strip("-")
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:10]
    return f"{slug}-{digest}" if slug else digest


# One encoder for every canonical text (json.dumps with these options builds a new one per call).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


_STRING = json.encoder.encode_basestring  # how _CANONICAL writes a string (ensure_ascii=False)


def canonical_json(value: Any) -> str:
    return _CANONICAL.encode(value)


def config_hash(chunker_ref: str, config: dict[str, Any]) -> str:
    """A stable hash of a chunker's id@version and configuration, equal across processes."""
    return hashlib.sha256(canonical_json({"chunker": chunker_ref, "config": config}).encode()).hexdigest()[
        :16
    ]


def with_reader_settings(cfg_hash: str, settings: dict[str, Any]) -> str:
    """A chunker's config hash for a document its readers read with non-default settings
    (OCR off, another OCR resolution): the same hash when there are none, so the chunk ids
    of a default install never change."""
    if not settings:
        return cfg_hash
    payload = canonical_json({"config_hash": cfg_hash, "reader": settings})
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def chunk_id(
    document: str, chunker_ref: str, cfg_hash: str, page: int, index: int, content: str | bytes
) -> str:
    """The primary key of a chunk: same input and configuration, same id on any machine."""
    content_digest = sha256_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    if type(page) is int and type(index) is int:  # canonical_json's text for these six, written out
        payload = (
            f"[{_STRING(document)},{_STRING(chunker_ref)},{_STRING(cfg_hash)},{page},{index},"
            f"{_STRING(content_digest)}]"
        )
    else:
        payload = canonical_json([document, chunker_ref, cfg_hash, page, index, content_digest])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]
