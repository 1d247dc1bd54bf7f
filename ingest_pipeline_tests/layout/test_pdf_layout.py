"""pdf@2 paragraphs (T-L1, T-L2) and pdf@3 ruled tables (T-R1..T-R4), on written PDFs."""

from __future__ import annotations

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.page import PageChunker
from ingest_pipeline.chunkers.pdf.lines import PdfLinesChunker
from ingest_pipeline.chunkers.pdf.paragraphs import PdfParagraphsChunker
from ingest_pipeline.chunkers.pdf.tables import PdfTablesChunker
from ingest_pipeline.contract import PageOutput, validate_bbox
from ingest_pipeline.registry import ChunkerRegistry
from ingest_pipeline.stages.merge import Claim, merge_claims
from ingest_pipeline_tests.chunkers.pdf.test_pdf_lines import text_pages
from ingest_pipeline_tests.pdf_writer import PdfWriter

PDF = mt.PDF


def two_paragraphs(page) -> None:
    page.text(72, 700, "The first paragraph has two lines of text")
    page.text(72, 686, "and this is its second line.")
    page.text(72, 650, "The second paragraph stands after a blank gap.")


def test_two_paragraphs_two_chunks_union_box():  # T-L1
    w = PdfWriter()
    two_paragraphs(w.page())
    content = w.to_bytes()
    pages = text_pages(content)
    (answer,) = PdfParagraphsChunker().chunk(content, PDF, pages)
    assert [p.text for p in answer.pieces] == [
        "The first paragraph has two lines of text and this is its second line.",
        "The second paragraph stands after a blank gap.",
    ]
    (lines,) = PdfLinesChunker().chunk(content, PDF, pages)
    first, second = lines.pieces[0].bbox, lines.pieces[1].bbox
    union = (
        min(first[0], second[0]),
        min(first[1], second[1]),
        max(first[2], second[2]),
        max(first[3], second[3]),
    )
    assert answer.pieces[0].bbox == union
    assert answer.pieces[0].layout.role == "paragraph"


def test_columns_headers_and_hyphens():
    w = PdfWriter()
    for n in range(3):
        p = w.page()
        p.text(72, 770, "ACME annual report", 9)
        p.text(300, 30, f"Page {n + 1}", 9)
        for k in range(5):
            left = {2: "hyphen-", 3: "ated words"}.get(k, f"left paragraph line {k}")
            p.text(72, 700 - 14 * k, left)
            p.text(320, 700 - 14 * k, f"right paragraph line {k}")
        p.text(72, 629, "continued body", 12)
    content = w.to_bytes()
    answer = PdfParagraphsChunker().chunk(content, PDF, text_pages(content))
    for pc in answer:
        got = [(p.text, p.layout.role) for p in pc.pieces]
        assert got[0] == ("ACME annual report", "page_header")
        assert got[-1][1] == "page_footer" and got[-1][0].startswith("Page")
        body = [t for t, role in got if role == "paragraph"]
        assert not any("left" in t and "right" in t for t in body)
        assert body[0] == (
            "left paragraph line 0 left paragraph line 1 "
            "hyphenated words left paragraph line 4 continued body"
        )
        assert body[1].startswith("right paragraph line 0") and body[1].endswith("line 4")


def test_named_pdf2_leads_and_pdf1_still_renders_the_failed_page():  # T-L2
    w = PdfWriter()
    two_paragraphs(w.page())
    two_paragraphs(w.page())
    content = w.to_bytes()
    read = text_pages(content)
    pages = (read[0], PageOutput(page=2, status="failed", reader="pdfium_text@1", reason="test"))
    registry = ChunkerRegistry()
    for chunker in (PdfLinesChunker(), PdfParagraphsChunker(), PageChunker()):
        registry.register(chunker)

    def run(named):
        claims = [
            Claim(f"{c.id}@{c.version}", "h", c.chunk(content, PDF, pages)) for c in registry.order_for(named)
        ]
        return merge_claims("doc", pages, claims)

    default = run([])
    assert default.page_owner == {1: "pdf@1", 2: "pdf@1"}
    layout = run(["pdf@2"])
    assert layout.page_owner == {1: "pdf@2", 2: "pdf@1"}
    page1 = [c for c in layout.chunks if c.page == 1]
    page2 = [c for c in layout.chunks if c.page == 2]
    assert len(page1) == 2 and all(c.piece.text for c in page1)
    assert len(page2) == 1 and page2[0].piece.is_image


