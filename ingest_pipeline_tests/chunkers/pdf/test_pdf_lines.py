"""pdf@1 (T-P1..T-P9) and rendering (T-D1..T-D3) on PDFs written by the test writer."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.pdf.lines import PdfLinesChunker
from ingest_pipeline.contract import LocatedLine, PageOutput, validate_bbox
from ingest_pipeline.readers.base import ReadOptions
from ingest_pipeline.readers.pdf import PdfTextReader
from ingest_pipeline_tests.conftest import requires_corpus
from ingest_pipeline_tests.pdf_writer import PdfWriter, gray_image, invoice_pdf

PDF = mt.PDF


def text_pages(content: bytes) -> tuple[PageOutput, ...]:
    """The text reader alone (no OCR), as the chunkers see it."""
    return PdfTextReader().read(content, PDF, ReadOptions())


def chunk(content: bytes, pages=None, chunker=None):
    pages = pages if pages is not None else text_pages(content)
    return (chunker or PdfLinesChunker()).chunk(content, PDF, pages)


def texts(answer, page: int = 1) -> list[str]:
    for pc in answer:
        if pc.page == page:
            return [p.text for p in pc.pieces]
    return []


def pieces(answer, page: int = 1):
    return next(pc.pieces for pc in answer if pc.page == page)


def test_invoice_per_glyph_runs_read_as_words():  # T-P1
    answer = chunk(invoice_pdf())
    got = texts(answer)
    assert len(got) == 3, got
    assert all(len(t) > 1 for t in got)
    words = [set(t.split()) for t in got]
    assert {"INVOICE", "No."} <= words[0]
    assert "2024" in got[0] and "001" in got[0]
    assert {"Bill", "to:", "Acme", "Corp,", "1", "Main", "Street"} <= words[1]
    assert {"Total", "due:", "1,250.00", "EUR"} <= words[2]


def test_per_glyph_runs_in_odd_order_still_give_lines_in_reading_order():
    w = PdfWriter()
    p = w.page()
    text = "Shuffled glyph order"
    order = list(range(len(text)))[::2] + list(range(len(text)))[1::2]
    p.glyphs(72, 600, "Second line here", order=list(range(16))[::-1])
    p.glyphs(72, 700, text, order=order)
    got = texts(chunk(w.to_bytes()))
    assert got == ["Shuffled glyph order", "Second line here"]


def test_boxes_valid_and_top_to_bottom():  # T-P2
    answer = chunk(invoice_pdf())
    boxes = [p.bbox for p in pieces(answer)]
    for b in boxes:
        assert validate_bbox(b) == b
    assert [b[1] for b in boxes] == sorted(b[1] for b in boxes)
    assert boxes[0][3] <= 0.1


def test_rotated_page_boxes_follow_the_display():  # T-P3
    w = PdfWriter()
    p = w.page(rotate=90)
    p.text(72, 740, "Near the unrotated top")
    p.text(72, 60, "Near the unrotated bottom")
    answer = chunk(w.to_bytes())
    by_text = {pc.text: pc.bbox for pc in pieces(answer)}
    top = by_text["Near the unrotated top"]
    bottom = by_text["Near the unrotated bottom"]
    for b in (top, bottom):
        validate_bbox(b)
    # /Rotate 90 turns the page clockwise: the unrotated top edge is shown at the right.
    assert top[0] > 0.85 and bottom[2] < 0.15
    # the text ran left to right along the unrotated page: it now runs top to bottom
    assert top[3] - top[1] > top[2] - top[0]
    assert abs(top[1] - 72 / 612) < 0.02


def test_rotated_box_matches_the_rendered_ink():  # T-P3, checked against PDFium's own rendering
    import pypdfium2 as pdfium

    w = PdfWriter()
    w.page(rotate=270).text(300, 500, "Ink check")
    content = w.to_bytes()
    (box,) = [p.bbox for p in pieces(chunk(content))]
    pdf = pdfium.PdfDocument(content)
    image = pdf[0].render(scale=1).to_pil().convert("L")
    dark = [(x, y) for y in range(image.height) for x in range(image.width) if image.getpixel((x, y)) < 128]
    xs = [x / image.width for x, _ in dark]
    ys = [y / image.height for _, y in dark]
    assert box[0] - 0.01 <= min(xs) and max(xs) <= box[2] + 0.01
    assert box[1] - 0.01 <= min(ys) and max(ys) <= box[3] + 0.01
    pdf.close()


def test_crop_box_offsets_and_hides():  # T-P4
    w = PdfWriter()
    p = w.page(cropbox=(50, 50, 562, 742))
    p.text(60, 731, "Inside the crop")
    p.text(72, 760, "Above the crop")
    p.text(10, 300, "Left of crop")
    answer = chunk(w.to_bytes())
    got = pieces(answer)
    assert [pc.text for pc in got] == ["Inside the crop"]
    b = got[0].bbox
    assert b[0] == pytest.approx(10 / 512, abs=0.01)
    assert b[1] < 0.03


def test_two_columns_never_fuse():  # T-P5
    w = PdfWriter()
    p = w.page()
    for k in range(6):
        y = 700 - 14 * k
        # written row by row, so PDFium puts both columns on one of its lines
        p.text(72, y, f"left column words {k}").text(320, y, f"right column words {k}")
    got = texts(chunk(w.to_bytes()))
    assert len(got) == 12
    assert all(("left" in t) != ("right" in t) for t in got)
    assert got[:6] == [f"left column words {k}" for k in range(6)]
    assert got[6:] == [f"right column words {k}" for k in range(6)]


def test_vertical_label_is_one_line():  # T-P6
    w = PdfWriter()
    p = w.page()
    p.text(72, 700, "Horizontal body text")
    p.rotated_text(40, 300, "VERTICAL LABEL")
    got = pieces(chunk(w.to_bytes()))
    assert [pc.text for pc in got] == ["Horizontal body text", "VERTICAL LABEL"]
    b = got[1].bbox
    assert b[3] - b[1] > 3 * (b[2] - b[0])


def image_only_pdf() -> bytes:
    w = PdfWriter()
    data = gray_image(40, 20, lambda x, y: 5 < x < 35 and 5 < y < 15)
    w.page().image(100, 500, 200, 100, 40, 20, data)
    return w.to_bytes()


def test_scanned_page_read_by_ocr_is_left_to_lines():  # T-P7 (pdf@1 side; OCR in test_ocr_reader)
    from ingest_pipeline.chunkers.lines import LinesChunker

    content = image_only_pdf()
    (reader_page,) = text_pages(content)
    assert reader_page.status == "unreadable"
    ocr_page = PageOutput(
        page=1,
        status="read",
        reader="rapidocr@1",
        text="SCANNED",
        lines=(LocatedLine("SCANNED", (100, 200, 400, 240), space=(1020, 1320)),),
    )
    assert chunk(content, (ocr_page,)) == ()
    (claim,) = LinesChunker().chunk(content, PDF, (ocr_page,))
    assert claim.page == 1 and claim.pieces[0].text == "SCANNED"


@pytest.mark.parametrize(
    "content",
    [b"", b"%PDF-1.7\n1 0 obj <<", b"\x00garbage" * 100, invoice_pdf()[:200], b"not a pdf at all"],
    ids=["empty", "truncated-header", "garbage", "truncated", "text"],
)
def test_bad_bytes_give_nothing_and_never_raise(content):  # T-P8
    page = PageOutput(page=1, status="read", reader="pdfium_text@1", text="x")
    assert PdfLinesChunker().chunk(content, PDF, (page,)) == ()


def test_blank_page_gives_no_chunk_and_no_image():  # T-P9
    w = PdfWriter()
    w.page().text(72, 700, "Page one")
    w.page()
    content = w.to_bytes()
    pages = text_pages(content)
    assert pages[1].status == "blank"
    answer = chunk(content, pages)
    assert [pc.page for pc in answer] == [1]


def failed(page: int = 1) -> PageOutput:
    return PageOutput(page=page, status="failed", reader="pdfium_text@1", reason="test says so")


def png_size(data: bytes) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        assert im.format == "PNG"
        return im.size


def test_failed_page_renders_to_png_at_120_dpi(monkeypatch):  # T-D1
    monkeypatch.delenv("INGEST_CHUNK_DPI", raising=False)
    w = PdfWriter()
    w.page().text(72, 700, "Letter page")
    w.page(rotate=90).text(72, 700, "Rotated page")
    content = w.to_bytes()
    answer = chunk(content, (failed(1), failed(2)))
    first, second = (pc.pieces for pc in answer)
    assert len(first) == 1 and first[0].is_image and first[0].text is None
    assert first[0].bbox == (0.0, 0.0, 1.0, 1.0)
    assert png_size(first[0].image) == (1020, 1320)
    assert png_size(second[0].image) == (1320, 1020)


def test_unreadable_page_renders_too():
    content = image_only_pdf()
    (page,) = text_pages(content)
    (answer,) = chunk(content, (page,))
    assert answer.pieces[0].is_image


def test_dpi_env_halves_the_pixels(monkeypatch):  # T-D2
    monkeypatch.setenv("INGEST_CHUNK_DPI", "60")
    content = invoice_pdf()
    (answer,) = chunk(content, (failed(),))
    assert png_size(answer.pieces[0].image) == (510, 660)


def test_render_failure_costs_only_that_page(monkeypatch):  # T-D3
    from ingest_pipeline.stages.merge import Claim, merge_claims

    def broken(pdf, index, scale):
        raise RuntimeError("renderer exploded")

    monkeypatch.setattr(PdfLinesChunker, "render", staticmethod(broken))
    w = PdfWriter()
    w.page().text(72, 700, "Readable page")
    w.page().text(72, 700, "Failed page")
    content = w.to_bytes()
    pages = (text_pages(content)[0], failed(2))
    answer = chunk(content, pages)
    assert [pc.page for pc in answer] == [1]
    chunk_map = merge_claims("doc", pages, [Claim("pdf@1", "h", answer)])
    assert [c.page for c in chunk_map.chunks] == [1]


@requires_corpus
def test_encrypted_pdf_is_read_with_the_password_its_content_carries():
    import pickle

    from ingest_pipeline.contract import SourceBytes
    from ingest_pipeline_tests.conftest import CORPUS

    path = CORPUS / "files/pdf/pypdf-samples__libreoffice-writer-password.pdf"
    content = path.read_bytes()
    pages = PdfTextReader().read(content, PDF, ReadOptions(password="openpassword"))
    assert PdfLinesChunker().chunk(content, PDF, pages) == ()  # no password: not mine
    assert PdfLinesChunker().chunk(SourceBytes(content, "wrong"), PDF, pages) == ()
    keyed = SourceBytes(content, "openpassword")
    assert "openpassword" not in repr(keyed) and keyed == content
    answer = PdfLinesChunker().chunk(keyed, PDF, pages)
    assert answer and answer[0].pieces
    # the parse worker gets it pickled: the password travels with the bytes
    assert PdfLinesChunker().chunk(pickle.loads(pickle.dumps(keyed)), PDF, pages) == answer


def test_chunker_modules_import_no_parser():
    code = (
        "import sys\n"
        "import ingest_pipeline.chunkers.pdf.page_layer, ingest_pipeline.chunkers.pdf.lines\n"
        "import ingest_pipeline.chunkers.pdf.paragraphs, ingest_pipeline.chunkers.pdf.tables\n"
        "import ingest_pipeline.chunkers.lines\n"
        "import ingest_pipeline.layout.pdfium_text, "
        "ingest_pipeline.layout.paragraphs, ingest_pipeline.layout.ruled_tables\n"
        "import ingest_pipeline.readers.ocr\n"
        "heavy = ('pypdfium2', 'rapidocr_onnxruntime', 'numpy', 'PIL', 'cv2', 'onnxruntime')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
