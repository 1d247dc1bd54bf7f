"""delimited@1 on CSV/TSV text the tests write (SPEC T-C1..T-C3)."""

from __future__ import annotations

import pytest

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.delimited import DelimitedChunker, detect_delimiter
from ingest_pipeline.readers import read_pages


def chunk(content: bytes, media_type: str = mt.CSV, **config):
    pages = read_pages(content, media_type)
    answer = DelimitedChunker(config).chunk(content, media_type, pages)
    return [p for pc in answer for p in pc.pieces]


def grid_of(piece) -> list[list[str]]:
    table = piece.layout.table
    rows = [[""] * table.cols for _ in range(table.rows)]
    for cell in table.cells:
        rows[cell.row][cell.col] = cell.text
    return rows


@pytest.mark.parametrize(
    ("content", "delimiter", "shape"),
    [
        (b"name,qty,price\nwidget,2,1.50\ngadget,10,0.25\n", ",", (3, 3)),
        (b"name;qty;price\nwidget;2;1,50\ngadget;10;0,25\n", ";", (3, 3)),
        (b"name\tqty\tprice\nwidget\t2\t1.50\ngadget\t10\t0.25\n", "\t", (3, 3)),
    ],
)
def test_c1_comma_semicolon_and_tab_give_one_table(content, delimiter, shape):
    (piece,) = chunk(content)
    assert piece.meta["delimiter"] == delimiter
    table = piece.layout.table
    assert (table.rows, table.cols) == shape and len(table.cells) == shape[0] * shape[1]
    assert piece.bbox is None and piece.bbox_reason == "no_geometry"
    if delimiter == ";":
        assert grid_of(piece)[1] == ["widget", "2", "1,50"]


def test_c1_quoted_newline_stays_one_cell():
    (piece,) = chunk(b'id,comment\n1,"line one\nline two"\n2,plain\n')
    assert grid_of(piece) == [["id", "comment"], ["1", "line one\nline two"], ["2", "plain"]]
    assert piece.text == "id\tcomment\n1\tline one \\n line two\n2\tplain"


def test_c2_single_column_falls_back_to_the_media_type_delimiter():
    (piece,) = chunk(b"name\nalpha\nbeta\n")
    assert piece.meta["delimiter"] == ","
    assert grid_of(piece) == [["name"], ["alpha"], ["beta"]]
    assert detect_delimiter("name\nalpha\n", mt.TSV) == "\t"


def test_c3_title_line_then_table():
    pieces = chunk(b"Monthly report\n\nmonth,total\njan,10\nfeb,12\n")
    assert [p.content_type for p in pieces] == ["paragraph", "table"]
    assert pieces[0].text == "Monthly report"
    assert pieces[1].text == "month\ttotal\njan\t10\nfeb\t12"


def test_c3_ten_thousand_rows_split_with_the_header_repeated():
    lines = ["id,name,amount"] + [f"{i},item {i},{i * 3}" for i in range(10_000)]
    pieces = chunk(("\n".join(lines) + "\n").encode())
    assert len(pieces) > 10
    body = []
    for piece in pieces:
        rows = piece.text.split("\n")
        assert rows[0] == "id\tname\tamount" and len(piece.text) <= 2000
        assert piece.layout.table.rows == len(rows) and piece.layout.table.header_rows == 1
        body.extend(rows[1:])
    assert len(body) == 10_000 and body[0] == "0\titem 0\t0" and body[-1] == "9999\titem 9999\t29997"


def test_ragged_rows_are_padded_to_the_widest_row():
    (piece,) = chunk(b"a,b,c\n1,2\n3,4,5,6\n")
    assert grid_of(piece) == [["a", "b", "c", ""], ["1", "2", "", ""], ["3", "4", "5", "6"]]


def test_utf16_with_bom_and_tsv_media_type():
    content = "name\tcity\nJosé\tMálaga\n".encode("utf-16")
    (piece,) = chunk(content, mt.TSV)
    assert grid_of(piece) == [["name", "city"], ["José", "Málaga"]]


def test_blank_and_failed_pages_are_not_claimed():
    assert DelimitedChunker().chunk(b"", mt.CSV, read_pages(b"", mt.CSV)) == ()


def test_excel_separator_hint_and_huge_field():
    (piece,) = chunk(b"sep=;\na;b\n1,5;2\n")
    assert piece.meta["delimiter"] == ";" and grid_of(piece) == [["a", "b"], ["1,5", "2"]]
    big = "x" * 300_000
    pieces = chunk(f'id,blob\n1,"{big}"\n'.encode(), max_chars=1_000_000)
    assert grid_of(pieces[0])[1] == ["1", big]


def test_one_enormous_row_among_short_ones_is_not_padded():
    wide = ",".join(["x"] * 50_000)
    rows = "\n".join(["a,b"] * 500)
    pieces = chunk(f"{wide}\n{rows}\n".encode(), max_chars=10_000_000)
    (piece,) = pieces
    assert piece.meta["ragged"] and len(piece.text) < 2 * (len(wide) + len(rows))
    assert piece.text.split("\n")[1] == "a\tb"
    from ingest_pipeline.chunkers.delimited import DelimitedChunker as C

    content = f"{wide}\n{rows}\n".encode()
    pages = read_pages(content, mt.CSV)
    checker = C({"max_chars": 10_000_000})
    outcomes = {
        o.name: o.passed for o in checker.check(content, mt.CSV, pages, checker.chunk(content, mt.CSV, pages))
    }
    assert outcomes["table_grid_consistent"]
