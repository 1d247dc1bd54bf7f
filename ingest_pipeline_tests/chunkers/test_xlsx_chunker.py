"""xlsx@1 and the XLSX reader on workbooks the tests build (SPEC T-S1..T-S4)."""

from __future__ import annotations

import datetime as dt

import pytest

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.xlsx import XlsxChunker
from ingest_pipeline.office.xlsx import load_sheets
from ingest_pipeline.readers import read_pages
from ingest_pipeline_tests.office_fixtures import read_part, replace_in_part, save_xlsx

openpyxl = pytest.importorskip("openpyxl")


def chunk(content: bytes, **config):
    pages = read_pages(content, mt.XLSX)
    return {pc.page: pc.pieces for pc in XlsxChunker(config).chunk(content, mt.XLSX, pages)}


def sales_workbook():
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Sales"
    ws["A1"] = "Quarterly sales"
    ws.merge_cells("A1:C1")
    for col, value in zip("ABC", ("Region", "Q1", "Q2")):
        ws[f"{col}2"] = value
    ws["A3"], ws["B3"], ws["C3"] = "South", 10, 20
    ws["A4"], ws["B4"], ws["C4"] = "North", 11, 21
    ws["B5"], ws["C5"] = 12, 22
    ws.merge_cells("A4:A5")
    return wb


def test_s1_title_paragraph_and_table_with_rowspan():
    pieces = chunk(save_xlsx(sales_workbook()))[1]
    assert [p.content_type for p in pieces] == ["title", "table"]
    title, table = pieces
    assert title.text == "Quarterly sales" and title.bbox_reason == "no_geometry"
    assert table.text == "Region\tQ1\tQ2\nSouth\t10\t20\nNorth\t11\t21\n\t12\t22"
    assert "None" not in table.text
    grid = table.layout.table
    assert table.layout.role == "table" and (grid.rows, grid.cols) == (4, 3)
    north = [c for c in grid.cells if c.text == "North"]
    assert len(north) == 1 and north[0].row_span == 2 and (north[0].row, north[0].col) == (2, 0)
    assert all(p.header_path == ("Sales",) for p in pieces)


def test_s2_formula_without_cached_value_renders_its_formula():
    wb = sales_workbook()
    wb.active["D2"] = "Total"
    wb.active["D3"] = "=B3+C3"
    content = save_xlsx(wb)
    table = [p for p in chunk(content)[1] if p.content_type == "table"][0]
    assert "=B3+C3" in table.text and "None" not in table.text
    assert "=B3+C3" in read_pages(content, mt.XLSX)[0].text


def test_s3_hidden_sheet_and_hidden_row_are_flagged_hidden():
    wb = sales_workbook()
    wb.active.row_dimensions[3].hidden = True
    secret = wb.create_sheet("Secret")
    secret.append(["key", "value"])
    secret.append(["pin", 1234])
    secret.sheet_state = "hidden"
    answer = chunk(save_xlsx(wb))
    table = [p for p in answer[1] if p.content_type == "table"][0]
    assert "South" not in table.text
    hidden_rows = [p for p in answer[1] if p.bbox_reason == "hidden"]
    assert [p.text for p in hidden_rows] == ["South\t10\t20"]
    assert answer[2] and all(p.bbox_reason == "hidden" and p.bbox is None for p in answer[2])
    assert "pin\t1234" in answer[2][0].text


def test_s4_two_tables_separated_by_an_empty_row():
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["a", "b"])
    ws.append([1, 2])
    ws.append([])
    ws.append(["c", "d", "e"])
    ws.append([3, 4, 5])
    tables = [p for p in chunk(save_xlsx(wb))[1] if p.content_type == "table"]
    assert [p.text for p in tables] == ["a\tb\n1\t2", "c\td\te\n3\t4\t5"]
    assert [(t.layout.table.rows, t.layout.table.cols) for t in tables] == [(2, 2), (2, 3)]


def test_dates_booleans_and_numbers_render_as_a_person_reads_them():
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["when", "ok", "ratio"])
    ws.append([dt.datetime(2024, 1, 31), True, 0.25])
    (table,) = chunk(save_xlsx(wb))[1]
    assert table.text == "when\tok\tratio\n2024-01-31\tTRUE\t0.25"


def test_pages_are_sheets_and_an_empty_sheet_is_blank():
    wb = sales_workbook()
    wb.create_sheet("Empty")
    pages = read_pages(save_xlsx(wb), mt.XLSX)
    assert [(p.page, p.status) for p in pages] == [(1, "read"), (2, "blank")]


def test_large_table_split_with_header_repeated():
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["id", "name", "comment"])
    for i in range(500):
        ws.append([i, f"name {i}", "a comment of some length"])
    pieces = chunk(save_xlsx(wb), max_chars=1500)[1]
    assert len(pieces) > 5
    body = []
    for p in pieces:
        lines = p.text.split("\n")
        assert lines[0] == "id\tname\tcomment" and len(p.text) <= 1500
        body.extend(lines[1:])
    assert len(body) == 500


def test_declared_dimension_of_the_whole_grid_costs_only_the_real_cells():
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["h1", "h2"])
    ws.append([1, 2])
    content = save_xlsx(wb)
    sheet = read_part(content, "xl/worksheets/sheet1.xml")
    padding = "".join(
        f'<row r="{r}">'
        + "".join(f'<c r="{c}{r}" s="0"/>' for c in ("A", "B", "C", "D", "E", "F", "G", "H", "I", "J"))
        + "</row>"
        for r in range(3, 5003)
    )
    content = replace_in_part(
        content,
        "xl/worksheets/sheet1.xml",
        sheet[sheet.index("<dimension") : sheet.index("/>", sheet.index("<dimension")) + 2],
        '<dimension ref="A1:XFD1048576"/>',
    )
    content = replace_in_part(content, "xl/worksheets/sheet1.xml", "</sheetData>", padding + "</sheetData>")
    # The cost follows what the model holds: the four cells with a value, not the
    # declared grid nor the 50,000 empty styled cells (no timing: the machine is shared).
    (sheet_model,) = load_sheets(content)
    assert sorted(sheet_model.cells) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    (table,) = chunk(content)[1]
    assert table.text == "h1\th2\n1\t2"


def test_a_sparse_island_spanning_the_sheet_becomes_a_cell_list_quickly():
    wb = openpyxl.Workbook(write_only=True)
    ws = wb.create_sheet("L")
    ws.append([f"h{c}" for c in range(16384)])  # the whole first row, A1:XFD1
    for r in range(20_000):
        ws.append([f"v{r}"])  # and a long first column
    content = save_xlsx(wb)
    pieces = chunk(content)[1]
    # a cell list, not a 20,001 x 16,384 grid (which would not fit in memory)
    assert pieces and all(p.content_type == "cells" for p in pieces)
    assert pieces[0].text.startswith("A1\th0\nB1\th1") and pieces[-1].text.endswith("A20001\tv19999")
    assert all(len(p.text) <= 2000 for p in pieces)