def grid_page(page, skip=()):
    xs = [72, 200, 320]
    ys = [600, 580, 560, 540]
    page.grid(xs, ys, skip=skip)
    rows = [("Item", "Amount"), ("Widget", "100.00"), ("Gadget", "1,150.00")]
    for r, (a, b) in enumerate(rows):
        y = 585 - 20 * r
        if skip and r == 0:
            page.text(76, y, "Merged header across", 10)
        else:
            page.text(76, y, a, 10)
            page.text(204, y, b, 10)


def test_ruled_grid_is_one_table_piece():  # T-R1
    w = PdfWriter()
    grid_page(w.page())
    content = w.to_bytes()
    (answer,) = PdfTablesChunker().chunk(content, PDF, text_pages(content))
    tables = [p for p in answer.pieces if p.layout and p.layout.role == "table"]
    assert len(tables) == 1
    table = tables[0]
    assert table.text == "Item\tAmount\nWidget\t100.00\nGadget\t1,150.00"
    grid = table.layout.table
    assert (grid.rows, grid.cols) == (3, 2)
    cells = {(c.row, c.col): c for c in grid.cells}
    assert cells[(0, 0)].text == "Item" and cells[(2, 1)].text == "1,150.00"
    assert cells[(0, 0)].header and not cells[(1, 0)].header
    tx0, ty0, tx1, ty1 = table.bbox
    for c in grid.cells:
        x0, y0, x1, y1 = validate_bbox(c.bbox)
        assert tx0 <= x0 < x1 <= tx1 and ty0 <= y0 < y1 <= ty1


def test_single_rule_is_no_table():  # T-R2
    w = PdfWriter()
    p = w.page()
    p.text(72, 700, "Underlined heading")
    p.line(72, 696, 300, 696)
    p.rect(72, 600, 200, 50)  # a frame around nothing is no table either
    content = w.to_bytes()
    (answer,) = PdfTablesChunker().chunk(content, PDF, text_pages(content))
    assert all(p.layout.role != "table" for p in answer.pieces)
    assert [p.text for p in answer.pieces] == ["Underlined heading"]


def test_missing_rule_segment_is_a_colspan():  # T-R3
    w = PdfWriter()
    grid_page(w.page(), skip={(1, 0)})  # the middle vertical rule is missing in row 0
    content = w.to_bytes()
    (answer,) = PdfTablesChunker().chunk(content, PDF, text_pages(content))
    (table,) = [p for p in answer.pieces if p.layout and p.layout.role == "table"]
    cells = {(c.row, c.col): c for c in table.layout.table.cells}
    assert cells[(0, 0)].col_span == 2 and cells[(0, 0)].text == "Merged header across"
    assert (0, 1) not in cells
    assert len(table.layout.table.cells) == 5
    assert table.text.splitlines()[0] == "Merged header across\t"


def test_text_outside_the_grid_stays_paragraphs():  # T-R4
    w = PdfWriter()
    p = w.page()
    two_paragraphs(p)
    grid_page(p)
    p.text(72, 480, "A closing paragraph under the table.")
    content = w.to_bytes()
    (answer,) = PdfTablesChunker().chunk(content, PDF, text_pages(content))
    roles = [p.layout.role for p in answer.pieces]
    assert roles == ["paragraph", "paragraph", "table", "paragraph"]
    assert answer.pieces[-1].text == "A closing paragraph under the table."


def test_long_table_split_repeats_the_header():
    w = PdfWriter()
    p = w.page()
    ys = [700 - 20 * k for k in range(13)]
    p.grid([72, 250, 400], ys)
    p.text(76, 685, "Name", 10).text(254, 685, "Value", 10)
    for r in range(1, 12):
        p.text(76, 685 - 20 * r, f"row {r} name", 10).text(254, 685 - 20 * r, f"{r * 10}.00", 10)
    content = w.to_bytes()
    chunker = PdfTablesChunker({"max_table_chars": 80})
    (answer,) = chunker.chunk(content, PDF, text_pages(content))
    parts = [p for p in answer.pieces if p.layout.role == "table"]
    assert len(parts) > 1
    body = []
    for part in parts:
        lines = part.text.splitlines()
        assert lines[0] == "Name\tValue"
        assert part.layout.table.header_rows == 1
        assert part.layout.table.rows == len(lines)
        body += lines[1:]
    assert body == [f"row {r} name\t{r * 10}.00" for r in range(1, 12)]
    assert chunker.config.max_table_chars == 80


