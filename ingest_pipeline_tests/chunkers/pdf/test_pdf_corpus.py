"""pdf@1/2/3, OCR and lines@1 over every PDF of ../shared/corpus/files/pdf.

Boxes validate; on born-digital pages at least 95% of the words PDFium's own
get_text_range reads appear in that page's chunks; the image-only pages FACTS.tsv lists
come out as OCR line chunks with boxes (or page images), never as nothing; bad files end
as clean errors; encrypted files open with the passwords FACTS.tsv lists.
"""

from __future__ import annotations

import csv
import json
import re

import pytest

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.lines import LinesChunker
from ingest_pipeline.chunkers.page import PageChunker
from ingest_pipeline.chunkers.pdf.lines import PdfLinesChunker
from ingest_pipeline.chunkers.pdf.paragraphs import PdfParagraphsChunker
from ingest_pipeline.chunkers.pdf.tables import PdfTablesChunker
from ingest_pipeline.contract import SourceBytes, validate_bbox
from ingest_pipeline.readers import read_pages
from ingest_pipeline.readers.base import ReadOptions
from ingest_pipeline.readers.pdf import DocumentError
from ingest_pipeline.stages.merge import Claim, merge_claims
from ingest_pipeline_tests.conftest import CORPUS, requires_corpus

PDF_DIR = CORPUS / "files" / "pdf"
pytestmark = requires_corpus

WORD = re.compile(r"\w+")
HYPHEN = "\ufffe"  # PDFium's mark for a hyphen it joined across a line end


