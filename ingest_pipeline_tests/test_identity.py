"""Every setting that changes a chunk is in its identity: OCR on or off, the OCR
resolution and the render resolution, through real ingests of a scanned corpus PDF next
to a born-digital one. Each change recomputes exactly what it affects, and the lineage
(pages.reader_config, chunks.config_hash, the claims' metadata) says which settings cut
what."""

from __future__ import annotations

import json

from ingest_pipeline.commands.ingest import ingest
from ingest_pipeline.contract import validate_bbox
from ingest_pipeline.registry import ChunkerRegistry
from ingest_pipeline.storage.catalog import query
from ingest_pipeline_tests.conftest import CORPUS, pdf_bytes, requires_corpus, write
from ingest_pipeline_tests.dagster_helpers import fresh_pipeline

SCAN = CORPUS / "files" / "pdf" / "docling__ocr_test.pdf"  # one image-only page


def state(data_dir):
    """Ingest the storage root with the current environment; then per document (scan,
    text): its default-profile chunks and its pages rows."""
    pipeline = fresh_pipeline(data_dir)  # a new process would read the environment anew
    report = ingest(pipeline)
    assert not report.failed, report.failed
    chunks = query(
        pipeline.lake,
        "SELECT path, page, chunker, config_hash, bbox, meta, chunk_id, "
        "image IS NOT NULL AS is_image FROM chunks WHERE profile = 'default' "
        'ORDER BY path, page, "index"',
    ).to_pylist()
    pages = query(
        pipeline.lake,
        "SELECT s.path, p.page, p.reader, p.status, p.reader_config, p.run_id FROM pages p "
        "JOIN sources s USING (document_id) ORDER BY s.path, p.page",
    ).to_pylist()
    by = {}
    for name in ("scan.pdf", "text.pdf"):
        by[name] = ([c for c in chunks if c["path"] == name], [p for p in pages if p["path"] == name])
    return pipeline, by


def registry_hash(ref: str) -> str:
    registry = ChunkerRegistry.discover()
    return registry.info(registry.get(ref)).config_hash


@requires_corpus
def test_ocr_and_both_resolutions_change_the_identity_of_exactly_what_they_change(data_dir, monkeypatch):
    write(data_dir / "sources" / "scan.pdf", SCAN.read_bytes())
    write(data_dir / "sources" / "text.pdf", pdf_bytes([["A born-digital page", "with a second line"]]))
    pdf1_default, lines1_default = registry_hash("pdf@1"), registry_hash("lines@1")

    # 1. OCR off: the scan is a rendered page image; its lineage says OCR was off
    monkeypatch.setenv("INGEST_OCR", "0")
    _, one = state(data_dir)
    scan_chunks, scan_pages = one["scan.pdf"]
    assert [(c["chunker"], c["is_image"]) for c in scan_chunks] == [("pdf@1", True)]
    assert json.loads(scan_pages[0]["reader_config"]) == {"ocr": False, "ocr_dpi": 150.0}
    off_hash = scan_chunks[0]["config_hash"]
    assert off_hash != pdf1_default  # read with OCR off: not the default identity
    text_chunks, text_pages = one["text.pdf"]
    assert {c["config_hash"] for c in text_chunks} == {pdf1_default}  # OCR never mattered here
    assert text_pages[0]["reader_config"] is None

    # 2. a new render resolution: pdf@1 re-cuts with a new config hash; nothing is re-read
    monkeypatch.setenv("INGEST_CHUNK_DPI", "200")
    _, two = state(data_dir)
    scan_chunks, scan_pages = two["scan.pdf"]
    assert [(c["chunker"], c["is_image"]) for c in scan_chunks] == [("pdf@1", True)]
    assert json.loads(scan_chunks[0]["meta"])["dpi"] == 200.0
    assert scan_chunks[0]["config_hash"] not in (off_hash, pdf1_default)
    assert scan_chunks[0]["chunk_id"] != one["scan.pdf"][0][0]["chunk_id"]
    assert registry_hash("pdf@1") != pdf1_default
    assert {c["config_hash"] for c in two["text.pdf"][0]} == {registry_hash("pdf@1")}
    assert [p["run_id"] for p in scan_pages + two["text.pdf"][1]] == [
        p["run_id"] for p in one["scan.pdf"][1] + one["text.pdf"][1]
    ]  # pages untouched

    # 3. OCR on: the scan is re-read by OCR and cut by lines@1, with boxes, in the default
    # identity; the born-digital PDF is not re-read
    monkeypatch.delenv("INGEST_OCR")
    monkeypatch.delenv("INGEST_CHUNK_DPI")
    pipeline, three = state(data_dir)
    scan_chunks, scan_pages = three["scan.pdf"]
    assert scan_pages[0]["reader"] == "rapidocr@1" and scan_pages[0]["status"] == "read"
    assert scan_pages[0]["run_id"] != one["scan.pdf"][1][0]["run_id"]
    assert json.loads(scan_pages[0]["reader_config"]) == {"ocr": True, "ocr_dpi": 150.0}
    assert len(scan_chunks) >= 3 and {c["chunker"] for c in scan_chunks} == {"lines@1"}
    for c in scan_chunks:
        bbox = c["bbox"]
        assert validate_bbox((bbox["x0"], bbox["y0"], bbox["x1"], bbox["y1"]))
    assert {c["config_hash"] for c in scan_chunks} == {lines1_default}
    assert [p["run_id"] for p in three["text.pdf"][1]] == [p["run_id"] for p in one["text.pdf"][1]]
    ocr_chunks = {c["chunk_id"] for c in scan_chunks}

    # 4. another OCR resolution: re-read, re-cut, a new config hash beside the old one
    monkeypatch.setenv("INGEST_OCR_DPI", "200")
    pipeline, four = state(data_dir)
    scan_chunks, scan_pages = four["scan.pdf"]
    assert json.loads(scan_pages[0]["reader_config"]) == {"ocr": True, "ocr_dpi": 200.0}
    assert {c["chunker"] for c in scan_chunks} == {"lines@1"} and len(scan_chunks) >= 3
    (new_hash,) = {c["config_hash"] for c in scan_chunks}
    assert new_hash != lines1_default and not ocr_chunks & {c["chunk_id"] for c in scan_chunks}
    claim = pipeline.lake.meta("claims", "lines_v1", _doc(pipeline, "scan.pdf"))
    assert (claim["config_hash"], claim["chunker_config_hash"]) == (new_hash, lines1_default)
    assert claim["reader_settings"] == {"ocr_dpi": 200.0}
    assert claim["previous_config_hash"] == lines1_default
    assert [p["run_id"] for p in four["text.pdf"][1]] == [p["run_id"] for p in one["text.pdf"][1]]


def _doc(pipeline, path: str) -> str:
    rows = query(pipeline.lake, f"SELECT document_id FROM sources WHERE path = '{path}'").to_pylist()
    return rows[0]["document_id"]


def test_a_chunk_id_is_the_hash_of_the_canonical_json_of_its_six_parts_whatever_the_characters():
    import hashlib

    from ingest_pipeline.identity import canonical_json, chunk_id

    for document in ("report-2022-1a2b3c", 'quo"te\\slash', "ünïcode\u2028line\nbreak\ttab", "\x00\x1f"):
        for page, index in ((1, 0), (300, 17), (True, 0)):
            digest = hashlib.sha256("text ü".encode()).hexdigest()
            payload = canonical_json([document, "pdf@4", "abcd", page, index, digest])
            assert (
                chunk_id(document, "pdf@4", "abcd", page, index, "text ü")
                == hashlib.sha256(payload.encode()).hexdigest()[:32]
            )
