"""The page layer the PDF versions read through: what one version laid out, another holding
the same layer takes instead of laying it out again; a version holding another layer sees
none of it; and a layer crosses to the parse worker as a reference, never its contents."""

from __future__ import annotations

import pickle

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.pdf.lines import PdfLinesChunker
from ingest_pipeline.chunkers.pdf.page_layer import PageLayer, PageLinesMemo, process_layer
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


def test_a_version_given_another_layer_sees_none_of_the_pages_the_first_laid_out():
    """Sharing is only through a layer both versions were given: pdf@4 with a fresh layer
    extracts every page pdf@3 laid out in its own, and neither touches the process's layer."""
    content = two_pages(tables=True)
    pages = text_pages(content)
    process_before = counts(process_layer())
    first, second = PageLayer(), PageLayer()
    tables = PdfTablesChunker(layer=first).chunk(content, PDF, pages)
    assert counts(first) == (0, 2)
    passages = PdfPassagesChunker(layer=second).chunk(content, PDF, pages)
    assert counts(second) == (0, 2) and counts(first) == (0, 2)
    assert first.extras.hits == 0
    assert counts(process_layer()) == process_before

    assert PdfPassagesChunker(layer=first).chunk(content, PDF, pages) == passages
    assert counts(first) == (2, 2)  # given the first layer, pdf@4 takes pdf@3's pages
    assert PdfTablesChunker(layer=second).chunk(content, PDF, pages) == tables
    assert counts(second) == (2, 2)  # and pdf@3 takes what pdf@4 laid out


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


def test_a_pdf_chunker_reads_through_its_processs_layer_unless_given_one():
    """The registry builds each version without arguments and rebuilds it to configure it:
    every PDF version it holds reads through the process's layer, configured or not. A
    chunker given its own layer keeps it."""
    from ingest_pipeline.readers import reader_ids
    from ingest_pipeline.registry import ChunkerRegistry

    registry = ChunkerRegistry.discover(reserved_ids=reader_ids())
    pdf = [c for c in registry.all() if c.id == "pdf"]
    assert sorted(c.version for c in pdf) == [1, 2, 3, 4]
    assert all(c.layer is process_layer() for c in pdf)
    configured = registry.configured({"pdf@3": {"max_table_chars": 500}}).get("pdf@3")
    assert configured.config.max_table_chars == 500 and configured.layer is process_layer()
    own = PageLayer()
    assert PdfTablesChunker({"max_table_chars": 500}, layer=own).layer is own


def test_a_layer_crosses_to_another_process_as_a_reference_never_its_contents():
    """Pickled (as the chunks step sends a version to the parse worker), the process's layer
    arrives as the receiving process's own layer; any other layer arrives fresh and empty."""
    content = two_pages()
    pages = text_pages(content)
    default = pickle.loads(pickle.dumps(PdfPassagesChunker()))
    assert default.layer is process_layer()

    own = PageLayer()
    chunker = PdfLinesChunker(layer=own)
    answer = chunker.chunk(content, PDF, pages)
    assert own.lines._kept
    copy = pickle.loads(pickle.dumps(chunker))
    assert copy.layer is not own and copy.layer is not process_layer()
    assert not copy.layer.lines._kept and counts(copy.layer) == (0, 0)
    assert copy.chunk(content, PDF, pages) == answer


def _chunked_here(chunker, content: bytes, pages):
    """In the parse worker: a version's answer, whether it read through the worker's own
    layer, and that layer's line memo counts after it."""
    answer = chunker.chunk(content, PDF, pages)
    return answer, chunker.layer is process_layer(), counts(chunker.layer)


def test_in_the_parse_worker_the_versions_meet_in_its_processs_layer():
    """The versions a worker serves, each sent to it pickled for one document, share the
    worker's process layer: pdf@4 asked after pdf@3 takes the pages pdf@3 laid out there. A
    version holding a layer of its own gets a fresh one in the worker, shared with nobody."""
    from ingest_pipeline.runtime.isolation import ParseWorker

    content = two_pages(tables=True)
    pages = text_pages(content)
    worker = ParseWorker(60.0, None)
    try:
        tables, shared, seen = worker.call(_chunked_here, PdfTablesChunker(), content, pages)
        assert shared and seen == (0, 2)
        passages, shared, seen = worker.call(_chunked_here, PdfPassagesChunker(), content, pages)
        assert shared and seen == (2, 2)
        lines, shared, seen = worker.call(_chunked_here, PdfLinesChunker(layer=PageLayer()), content, pages)
        assert not shared and seen == (0, 2)
    finally:
        worker.close()
    assert tables == PdfTablesChunker(layer=PageLayer()).chunk(content, PDF, pages)
    assert passages == PdfPassagesChunker(layer=PageLayer()).chunk(content, PDF, pages)
    assert lines == PdfLinesChunker(layer=PageLayer()).chunk(content, PDF, pages)


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