def facts() -> dict[str, dict]:
    out = {}
    with open(CORPUS / "FACTS.tsv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["kind"] == "pdf":
                out[row["relpath"].rsplit("/", 1)[-1]] = json.loads(row["facts_json"])
    return out


FACTS = facts() if PDF_DIR.exists() else {}
NAMES = sorted(p.name for p in PDF_DIR.glob("*.pdf")) if PDF_DIR.exists() else []
OPENABLE = [n for n in NAMES if "open" not in FACTS.get(n, {})]


@pytest.fixture(scope="module")
def corpus():
    """name -> (bytes, password, pages) for every PDF that opens; OCR runs once here."""
    out = {}
    for name in OPENABLE:
        content = (PDF_DIR / name).read_bytes()
        password = FACTS.get(name, {}).get("password")
        pages = read_pages(content, mt.PDF, ReadOptions(name=name, password=password))
        out[name] = (content, password, pages)
    return out


@pytest.fixture(scope="module")
def answers(corpus):
    """name -> {chunker ref -> answer}, each chunker run once per document."""
    chunkers = {
        "pdf@1": PdfLinesChunker(),
        "pdf@2": PdfParagraphsChunker(),
        "pdf@3": PdfTablesChunker(),
        "lines@1": LinesChunker(),
        "page@1": PageChunker(),
    }
    out = {}
    for name, (content, password, pages) in corpus.items():
        keyed = SourceBytes(content, password)
        out[name] = {ref: c.chunk(keyed, mt.PDF, pages) for ref, c in chunkers.items()}
    return out


def reference_words(
    content: bytes, password: str | None
) -> dict[int, tuple[list[str], dict[str, tuple[str, str]]]]:
    """Per page: the words of PDFium's get_text_range, and for the words it joined over
    a hyphenated line end, their two printed halves."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(content, password=password)
    try:
        out = {}
        for i in range(len(pdf)):
            page = pdf[i]
            textpage = page.get_textpage()
            text = textpage.get_text_range()
            textpage.close()
            page.close()
            halves = {
                m.group(1) + m.group(2): (m.group(1), m.group(2))
                for m in re.finditer(r"(\w+)\ufffe(\w+)", text)
            }
            out[i + 1] = (WORD.findall(text.replace(HYPHEN, "")), halves)
        return out
    finally:
        pdf.close()


def chunk_words(text: str) -> set[str]:
    """Words of chunk text, also with words split by a hyphen at a line end rejoined."""
    joined = re.sub(r"(\w)-\s+(\w)", r"\1\2", text)
    return set(WORD.findall(text)) | set(WORD.findall(joined))


def test_every_corpus_pdf_is_accounted_for():
    assert len(NAMES) >= 15
    assert set(OPENABLE) | {n for n in NAMES if "open" in FACTS.get(n, {})} == set(NAMES)


def test_every_box_validates(answers):
    for name, by_ref in answers.items():
        for ref, answer in by_ref.items():
            for pc in answer:
                for piece in pc.pieces:
                    if piece.bbox is not None:
                        assert validate_bbox(piece.bbox) == piece.bbox, (name, ref, pc.page)
                    else:
                        assert piece.bbox_reason, (name, ref, pc.page)
                    if piece.layout and piece.layout.table:
                        for cell in piece.layout.table.cells:
                            if cell.bbox is not None:
                                validate_bbox(cell.bbox)


@pytest.mark.parametrize("ref", ["pdf@1", "pdf@2", "pdf@3"])
def test_born_digital_pages_keep_95_percent_of_their_words(corpus, answers, ref):
    shares = []
    for name, (content, password, pages) in corpus.items():
        reference = reference_words(content, password)
        claimed = {pc.page: pc for pc in answers[name][ref]}
        for page in pages:
            words, halves = reference[page.page]
            if page.status != "read" or not page.reader.startswith("pdfium_text") or len(words) < 5:
                continue
            assert page.page in claimed, (name, page.page, ref)
            have = chunk_words(" ".join(p.text or "" for p in claimed[page.page].pieces))
            misses = [
                w for w in words if w not in have and not (w in halves and all(h in have for h in halves[w]))
            ]
            shares.append((1 - len(misses) / len(words), name, page.page, misses[:8]))
    shares.sort()
    assert len(shares) > 150
    assert shares[0][0] >= 0.95, shares[:3]


def test_image_only_pages_come_out_as_ocr_lines_or_images(corpus, answers):
    expected = {n: f for n, f in FACTS.items() if f.get("pages_without_text")}
    assert "docling__ocr_test.pdf" in expected and "docling__nemotron_multipage.pdf" in expected
    for name in expected:
        content, password, pages = corpus[name]
        by_ref = answers[name]
        order = ["pdf@1", "lines@1", "page@1"]  # the default order of these chunkers
        chunk_map = merge_claims(name, pages, [Claim(ref, "h", by_ref[ref]) for ref in order])
        for page in pages:
            if page.status == "blank":
                continue  # nothing on it at all (redp5110 page 17 renders pure white)
            got = [c for c in chunk_map.chunks if c.page == page.page]
            assert got, (name, page.page)
            if page.reader.startswith("rapidocr"):
                assert chunk_map.page_owner[page.page] == "lines@1"
                assert all(c.piece.text and c.piece.bbox for c in got)
            elif page.status == "unreadable":
                assert all(c.piece.is_image for c in got)
    nemotron = corpus["docling__nemotron_multipage.pdf"][2]
    assert all(p.reader == "rapidocr@1" and p.lines for p in nemotron)


def test_bad_files_end_as_clean_errors():
    unreadable = (PDF_DIR / "pypdf-samples__unreadablemetadata.pdf").read_bytes()
    for content in (unreadable, b"", b"%PDF-1.4\n%%EOF\n", b"junk" * 500):
        with pytest.raises(DocumentError):
            read_pages(content, mt.PDF, ReadOptions())
        page_free = ()
        assert PdfLinesChunker().chunk(content, mt.PDF, page_free) == ()
    from ingest_pipeline.contract import PageOutput

    claimed = (PageOutput(page=1, status="read", reader="pdfium_text@1", text="x"),)
    for chunker in (PdfLinesChunker(), PdfParagraphsChunker(), PdfTablesChunker()):
        assert chunker.chunk(unreadable, mt.PDF, claimed) == ()


def test_junk_before_the_header_reads_like_the_clean_file(corpus):
    content, _, pages = corpus["pypdf-samples__multicolumn.pdf"]
    junked = b"JUNK" * 64 + content
    assert mt.detect(junked, "x.pdf") == mt.PDF
    again = read_pages(junked, mt.PDF, ReadOptions())
    assert [p.text for p in again] == [p.text for p in pages]
    assert PdfLinesChunker().chunk(junked, mt.PDF, again) == PdfLinesChunker().chunk(content, mt.PDF, pages)


def test_encrypted_pdfs_need_and_take_their_passwords(corpus, answers):
    encrypted = [n for n, f in FACTS.items() if f.get("encrypted")]
    assert len(encrypted) == 2
    for name in encrypted:
        content = (PDF_DIR / name).read_bytes()
        with pytest.raises(DocumentError, match="password") as err:
            read_pages(content, mt.PDF, ReadOptions(name=name))
        password = FACTS[name]["password"]
        with pytest.raises(DocumentError) as wrong:
            read_pages(content, mt.PDF, ReadOptions(name=name, password="wrong-" + password))
        assert password not in str(err.value) and password not in str(wrong.value)
        _, _, pages = corpus[name]
        assert all(p.status == "read" for p in pages)
        assert answers[name]["pdf@1"] and all(pc.pieces for pc in answers[name]["pdf@1"])


def test_invisible_text_is_indexed_with_its_box(answers):
    """Policy: invisible text (the OCR layer of a searchable scan) is what a search
    should find, so pdf@1 keeps it as lines with the boxes it occupies."""
    (page,) = answers["docling__invisible_text_layer.pdf"]["pdf@1"]
    assert [p.text for p in page.pieces] == ["Visible heading line", "Invisible OCR text layer"]
    assert page.pieces[0].bbox[1] < page.pieces[1].bbox[1]


def test_tables_of_the_corpus_are_found(answers):
    tables = [
        p
        for pc in answers["docling__redp5110_sampled.pdf"]["pdf@3"]
        for p in pc.pieces
        if p.layout and p.layout.role == "table"
    ]
    assert len(tables) >= 4
    first_rows = {t.text.split("\n", 1)[0] for t in tables}
    assert "Column name\tData type\tDescription" in first_rows
    assert all(t.layout.table.cols >= 2 and t.layout.table.rows >= 2 for t in tables)
