"""docx@1 and the DOCX reader on documents the tests build (SPEC T-W1..T-W3)."""

from __future__ import annotations

import io

import pytest

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.docx import DocxChunker
from ingest_pipeline.readers import read_pages
from ingest_pipeline_tests.office_fixtures import rewrite_zip, save_docx

docx = pytest.importorskip("docx")
from docx import Document  # noqa: E402
from docx.enum.section import WD_SECTION  # noqa: E402
from docx.oxml import parse_xml  # noqa: E402

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
NS = (
    f'xmlns:w="{W_NS}" '
    'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
    'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
    'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" '
    'xmlns:v="urn:schemas-microsoft-com:vml"'
)


def chunk(content: bytes, **config):
    pages = read_pages(content, mt.DOCX)
    return {pc.page: pc.pieces for pc in DocxChunker(config).chunk(content, mt.DOCX, pages)}


def append_body_xml(doc, xml: str) -> None:
    body = doc.element.body
    body[-1].addprevious(parse_xml(xml))


def test_w1_document_order_and_merged_cells_once():
    doc = Document()
    doc.add_heading("Results", level=1)
    doc.add_paragraph("Intro paragraph.")
    table = doc.add_table(rows=3, cols=3)
    for r in range(3):
        for c in range(3):
            table.cell(r, c).text = f"r{r}c{c}"
    wide = table.cell(0, 0).merge(table.cell(0, 1))
    wide.text = "wide"
    tall = table.cell(1, 2).merge(table.cell(2, 2))
    tall.text = "tall"
    doc.add_paragraph("Closing paragraph.")
    content = save_docx(doc)
    # python-docx's row.cells repeats a merged cell for every grid column it covers.
    reopened = Document(io.BytesIO(content)).tables[0]
    assert [c.text for c in reopened.rows[0].cells].count("wide") == 2

    pieces = chunk(content)[1]
    assert [p.content_type for p in pieces] == ["heading", "paragraph", "table", "paragraph"]
    assert pieces[0].text == "Results" and pieces[3].text == "Closing paragraph."
    assert pieces[3].header_path == ("Results",)
    table_piece = pieces[2]
    assert table_piece.bbox is None and table_piece.bbox_reason == "no_geometry"
    grid = table_piece.layout.table
    assert table_piece.layout.role == "table" and (grid.rows, grid.cols) == (3, 3)
    cells = {(c.row, c.col): c for c in grid.cells}
    assert cells[(0, 0)].text == "wide" and cells[(0, 0)].col_span == 2
    assert cells[(1, 2)].text == "tall" and cells[(1, 2)].row_span == 2
    assert len(grid.cells) == 7
    assert table_piece.text.count("wide") == 1 and table_piece.text.count("tall") == 1
    assert table_piece.text == "wide\t\tr0c2\nr1c0\tr1c1\ttall\nr2c0\tr2c1\t"


def test_w2_content_controls_and_insertions_kept_deletions_dropped():
    doc = Document()
    doc.add_paragraph("Before.")
    append_body_xml(
        doc,
        f'<w:sdt {NS}><w:sdtPr><w:alias w:val="Box"/></w:sdtPr><w:sdtContent>'
        "<w:p><w:r><w:t>Inside the control</w:t></w:r></w:p></w:sdtContent></w:sdt>",
    )
    append_body_xml(
        doc,
        f'<w:p {NS}><w:r><w:t xml:space="preserve">Kept </w:t></w:r>'
        '<w:ins w:id="1" w:author="a" w:date="2024-01-01T00:00:00Z"><w:r><w:t>inserted</w:t></w:r></w:ins>'
        '<w:del w:id="2" w:author="a" '
        'w:date="2024-01-01T00:00:00Z"><w:r><w:delText>removed</w:delText></w:r></w:del>'
        "</w:p>",
    )
    content = save_docx(doc)
    # python-docx loses the insertion and the content control.
    reopened = Document(io.BytesIO(content))
    assert "inserted" not in "\n".join(p.text for p in reopened.paragraphs)
    texts = [p.text for p in chunk(content)[1]]
    assert "Inside the control" in texts
    assert "Kept inserted" in texts
    assert not any("removed" in t for t in texts)
    page_text = read_pages(content, mt.DOCX)[0].text
    assert "Inside the control" in page_text and "removed" not in page_text


