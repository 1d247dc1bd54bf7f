import io
import zipfile

import pytest

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.page import PageChunker
from ingest_pipeline.contract import PageOutput
from ingest_pipeline.readers import UnsupportedMediaType, read_pages
from ingest_pipeline.readers.base import ReadOptions, password_for
from ingest_pipeline.readers.pdf import DocumentError
from ingest_pipeline.readers.text import decode_text
from ingest_pipeline_tests.conftest import pdf_bytes


def test_media_type_comes_from_the_bytes_not_the_name():
    pdf = pdf_bytes([["hello"]])
    assert mt.detect(pdf, "notes.txt") == mt.PDF
    assert mt.detect(b"junk before header\n" + pdf, "x.bin") == mt.PDF
    assert mt.detect(b"a,b\n1,2\n", "table.csv") == mt.CSV
    assert mt.detect(b"# Title\n", "readme.md") == mt.MARKDOWN
    assert mt.detect(b"plain words", "no_suffix") == mt.TEXT
    assert mt.detect(b"\x00\x01\x02\x03binary", "x.csv") == mt.UNKNOWN
    assert mt.detect(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 50, "book.xlsx") == mt.OLE2
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("word/document.xml", "<w/>")
    assert mt.detect(buffer.getvalue(), "renamed.zip") == mt.DOCX


def test_text_decoding_handles_boms_utf16_and_latin1():
    assert decode_text("é,ü\n".encode("utf-8-sig"))[:2] == ("é,ü\n", "utf-8-sig")
    assert decode_text("a\tb\n".encode("utf-16"))[0] == "a\tb\n"
    text, encoding, note = decode_text("café".encode("latin-1"))
    assert text == "café" and note and "Latin-1" in note
    assert decode_text(b"plain")[2] is None


def test_text_reader_gives_one_page_and_blank_for_whitespace():
    (page,) = read_pages("# T\r\nbody\r\n".encode(), mt.MARKDOWN)
    assert page.status == "read" and page.text == "# T\nbody\n" and page.reader == "text@1"
    (blank,) = read_pages(b"  \n\n", mt.TEXT)
    assert blank.status == "blank" and blank.text == ""


def test_pdf_reader_reads_pages_and_marks_blank_ones():
    pages = read_pages(pdf_bytes([["First page text"], [], ["Third page"]]), mt.PDF)
    assert [p.status for p in pages] == ["read", "blank", "read"]
    assert "First page text" in pages[0].text
    assert pages[0].reader == "pdfium_text@1" and pages[0].width == 612 and pages[0].height == 792


def test_pdf_reader_accepts_junk_before_the_header():
    pages = read_pages(b"garbage\x00\x01" * 10 + pdf_bytes([["Hello there"]]), mt.PDF)
    assert "Hello there" in pages[0].text


@pytest.mark.parametrize("content", [b"", b"%PDF-1.4\n1 0 obj\n<<", b"not a pdf at all"])
def test_pdf_reader_raises_a_clear_document_error(content):
    with pytest.raises(DocumentError):
        read_pages(content, mt.PDF)


def test_unknown_media_types_are_refused_clearly():
    with pytest.raises(UnsupportedMediaType, match="application/octet-stream"):
        read_pages(b"\x00\x01", mt.UNKNOWN)


def test_passwords_match_by_name_path_or_glob():
    passwords = {"secret.pdf": "a", "reports/*.pdf": "b", "*-locked.xlsx": "c"}
    assert password_for("folder/secret.pdf", passwords) == "a"
    assert password_for("reports/q3.pdf", passwords) == "b"
    assert password_for("x/y/book-locked.xlsx", passwords) == "c"
    assert password_for("open.pdf", passwords) is None
    assert "hunter2" not in repr(ReadOptions(name="x", password="hunter2"))


def test_page_chunker_one_chunk_per_readable_non_blank_page():  # T-N3
    pages = (
        PageOutput(page=1, status="read", reader="r@1", text="alpha beta"),
        PageOutput(page=2, status="blank", reader="r@1", text=""),
        PageOutput(page=3, status="failed", reader="r@1", reason="x"),
        PageOutput(page=4, status="read", reader="r@1", text="gamma"),
    )
    answer = PageChunker().chunk(b"", "text/plain", pages)
    assert [(a.page, a.pieces[0].text, a.pieces[0].bbox_reason) for a in answer] == [
        (1, "alpha beta", "no_geometry"),
        (4, "gamma", "no_geometry"),
    ]