def test_pdf2_and_pdf3_leave_unread_pages_alone():
    w = PdfWriter()
    two_paragraphs(w.page())
    content = w.to_bytes()
    pages = (PageOutput(page=1, status="unreadable", reader="pdfium_text@1", reason="no text layer"),)
    assert PdfParagraphsChunker().chunk(content, PDF, pages) == ()
    assert PdfTablesChunker().chunk(content, PDF, pages) == ()
    assert PdfParagraphsChunker().chunk(b"junk", PDF, text_pages(content)) == ()


def test_table_in_the_right_column_is_read_in_that_column():
    w = PdfWriter()
    p = w.page()
    for k in range(12):
        p.text(72, 700 - 14 * k, f"left column body line number {k}", 10)
    p.text(330, 700, "Right column text above the table", 10)
    p.text(330, 686, "continues on this second line.", 10)
    p.grid([330, 420, 520], [640, 620, 600])
    p.text(334, 625, "Name", 10).text(424, 625, "Value", 10)
    p.text(334, 605, "alpha", 10).text(424, 605, "12.5", 10)
    p.text(330, 560, "Right column text below the table.", 10)
    content = w.to_bytes()
    (answer,) = PdfTablesChunker().chunk(content, PDF, text_pages(content))
    got = [(p.layout.role, p.text.split()[0]) for p in answer.pieces]
    assert got[0] == ("paragraph", "left")
    assert [g for g in got if g[1] != "left"] == [
        ("paragraph", "Right"),
        ("table", "Name"),
        ("paragraph", "Right"),
    ]
    assert got.index(("table", "Name")) > max(i for i, g in enumerate(got) if g[1] == "left")


def test_the_rule_walk_counts_text_objects_toward_its_cap_and_finds_rules_after_them():
    """``page_rules`` passes over text objects without visiting them, yet counts them
    toward its cap on objects per page: 30 text runs then a rule, the rule is found with
    a cap of 31 objects and not with a cap of 30."""
    import ctypes

    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    from ingest_pipeline.layout.frames import page_frame
    from ingest_pipeline.layout.ruled_tables import page_rules

    w = PdfWriter()
    page = w.page()
    for i in range(30):
        page.text(72, 700 - 12 * i, f"line {i}", 10)
    page.line(72, 300, 400, 300)
    pdf = pdfium.PdfDocument(w.to_bytes())
    try:
        loaded = pdf[0]
        frame = page_frame(loaded)
        found = page_rules(loaded, frame, raw, ctypes, max_objects=31)
        assert [(r.horizontal, round(r.a), round(r.b)) for r in found] == [(True, 72, 400)]
        assert page_rules(loaded, frame, raw, ctypes, max_objects=30) == []
        loaded.close()
    finally:
        pdf.close()


def test_an_unchecked_pdfium_function_keeps_the_result_type_each_caller_asked_for():
    """``fast_function`` keeps a function per name and result type: the rule walk's
    handle type for ``FPDFPage_GetObject`` survives another caller asking for plain
    ``c_void_p`` (ints back, which the unchecked calls would cut to 32 bits)."""
    import ctypes

    import pypdfium2.raw as raw

    from ingest_pipeline.layout.pdfium_text import fast_function
    from ingest_pipeline.layout.ruled_tables import _handle_type

    plain = fast_function(raw, ctypes, "FPDFPage_GetObject", ctypes.c_void_p)
    handles = fast_function(raw, ctypes, "FPDFPage_GetObject", _handle_type(ctypes))
    assert plain.restype is ctypes.c_void_p
    assert handles.restype is _handle_type(ctypes)
    assert fast_function(raw, ctypes, "FPDFPage_GetObject", ctypes.c_void_p) is plain
