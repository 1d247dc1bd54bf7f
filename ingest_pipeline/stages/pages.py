"""The ``pages`` stage: run the page readers over a document's bytes; one row per page,
located lines in their own table; and load them back as page outputs."""

from __future__ import annotations

from typing import Any

from ingest_pipeline.contract import PageOutput
from ingest_pipeline.identity import canonical_json
from ingest_pipeline.readers import (
    UnsupportedMediaType,
    changed_settings,
    read_pages,
    reader_for,
    reader_ids,
    reader_settings,
)
from ingest_pipeline.readers.base import ReadOptions
from ingest_pipeline.readers.ocr import ocr_concerns
from ingest_pipeline.runtime.faults import crash_point
from ingest_pipeline.runtime.isolation import ParseWorker
from ingest_pipeline.settings import Settings
from ingest_pipeline.stages.common import (
    STAGE_VERSIONS,
    UNCHANGED,
    Outcome,
    UpstreamMissing,
    fingerprint_of,
    parsed,
)
from ingest_pipeline.stages.records import describe_document
from ingest_pipeline.stages.sources import load_source, parse_limits, password_of, source_bytes
from ingest_pipeline.storage.store import Store


def read_document(
    settings: Settings,
    store: Store,
    document: str,
    run_id: str,
    parser: ParseWorker | None = None,
    force: bool = False,
) -> Outcome:
    """Run the page readers; one row per page, located lines in their own table.

    The fingerprint covers the bytes, the readers, whether a password was given and, for a
    document with image-only pages, the OCR settings that differ from their defaults: so
    turning OCR on or changing its resolution re-reads exactly the scanned documents.
    """
    try:
        source, source_meta = load_source(store, document)
    except UpstreamMissing:
        store.delete_pages(document)  # pages of bytes that can no longer be observed
        raise
    password = password_of(settings, source)
    stated = reader_settings(source["media_type"], settings.route_of(source).reader_settings())
    previous = store.pages_meta(document)

    def fingerprint_for(ocr_matters: bool) -> str:
        changed = changed_settings(stated) if ocr_matters else {}
        return fingerprint_of(
            STAGE_VERSIONS["pages"],
            source_meta.get("fingerprint"),
            sorted(reader_ids()),
            password is not None,
            *([changed] if changed else []),
        )

    if previous and previous.get("fingerprint") == fingerprint_for(_ocr_mattered(previous)) and not force:
        record = describe_document(
            settings, store, document, run_id, source, None, None, parser, previous.get("fingerprint", "")
        )
        return Outcome(document, "unchanged", {**previous.get("summary", {}), **UNCHANGED, **record})
    content = source_bytes(source)
    options = ReadOptions(
        name=source["path"], password=password, ocr=stated.get("ocr"), ocr_dpi=stated.get("ocr_dpi")
    )
    try:
        limits = parse_limits(settings, source)
        outputs = parsed(parser, limits, read_pages, content, source["media_type"], options)
    except Exception as exc:
        _write_verdict(store, document, source, exc, run_id)
        raise
    ocr_pages = sum(1 for out in outputs if ocr_concerns(out)) if stated else 0
    fingerprint = fingerprint_for(ocr_pages > 0)
    with_password = {"password": True} if password is not None else {}
    columns = _page_columns(outputs, stated, with_password, source["sha256"], run_id)
    summary: dict[str, Any] = {"pages": len(outputs)}
    for out in outputs:
        summary[out.status] = summary.get(out.status, 0) + 1
    summary["readers"] = sorted({o.reader for o in outputs})
    # reader_identity: the non-default settings this document's output depends on; the
    # chunkers' config hashes for it take them in (identity.with_reader_settings).
    identity = changed_settings(stated) if ocr_pages else {}
    meta = {
        "fingerprint": fingerprint,
        "summary": summary,
        "ocr_pages": ocr_pages,
        "reader_config": {**(stated if ocr_pages else {}), **with_password},
        "reader_identity": identity,
    }
    store.write_pages(document, outputs, columns, meta)
    crash_point("reading")
    record = describe_document(
        settings, store, document, run_id, source, content, outputs, parser, fingerprint
    )
    return Outcome(document, "new", {**summary, **record})


def _write_verdict(store: Store, document: str, source: dict[str, Any], exc: Exception, run_id: str) -> None:
    """Bytes no reader could open still get a reader's verdict (SPEC A13): one failed page
    saying why, which the chunkers are then asked about. The stage fails all the same (the
    errors row names the reason), and its metadata marks the document ``unopened``, so the
    chunk map skips it as failed upstream and the pages are read again next time."""
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:500]
    try:
        found = reader_for(source["media_type"])
        reader = f"{found.id}@{found.version}"
    except UnsupportedMediaType:
        reader = "none@1"
    verdict = PageOutput(page=1, status="failed", reader=reader, reason=f"cannot be opened: {reason}")
    columns = _page_columns([verdict], {}, {}, source["sha256"], run_id)
    meta = {
        "fingerprint": None,
        "summary": {"pages": 1, "failed": 1, "readers": [reader]},
        "unopened": reason,
    }
    store.write_pages(document, [verdict], columns, meta)


def _page_columns(
    outputs, stated: dict[str, Any], with_password: dict[str, Any], sha256: str, run_id: str
) -> list[dict[str, Any]]:
    """The columns each page row adds to its reader's: the reader settings its output
    depends on, and every rung of the reader ladder it went through (A05)."""
    page_config = {**stated, **with_password}
    other_config = canonical_json(with_password) if with_password else None
    return [
        {
            "source_sha256": sha256,
            "run_id": run_id,
            "reader_config": canonical_json(page_config) if stated and ocr_concerns(out) else other_config,
            "ladder": canonical_json(out.ladder),
        }
        for out in outputs
    ]


def _ocr_mattered(previous: dict[str, Any]) -> bool:
    """Whether the OCR settings decided part of a document's last read (older pages
    metadata has no ``ocr_pages``: then an OCR reader or an unreadable page says so)."""
    if "ocr_pages" in previous:
        return bool(previous["ocr_pages"])
    summary = previous.get("summary") or {}
    return bool(summary.get("unreadable")) or any(
        r.startswith("rapidocr@") for r in summary.get("readers", [])
    )


def load_pages(store: Store, document: str) -> tuple[tuple[PageOutput, ...], str]:
    """Page outputs with their located lines, and the pages' fingerprint."""
    outputs = store.pages(document)
    if outputs is None:
        raise UpstreamMissing(f"no pages for {document}")
    return outputs, (store.pages_meta(document) or {}).get("fingerprint", "")
