"""Document records, read as part of the ``pages`` stage: what a document is (title,
organisation, period, kind, language), from its file's own metadata and its first pages,
with a person's overrides on top. A record is read again when its pages, its overrides or
the way records are read change; reading one never fails the document's pages."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ingest_pipeline.contract import PageOutput
from ingest_pipeline.identity import canonical_json, sha256_text
from ingest_pipeline.media_types import MARKDOWN, PDF, XLSM
from ingest_pipeline.records.describe import describe
from ingest_pipeline.records.file_metadata import ooxml_properties, pdf_facts
from ingest_pipeline.records.overrides import SIDECAR_SUFFIX, apply_settings, apply_sidecar
from ingest_pipeline.records.record import RECORD_VERSION, DocumentRecord
from ingest_pipeline.runtime.isolation import ParseWorker
from ingest_pipeline.settings import Settings
from ingest_pipeline.stages.common import direct
from ingest_pipeline.stages.sources import password_of
from ingest_pipeline.storage.store import Store

_OOXML = "application/vnd.openxmlformats-officedocument."
_MARKDOWN_HEAD = 256 * 1024  # the part of a Markdown file its front matter and title are read from


def sidecar_bytes(source: dict[str, Any]) -> bytes | None:
    """The record sidecar beside a local source file, if there is one."""
    uri = source.get("uri") or ""
    if "://" in uri:
        return None
    try:
        with open(uri + SIDECAR_SUFFIX, "rb") as handle:
            return handle.read(64 * 1024 + 1)
    except OSError:
        return None


def describe_document(
    settings: Settings,
    store: Store,
    document: str,
    run_id: str,
    source: dict[str, Any],
    content: bytes | None,
    pages: Sequence[PageOutput] | None,
    parser: ParseWorker | None = None,
    pages_fingerprint: str = "",
) -> dict[str, Any]:
    """Read (or keep) the document's record; returns its fields for the partition's metadata."""
    sidecar = sidecar_bytes(source)
    overrides = settings.document_fields
    fingerprint = sha256_text(
        canonical_json([RECORD_VERSION, pages_fingerprint, dict(overrides), sha256_text(repr(sidecar))])
    )
    previous = store.record_meta(document)
    if previous and previous.get("fingerprint") == fingerprint and previous.get("fields"):
        return previous["fields"]
    if content is None:
        from ingest_pipeline.stages.sources import source_bytes

        content = source_bytes(source)
    if pages is None:
        pages = store.pages(document) or ()
    record = _read(settings, source, content, pages, parser, document)
    apply_settings(record, overrides)
    sidecar_name = os.path.basename(source["path"]) + SIDECAR_SUFFIX
    try:
        apply_sidecar(record, sidecar, sidecar_name)
    except ValueError as exc:
        record.note = str(exc)
    row = record.to_row(run_id, source.get("sha256"))
    fields = {
        f"document_{k}": row[k] for k in ("title", "organisation", "period", "kind", "language") if row[k]
    }
    store.write_record(document, row, {"fingerprint": fingerprint, "fields": fields})
    return fields


def _read(settings, source, content, pages, parser, document) -> DocumentRecord:
    media_type = source["media_type"]
    try:
        facts = _facts(settings, source, content, parser)
        note = ""
    except Exception as exc:  # noqa: BLE001 - a file that cannot say more is described from its pages
        facts, note = {}, f"file metadata not read: {type(exc).__name__}: {exc}"
    record = describe(document, source["path"], media_type, pages, facts)
    record.note = note
    return record


def _facts(settings: Settings, source: dict[str, Any], content: bytes, parser) -> dict[str, Any]:
    media_type = source["media_type"]
    if media_type == PDF:
        password = password_of(settings, source)
        return (parser.call if parser else direct)(pdf_facts, content, password)
    if media_type.startswith(_OOXML) or media_type == XLSM:
        return {"properties": ooxml_properties(content)}
    if media_type == MARKDOWN:
        return {"markdown": content[:_MARKDOWN_HEAD].decode("utf-8", errors="replace")}
    return {}