def test_w3_two_sections_map_to_two_pages():
    doc = Document()
    doc.add_paragraph("First section text")
    doc.add_section(WD_SECTION.NEW_PAGE)
    doc.add_paragraph("Second section text")
    content = save_docx(doc)
    pages = read_pages(content, mt.DOCX)
    assert [p.page for p in pages] == [1, 2]
    assert "First section text" in pages[0].text and "Second section text" in pages[1].text
    answer = chunk(content)
    assert [p.text for p in answer[1]] == ["First section text"]
    assert [p.text for p in answer[2]] == ["Second section text"]


def test_text_box_read_once_and_vanished_text_hidden():
    doc = Document()
    box = (
        f"<w:p {NS}><w:r><w:t>Anchor</w:t></w:r><w:r><mc:AlternateContent><mc:Choice "
        'Requires="wps"><w:drawing>'
        "<wp:anchor><a:graphic><a:graphicData><wps:wsp><wps:txbx><w:txbxContent>"
        "<w:p><w:r><w:t>Boxed "
        "text</w:t></w:r></w:p></w:txbxContent></wps:txbx></wps:wsp></a:graphicData></a:graphic>"
        "</wp:anchor></w:drawing></mc:Choice><mc:Fallback><w:pict><v:shape><v:textbox><w:txbxContent>"
        "<w:p><w:r><w:t>Boxed "
        "text</w:t></w:r></w:p></w:txbxContent></v:textbox></v:shape></w:pict></mc:Fallback>"
        "</mc:AlternateContent></w:r></w:p>"
    )
    append_body_xml(doc, box)
    append_body_xml(
        doc,
        f'<w:p {NS}><w:r><w:t xml:space="preserve">Seen </w:t></w:r>'
        "<w:r><w:rPr><w:vanish/></w:rPr><w:t>unseen</w:t></w:r></w:p>",
    )
    pieces = chunk(save_docx(doc))[1]
    texts = [p.text for p in pieces]
    assert texts.count("Boxed text") == 1 and "Anchor" in texts
    assert [p.content_type for p in pieces if p.text == "Boxed text"] == ["textbox"]
    hidden = [p for p in pieces if p.bbox_reason == "hidden"]
    assert [p.text for p in hidden] == ["unseen"] and "Seen" in texts


def test_numbered_list_items_carry_their_numbers():
    doc = Document()
    for item in ("alpha", "beta", "gamma"):
        doc.add_paragraph(item, style="List Number")
    texts = [p.text for p in chunk(save_docx(doc))[1]]
    assert texts == ["1. alpha", "2. beta", "3. gamma"]


def test_large_table_split_with_header_repeated():
    doc = Document()
    table = doc.add_table(rows=301, cols=3)
    for r, row in enumerate(table.rows):
        cells = row.cells
        values = (
            ("Item", "Qty", "Note") if r == 0 else (f"item {r}", str(r), "some words to make the row longer")
        )
        for cell, value in zip(cells, values):
            cell.text = value
    pieces = chunk(save_docx(doc), max_chars=2000)[1]
    assert len(pieces) > 3
    rows_seen = []
    for p in pieces:
        lines = p.text.split("\n")
        assert lines[0] == "Item\tQty\tNote" and len(p.text) <= 2000
        assert p.layout.table.rows == len(lines) and p.layout.table.header_rows == 1
        rows_seen.extend(lines[1:])
    assert (
        len(rows_seen) == 300
        and rows_seen[0].startswith("item 1\t")
        and rows_seen[-1].startswith("item 300\t")
    )


def _to_strict(content: bytes) -> bytes:
    swaps = {
        "http://schemas.openxmlformats.org/wordprocessingml/2006/main": "http://purl.oclc.org/ooxml/wordprocessingml/main",
        "http://schemas.openxmlformats.org/officeDocument/2006/relationships": "http://purl.oclc.org/ooxml/officeDocument/relationships",
    }

    def edit(name: str, data: bytes):
        if name.endswith((".xml", ".rels")):
            text = data.decode("utf-8")
            for old, new in swaps.items():
                text = text.replace(old, new)
            return name, text.encode("utf-8")
        return name, data

    return rewrite_zip(content, edit)


def test_strict_namespace_document_is_read():
    doc = Document()
    doc.add_heading("Strict heading", level=1)
    doc.add_paragraph("Strict body text")
    strict = _to_strict(save_docx(doc))
    with pytest.raises(Exception):
        Document(io.BytesIO(strict))  # python-docx cannot open ISO Strict
    pieces = chunk(strict)[1]
    assert [p.text for p in pieces] == ["Strict heading", "Strict body text"]


def test_unreadable_document_is_disclaimed_not_raised():
    assert DocxChunker().chunk(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 512, mt.DOCX, ()) == ()
