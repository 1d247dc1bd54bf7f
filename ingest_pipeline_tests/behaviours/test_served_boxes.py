"""The served profile over every corpus PDF: each chunk of a page PDFium or OCR read has a
valid box (never ``no_geometry``), and comes from pdf@4's passages."""

from __future__ import annotations

import pytest

from ingest_pipeline import media_types as mt
from ingest_pipeline.contract import SourceBytes, validate_bbox
from ingest_pipeline.readers import read_pages, reader_ids
from ingest_pipeline.readers.base import ReadOptions
from ingest_pipeline.registry import ChunkerRegistry
from ingest_pipeline.settings import SERVED_PROFILE, builtin_profiles
from ingest_pipeline.stages.embedding_text import Expander
from ingest_pipeline.stages.merge import Claim, merge_claims
from ingest_pipeline_tests.chunkers.pdf.test_pdf_corpus import FACTS, OPENABLE, PDF_DIR

pytestmark = pytest.mark.skipif(not PDF_DIR.exists(), reason="shared corpus not present")


def test_every_served_chunk_of_a_read_pdf_page_has_a_box(embedder):
    served = next(p for p in builtin_profiles() if p.name == SERVED_PROFILE)
    registry = ChunkerRegistry.discover({}, reserved_ids=reader_ids())
    order = [
        c
        for c in registry.order_for(served.chunkers)
        if getattr(c, "media_types", None) is None or mt.PDF in c.media_types
    ]
    checked = ocr_pages = 0
    for name in OPENABLE:
        content = (PDF_DIR / name).read_bytes()
        password = FACTS.get(name, {}).get("password")
        pages = read_pages(content, mt.PDF, ReadOptions(name=name, password=password))
        keyed = SourceBytes(content, password)
        claims = [Claim(registry.info(c).ref, "h", tuple(c.chunk(keyed, mt.PDF, pages))) for c in order]
        chunk_map = merge_claims(name, pages, claims, expand=Expander(served, embedder, name))
        read = {p.page: p for p in pages if p.status == "read"}
        for chunk in chunk_map.chunks:
            if chunk.page not in read:
                continue
            assert chunk.piece.bbox_reason is None, (name, chunk.page, chunk.chunker, chunk.piece.bbox_reason)
            validate_bbox(chunk.piece.bbox)
            assert chunk.chunker == "pdf@4", (name, chunk.page, chunk.chunker)
            assert all(r.bbox for r in chunk.piece.layout.regions)
            checked += 1
        ocr_pages += sum(
            1
            for p in read.values()
            if p.reader.startswith("rapidocr") and any(c.page == p.page for c in chunk_map.chunks)
        )
    assert checked > 300 and ocr_pages >= 3  # born-digital passages and OCR-read pages both covered
