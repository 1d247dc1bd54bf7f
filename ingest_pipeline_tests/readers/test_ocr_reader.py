"""The OCR reader on scans the tests make: a text page rendered by PDFium, embedded as
the only image of a PDF page, and the same picture as PNG and as a two-frame TIFF.
Each image is OCR'd once per module (OCR costs about a second a page)."""

from __future__ import annotations

import io

import pytest

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.lines import LineParagraphsChunker, LinesChunker
from ingest_pipeline.chunkers.pdf.lines import PdfLinesChunker
from ingest_pipeline.chunkers.pdf.paragraphs import PdfParagraphsChunker
from ingest_pipeline.readers import read_pages, reader_for
from ingest_pipeline.readers.base import ReadOptions
from ingest_pipeline_tests.pdf_writer import PdfWriter, gray_image

pytest.importorskip("rapidocr_onnxruntime")

WORDS = ("Invoice", "Scanned", "Total")


def scan_image():
    """A gray picture of a text page (what a scanner would give), cropped to its text."""
    import pypdfium2 as pdfium

    w = PdfWriter()
    p = w.page(width=400, height=200)
    p.text(20, 160, "Invoice 4711 Scanned copy", 18)
    p.text(20, 120, "Total due 99.50 EUR", 18)
    pdf = pdfium.PdfDocument(w.to_bytes())
    image = pdf[0].render(scale=2).to_pil().convert("L")
    pdf.close()
    return image


@pytest.fixture(scope="module")
def scan():
    return scan_image()


@pytest.fixture(scope="module")
def scanned_pdf(scan) -> bytes:
    w = PdfWriter()
    page = w.page(width=400, height=200)
    page.image(0, 0, 400, 200, scan.width, scan.height, scan.tobytes())
    w.page(width=400, height=200).text(20, 150, "A born-digital second page", 14)
    return w.to_bytes()


@pytest.fixture(scope="module")
def scanned_pages(scanned_pdf):
    return read_pages(scanned_pdf, mt.PDF, ReadOptions())


def test_image_only_pdf_page_is_read_by_ocr(scanned_pages):
    first, second = scanned_pages
    assert first.status == "read" and first.reader == "rapidocr@1"
    assert second.reader.startswith("pdfium_text")  # OCR only where it is needed
    for word in WORDS:
        assert word in first.text
    assert first.lines and all(line.space == first.lines[0].space for line in first.lines)
    width, height = first.lines[0].space
    assert abs(width - 400 * 150 / 72) <= 1 and abs(height - 200 * 150 / 72) <= 1
    for line in first.lines:
        assert line.bbox() is not None


def test_scanned_page_goes_to_lines_not_pdf1(scanned_pdf, scanned_pages):  # T-P7
    pdf1 = {pc.page for pc in PdfLinesChunker().chunk(scanned_pdf, mt.PDF, scanned_pages)}
    assert pdf1 == {2}
    (claim,) = LinesChunker().chunk(scanned_pdf, mt.PDF, scanned_pages)
    assert claim.page == 1
    texts = [p.text for p in claim.pieces]
    assert any("Invoice" in t for t in texts) and any("Total" in t for t in texts)
    first_box = claim.pieces[0].bbox
    assert first_box[1] < 0.4  # the first line sits in the upper part of the page
    (paragraph_claim,) = LineParagraphsChunker().chunk(scanned_pdf, mt.PDF, scanned_pages)
    assert paragraph_claim.pieces
    assert {pc.page for pc in PdfParagraphsChunker().chunk(scanned_pdf, mt.PDF, scanned_pages)} == {2}


def test_page_ocr_cannot_read_stays_unreadable_and_is_rendered():
    w = PdfWriter()
    data = gray_image(40, 20, lambda x, y: 5 < x < 35 and 5 < y < 15)
    w.page(width=200, height=100).image(50, 25, 100, 50, 40, 20, data)
    content = w.to_bytes()
    (page,) = read_pages(content, mt.PDF, ReadOptions())
    assert page.status == "unreadable"
    assert page.reader == "rapidocr@1" and "OCR found no text" in page.reason
    (answer,) = PdfLinesChunker().chunk(content, mt.PDF, (page,))
    assert answer.pieces[0].is_image


def test_ocr_can_be_switched_off(monkeypatch, scanned_pdf):
    monkeypatch.setenv("INGEST_OCR", "0")
    first, _ = read_pages(scanned_pdf, mt.PDF, ReadOptions())
    assert first.status == "unreadable"


def test_png_and_tiff_frames_are_pages(scan):
    buffer = io.BytesIO()
    scan.save(buffer, format="PNG")
    png = buffer.getvalue()
    assert reader_for(mt.PNG).id == "rapidocr"
    (page,) = read_pages(png, mt.PNG, ReadOptions())
    assert page.status == "read" and "Invoice" in page.text
    assert page.lines[0].space == (float(scan.width), float(scan.height))

    from PIL import Image

    blank = Image.new("L", (200, 100), 255)
    buffer = io.BytesIO()
    scan.save(buffer, format="TIFF", save_all=True, append_images=[blank])
    pages = read_pages(buffer.getvalue(), mt.TIFF, ReadOptions())
    assert [p.page for p in pages] == [1, 2]
    assert pages[0].status == "read" and pages[1].status == "unreadable"


def test_undecodable_image_is_a_document_error():
    from ingest_pipeline.readers.pdf import DocumentError

    with pytest.raises(DocumentError):
        read_pages(b"\x89PNG\r\n\x1a\nbroken", mt.PNG, ReadOptions())


def test_a_page_ocr_read_keeps_pdfiums_verdict_as_its_first_rung(data_dir, scanned_pdf):  # A05
    """The pages view records every rung of the reader ladder: PDFium's "no text layer"
    verdict, then OCR's text; a page PDFium read has one rung."""
    import json

    from ingest_pipeline import stages
    from ingest_pipeline.documents import collect
    from ingest_pipeline.settings import load_settings
    from ingest_pipeline.storage.catalog import query
    from ingest_pipeline.storage.store import Store
    from ingest_pipeline_tests.conftest import write

    write(data_dir / "sources" / "scan.pdf", scanned_pdf)
    settings = load_settings(data_dir)
    store = Store.at(settings.lake_root)
    (entry,) = collect(settings, [settings.source_root])
    store.save_inventory([entry])
    stages.observe_source(settings, store, entry.document_id, "run")
    stages.read_document(settings, store, entry.document_id, "run")
    rows = query(store, "select page, reader, ladder from pages order by page").to_pylist()
    first, second = (json.loads(row["ladder"]) for row in rows)
    assert [(r["reader"].split("@")[0], r["status"]) for r in first] == [
        ("pdfium_text", "unreadable"),
        ("rapidocr", "read"),
    ]
    assert first[0]["reason"].startswith("no text layer")
    assert len(second) == 1 and second[0]["reader"] == rows[1]["reader"] and second[0]["status"] == "read"
