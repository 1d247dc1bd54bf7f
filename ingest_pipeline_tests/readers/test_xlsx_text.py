"""The XLSX reader takes each sheet's text row by row as the XML streams past (no cells
kept); its text must equal the one built from the cells, rows in any order."""

from __future__ import annotations

import datetime as dt
import re

import openpyxl

from ingest_pipeline import media_types as mt
from ingest_pipeline.office.xlsx import load_sheets
from ingest_pipeline.readers.base import ReadOptions
from ingest_pipeline.readers.xlsx import XlsxReader
from ingest_pipeline_tests.office_fixtures import read_part, replace_in_part, save_xlsx


def _workbook() -> bytes:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Ledger"
    ws.append(["Date", "Account", "Amount", None, "Note"])
    ws.append([dt.date(2024, 1, 31), "  Cash   at bank ", 1250.5, None, None])
    ws.append([])
    ws.append([dt.datetime(2024, 2, 1, 9, 30), "Fees", -12, None, "wire\tfee"])
    ws.merge_cells("A6:C6")
    ws["A6"] = "Totals"
    ws["E7"] = "=SUM(C2:C4)"
    other = wb.create_sheet("Notes")
    other["B2"] = "only one cell"
    wb.create_sheet("Empty")
    return save_xlsx(wb)


def _reader_texts(content: bytes) -> list[str]:
    pages = XlsxReader().read(content, mt.XLSX, ReadOptions(name="book.xlsx"))
    return [page.text or "" for page in pages]


def _cell_texts(content: bytes) -> list[str]:
    return [sheet.text() for sheet in load_sheets(content)]


def test_the_streamed_text_equals_the_text_built_from_cells():
    content = _workbook()
    texts = _reader_texts(content)
    assert texts == _cell_texts(content)
    assert texts[0].splitlines()[1] == "2024-01-31\tCash at bank\t1250.5"
    assert texts[1] == "only one cell" and texts[2] == ""
    assert all(sheet.lines is not None for sheet in load_sheets(content, cells=False))


def test_rows_out_of_order_give_the_same_text_as_in_order():
    content = _workbook()
    xml = read_part(content, "xl/worksheets/sheet1.xml")
    rows = re.findall(r"<row [^>]*>.*?</row>", xml)
    assert len(rows) >= 3
    # the second row moved to the end of sheetData
    swapped = replace_in_part(content, "xl/worksheets/sheet1.xml", rows[1], "")
    swapped = replace_in_part(swapped, "xl/worksheets/sheet1.xml", "</sheetData>", rows[1] + "</sheetData>")
    assert read_part(swapped, "xl/worksheets/sheet1.xml").index(rows[1]) > read_part(
        swapped, "xl/worksheets/sheet1.xml"
    ).index(rows[-1])
    assert _reader_texts(swapped) == _cell_texts(content)


def test_a_cell_that_names_another_row_lands_in_that_row():
    content = _workbook()
    # the cell E4 ("wire fee") claims to sit in row 9, below every other row
    moved = replace_in_part(content, "xl/worksheets/sheet1.xml", 'r="E4"', 'r="E9"')
    text = _reader_texts(moved)[0]
    assert text == _cell_texts(moved)[0]
    assert text.splitlines()[-1] == "wire fee"
