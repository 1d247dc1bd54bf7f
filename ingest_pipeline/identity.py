"""Deterministic identities: document ids, config hashes and chunk ids."""

from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from typing import Any
from urllib.parse import quote_from_bytes, unquote_to_bytes

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
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    return f"{slug}-{digest}" if slug else digest


# File names are data. A name the file system allows may hold bytes that are not UTF-8 (Python
# keeps them as lone surrogates) and control characters. Stored, such a name is written as
# ``fs-bytes:`` and its percent-escaped bytes, which round-trips; printed, it is escaped.
_RAW_PREFIX = "fs-bytes:"


def stored_name(name: str | None) -> str | None:
    """A name as the lake and the catalog keep it: itself when it is valid UTF-8, otherwise
    its raw bytes escaped (``real_name`` turns it back into the name the file system knows)."""
    if not name:
        return name
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return _RAW_PREFIX + quote_from_bytes(os.fsencode(name), safe="/")


def real_name(stored: str | None) -> str | None:
    """The file system's name for a stored name (the inverse of ``stored_name``)."""
    if stored and stored.startswith(_RAW_PREFIX):
        return os.fsdecode(unquote_to_bytes(stored[len(_RAW_PREFIX) :]))
    return stored


def label_name(name: str) -> str:
    """A label that is valid UTF-8: bytes that are not UTF-8 are written as ``\\xNN``."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", "backslashreplace")


_BIDI = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def display_name(text: object) -> str:
    """Text safe to print: control characters (escape sequences, newlines, bidirectional
    overrides) and bytes that are not UTF-8 are written as visible escapes, so a name cannot
    move the cursor, recolour the terminal or set its title."""
    text = str(text)
    if text.isprintable() and text.isascii():
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") or ch in _BIDI:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


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
