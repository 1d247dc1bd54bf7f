"""The page layer the PDF versions read through: what one version laid out, another holding
the same layer takes instead of laying it out again."""

from __future__ import annotations

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.pdf.lines import PdfLinesChunker
from ingest_pipeline.chunkers.pdf.page_layer import PageLayer, PageLinesMemo
from ingest_pipeline.chunkers.pdf.paragraphs import PdfParagraphsChunker
from ingest_pipeline.chunkers.pdf.passages import PdfPassagesChunker
from ingest_pipeline.chunkers.pdf.tables import PdfTablesChunker
from ingest_pipeline_tests.chunkers.pdf.test_pdf_lines import chunk, text_pages, texts
from ingest_pipeline_tests.pdf_writer import PdfWriter

PDF = mt.PDF


def two_pages(tables: bool = False) -> bytes:
    """Two pages of a heading and body lines; with ``tables``, a ruled table of figures too."""
    w = PdfWriter()
    for n in range(2):
        p = w.page()
        p.glyphs(72, 740, f"Part {n + 1}. Heating", size=16)
        if tables:
            p.text(72, 716, "The table below lists the quarterly figures.", 10)
            p.grid([72, 250, 400], [700 - 20 * r for r in range(4)])
            p.text(76, 685, "Quarter", 10).text(254, 685, "Revenue", 10)
            for r in (1, 2):
                p.text(76, 685 - 20 * r, f"quarter {r}", 10).text(254, 685 - 20 * r, f"{r * 1000}.00", 10)
        top = 600 if tables else 700
        for i in range(4 if tables else 6):
            p.glyphs(72, top - 18 * i, f"The greenhouse boiler {n}-{i} keeps the night temperature up.")
    return w.to_bytes()


def counts(layer: PageLayer) -> tuple[int, int]:
    return layer.lines.hits, layer.lines.misses


def test_the_pdf_versions_given_one_layer_share_each_pages_lines_and_answer_exactly_as_alone():
    """pdf@1-4 given one layer lay out the same pages: the first to reach a page extracts its
    lines, the others take a copy (the layout steps change their lines, so a copy must be
    fresh), and each version's answer is the one it gives alone. Other bytes never hit."""
    content = two_pages()
    pages = text_pages(content)
    layer = PageLayer()
    versions = [
        PdfParagraphsChunker(layer=layer),
        PdfLinesChunker(layer=layer),
        PdfTablesChunker(layer=layer),
        PdfPassagesChunker(layer=layer),
    ]
    alone = [type(version)(layer=PageLayer()).chunk(content, PDF, pages) for version in versions]
    assert all(alone) and len({repr(a) for a in alone}) == 3  # pdf@3 is pdf@2 on a page without ruled tables

    shared = [version.chunk(content, PDF, pages) for version in versions]
    assert shared == alone
    assert counts(layer) == (2 * (len(versions) - 1), 2)  # each page extracted once, by the first version

    other = PdfWriter()
    other.page().glyphs(72, 740, "Part 1. Heating", size=16)
    assert texts(chunk(other.to_bytes(), chunker=PdfLinesChunker(layer=layer))) == ["Part 1. Heating"]
    assert counts(layer) == (2 * (len(versions) - 1), 3)


def test_pdf4_places_the_tables_and_weights_the_others_found_without_loading_a_page(monkeypatch):
    """After pdf@1 and pdf@3 have laid out a document through a layer, pdf@4 given that
    layer takes their lines, ruled tables and each line's font weight from it and loads no
    page, and answers exactly as it does alone (a bold heading and a ruled table included).
    Given a fresh layer instead, it loads the pages itself."""
    import pypdfium2

    content = two_pages(tables=True)
    pages = text_pages(content)
    alone = PdfPassagesChunker(layer=PageLayer()).chunk(content, PDF, pages)
    assert any(piece.layout.role == "table" for pc in alone for piece in pc.pieces)
    assert any(piece.header_path for pc in alone for piece in pc.pieces)

    layer = PageLayer()
    PdfLinesChunker(layer=layer).chunk(content, PDF, pages)
    PdfTablesChunker(layer=layer).chunk(content, PDF, pages)
    loads = []
    real = pypdfium2.PdfDocument.__getitem__
    monkeypatch.setattr(pypdfium2.PdfDocument, "__getitem__", lambda pdf, i: loads.append(i) or real(pdf, i))
    shared = PdfPassagesChunker(layer=layer).chunk(content, PDF, pages)
    assert loads == []
    assert shared == alone
    assert PdfPassagesChunker(layer=PageLayer()).chunk(content, PDF, pages) == alone
    assert sorted(set(loads)) == [0, 1]


def test_the_kept_lines_stay_within_their_limit_oldest_page_out_first(monkeypatch):
    from ingest_pipeline.layout.lines import Line

    memo = PageLinesMemo()
    line = Line("x" * 1000, 0.0, 0.0, 1.0, 1.0, 0, 10.0)
    one_page = memo._size(((line.text,),))
    monkeypatch.setattr(PageLinesMemo, "LIMIT", 8 * one_page + 1)
    for index in range(12):
        memo.put((b"doc", index), [line], None, 1000, "chars")
    assert memo._bytes <= PageLinesMemo.LIMIT
    assert memo.get((b"doc", 0)) is None and memo.get((b"doc", 3)) is None  # the oldest went first
    kept = memo.get((b"doc", 11))
    assert kept is not None and kept[0] == [line] and kept[0][0] is not line  # a fresh copy
    kept[0][0].role = "heading"
    assert memo.get((b"doc", 11))[0][0].role == "body"
