"""Tables as pieces, shared by the grid chunkers (delimited, xlsx, docx, pptx).

A table is a grid of cells with spans; its piece text is one line per row, cells
separated by tabs (tabs and newlines inside a cell escaped as ``\\t`` and ``\\n``), a
spanned position rendered empty so no text is duplicated. A table longer than the
configured size is cut into several pieces, each repeating the header rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ingest_pipeline.contract import BBox, ChunkPiece, Layout, TableCell, TableLayout

# A grid's cell is the contract's TableCell (origin row/col, spans, optional box); the
# header flag is set when the cells are cut into pieces.
GridCell = TableCell


@dataclass
class Grid:
    """A table: its cells (origins only), size, header rows, and where it sits."""

    rows: int
    cols: int
    cells: list[GridCell] = field(default_factory=list)
    header_rows: int = 1
    bbox: BBox | None = None
    bbox_reason: str | None = "no_geometry"


def escape_cell(text: str) -> str:
    """A cell's text on one line: tabs and newlines inside it written as `` \\t `` and
    `` \\n `` (spaced, so word tokenizers still see the words beside them)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    text = text.replace("\t", " \\t ").replace("\n", " \\n ")
    return _squeeze(text)


def flatten_cell(text: str) -> str:
    """pdf@3's older form of a cell on one line: tabs and newlines as single spaces,
    nothing trimmed or squeezed (kept so pdf@3's output does not change)."""
    return text.replace("\t", " ").replace("\n", " ")


def _squeeze(text: str) -> str:
    while "  " in text:
        text = text.replace("  ", " ")
    return text


def is_ragged(grid: Grid) -> bool:
    """A grid far larger than its cells (one very long row among short ones): padding
    every row to the full width would cost more than the input, so rows are not padded."""
    return grid.rows * grid.cols > 4 * len(grid.cells) + 100_000


def render_rows(grid: Grid, rows: Sequence[int]) -> list[str]:
    """The tab-separated line of each grid row in ``rows`` (padded to the grid's width,
    unless the grid is ragged: then each row ends at its last cell)."""
    by_row: dict[int, dict[int, str]] = {}
    for cell in grid.cells:
        by_row.setdefault(cell.row, {})[cell.col] = cell.text
    ragged = is_ragged(grid)
    lines = []
    for r in rows:
        values = by_row.get(r, {})
        width = (max(values) + 1 if values else 0) if ragged else grid.cols
        lines.append("\t".join(escape_cell(values.get(c, "")) for c in range(width)))
    return lines


def _layout_for(
    grid: Grid,
    rows: Sequence[int],
    header_rows: int,
    role: str,
    with_cells: bool,
    by_row: Mapping[int, list[GridCell]],
) -> Layout:
    if not with_cells:
        return Layout(role=role)
    index = {r: i for i, r in enumerate(rows)}
    chosen = set(rows)
    cells = []
    for cell in (c for r in rows for c in by_row.get(r, ())):
        # A span crossing the end of this piece is cut at the piece's last row.
        span = 1
        while (
            span < cell.row_span
            and (cell.row + span) in chosen
            and index[cell.row + span] == index[cell.row] + span
        ):
            span += 1
        cells.append(
            TableCell(
                row=index[cell.row],
                col=cell.col,
                text=cell.text,
                row_span=span,
                col_span=cell.col_span,
                bbox=cell.bbox,
                header=cell.row < grid.header_rows,
            )
        )
    return Layout(
        role=role,
        table=TableLayout(rows=len(rows), cols=grid.cols, cells=tuple(cells), header_rows=header_rows),
    )


def pack_rows(
    header: list[int], blocks: Sequence[list[int]], length: Mapping[int, int] | Sequence[int], limit: int
) -> list[list[int]]:
    """Rows into pieces: each piece is the header rows then whole blocks of body rows
    (rows a span ties together), a new piece starting when the next block would take it
    past ``limit`` characters (``length[r]`` is row r's, newline included). A block
    longer than the limit makes a piece of its own; no body at all makes one header piece."""
    header_len = sum(length[r] for r in header)
    groups: list[list[int]] = []
    current: list[int] = []
    size = header_len
    for block in blocks:
        block_len = sum(length[r] for r in block)
        if current and size + block_len > limit:
            groups.append(header + current)
            current, size = [], header_len
        current.extend(block)
        size += block_len
    if current or not groups:
        groups.append(header + current)
    return groups


def table_pieces(
    grid: Grid,
    max_chars: int,
    *,
    role: str = "table",
    with_cells: bool = True,
    header_path: tuple[str, ...] = (),
    meta: Mapping[str, Any] | None = None,
) -> list[ChunkPiece]:
    """One piece for the table, or several of at most ~``max_chars`` each, every one
    starting with the header rows. Rows are never cut; a row longer than the limit
    makes a piece of its own."""
    if grid.rows <= 0 or grid.cols <= 0:
        return []
    lines = render_rows(grid, range(grid.rows))
    header_rows = max(0, min(grid.header_rows, grid.rows))
    # Rows tied together by a vertical span stay in one piece.
    tied_until = list(range(grid.rows))
    for cell in grid.cells:
        end = min(cell.row + cell.row_span - 1, grid.rows - 1)
        for r in range(cell.row, end + 1):
            tied_until[r] = max(tied_until[r], end)
    blocks = []
    r = header_rows
    while r < grid.rows:
        end = r
        while end < grid.rows - 1 and tied_until[end] > end:
            end += 1
        blocks.append(list(range(r, end + 1)))
        r = end + 1
    groups = pack_rows(list(range(header_rows)), blocks, [len(line) + 1 for line in lines], max_chars)
    by_row: dict[int, list[GridCell]] = {}
    for cell in grid.cells:
        by_row.setdefault(cell.row, []).append(cell)
    pieces = []
    for part, rows in enumerate(groups):
        text = "\n".join(lines[r] for r in rows)
        if not text.strip():
            continue
        piece_meta = dict(meta or {})
        if is_ragged(grid):
            piece_meta["ragged"] = True
        piece_meta.update(
            {
                "table_rows": grid.rows,
                "table_cols": grid.cols,
                "part": part + 1,
                "parts": len(groups),
                "first_row": rows[header_rows] if len(rows) > header_rows and part > 0 else 0,
            }
        )
        pieces.append(
            ChunkPiece(
                text=text,
                bbox=grid.bbox,
                bbox_reason=None if grid.bbox is not None else (grid.bbox_reason or "no_geometry"),
                layout=_layout_for(grid, rows, header_rows, role, with_cells, by_row),
                header_path=header_path,
                content_type="table",
                meta=piece_meta,
            )
        )
    return pieces


def paragraph_piece(
    text: str,
    *,
    role: str = "paragraph",
    bbox: BBox | None = None,
    bbox_reason: str | None = "no_geometry",
    header_path: tuple[str, ...] = (),
    meta: Mapping[str, Any] | None = None,
) -> ChunkPiece | None:
    """A text piece, or None for whitespace-only text."""
    if not text or not text.strip():
        return None
    return ChunkPiece(
        text=text,
        bbox=bbox,
        bbox_reason=None if bbox is not None else (bbox_reason or "no_geometry"),
        layout=Layout(role=role),
        header_path=header_path,
        content_type=role,
        meta=dict(meta or {}),
    )


def with_reason(piece: ChunkPiece, reason: str) -> ChunkPiece:
    """The piece without a box and with ``reason`` (e.g. ``hidden``)."""
    return replace(piece, bbox=None, bbox_reason=reason)


def split_text(text: str, max_chars: int) -> list[str]:
    """Cut text longer than ``max_chars`` at line breaks, then spaces; never drops text."""
    if len(text) <= max_chars:
        return [text]
    out: list[str] = []
    current = ""
    for line in text.split("\n"):
        while len(line) > max_chars:
            cut = line.rfind(" ", 0, max_chars)
            cut = cut if cut > 0 else max_chars
            if current:
                out.append(current)
                current = ""
            out.append(line[:cut])
            line = line[cut:].lstrip(" ")
        if current and len(current) + 1 + len(line) > max_chars:
            out.append(current)
            current = line
        else:
            current = f"{current}\n{line}" if current else line
    if current:
        out.append(current)
    return [part for part in out if part.strip()]


def _words(text: str) -> set[str]:
    import re

    return set(re.sub(r"[^\w]+", " ", text.lower()).split())


class GridChecks:
    """Asset checks and metrics shared by the Office and grid chunkers.

    ``table_grid_consistent``: every table piece's text has one line per layout row and
    one tab-separated field per column, and its cells lie inside the grid without
    overlapping. ``page_words_covered`` (warn): every word of a claimed page's reader
    text is in that page's pieces, so nothing the reader saw was lost.
    """

    check_names = ("table_grid_consistent", "page_words_covered")
    check_descriptions = {
        "table_grid_consistent": "Table text rows/columns match the cell grid, and cells do not overlap.",
        "page_words_covered": "Every word of a claimed page's reader text is in that page's pieces (warns).",
    }

    def check(self, content, media_type, pages, answer):
        from ingest_pipeline.contract import CheckOutcome

        bad_tables = []
        lost: dict[int, list[str]] = {}
        texts = {p.page: p.text or "" for p in pages if p.status == "read"}
        for page_chunks in answer:
            seen: set[str] = set()
            for index, piece in enumerate(page_chunks.pieces):
                seen |= _words(piece.text or "")
                table = piece.layout.table if piece.layout is not None else None
                if table is None:
                    continue
                problem = _grid_problem(piece.text or "", table, bool(piece.meta.get("ragged")))
                if problem:
                    bad_tables.append({"page": page_chunks.page, "piece": index, "problem": problem})
            missing = _words(texts.get(page_chunks.page, "")) - seen
            if missing:
                lost[page_chunks.page] = sorted(missing)[:20]
        return (
            CheckOutcome(
                name="table_grid_consistent",
                passed=not bad_tables,
                description="table text rows/columns match the cell grid; cells do not overlap",
                metadata={"tables": bad_tables[:20]},
            ),
            CheckOutcome(
                name="page_words_covered",
                passed=not lost,
                severity="warn",
                description="every word of the reader's page text is in the page's pieces",
                metadata={"missing": {str(k): v for k, v in list(lost.items())[:20]}},
            ),
        )

    def metrics(self, answer) -> dict[str, Any]:
        pieces = [p for pc in answer for p in pc.pieces]
        tables = [p for p in pieces if p.content_type == "table"]
        cells = [
            c
            for p in tables
            if p.layout is not None and p.layout.table is not None
            for c in p.layout.table.cells
        ]
        return {
            "pieces": len(pieces),
            "table_pieces": len(tables),
            "split_table_pieces": sum(1 for p in tables if p.meta.get("parts", 1) > 1),
            "table_cells": len(cells),
            "merged_cells": sum(1 for c in cells if c.row_span > 1 or c.col_span > 1),
            "image_pieces": sum(1 for p in pieces if p.image),
            "hidden_pieces": sum(1 for p in pieces if p.bbox_reason == "hidden"),
            "unresolved_pieces": sum(1 for p in pieces if p.bbox_reason == "unresolved"),
        }


def _grid_problem(text: str, table, ragged: bool = False) -> str | None:
    spans = ((c.row, c.col, c.row_span, c.col_span) for c in table.cells)
    return grid_problem(text, table.rows, table.cols, spans, ragged)


def grid_problem(
    text: str, rows: int, cols: int, spans: Iterable[tuple[int, int, int, int]], ragged: bool = False
) -> str | None:
    """What is wrong with a table's text against its grid of ``rows`` x ``cols`` whose cells
    take ``spans`` (row, col, row_span, col_span): a line per row, a field per column (at
    most, when ragged), every cell inside the grid and on its own places. None if nothing."""
    lines = text.split("\n")
    if len(lines) != rows:
        return f"{len(lines)} lines for {rows} rows"
    if ragged:
        if any(line.count("\t") > cols - 1 for line in lines):
            return f"a line with more than {cols} fields"
    elif any(line.count("\t") != cols - 1 for line in lines):
        return f"a line without {cols} fields"
    taken: set[tuple[int, int]] = set()
    for row, col, row_span, col_span in spans:
        if row + row_span > rows or col + col_span > cols:
            return f"cell ({row}, {col}) reaches outside the grid"
        if row_span == 1 and col_span == 1:  # most cells: one place
            if (row, col) in taken:
                return f"cell ({row}, {col}) overlaps another"
            taken.add((row, col))
            continue
        spots = {(r, c) for r in range(row, row + row_span) for c in range(col, col + col_span)}
        if spots & taken:
            return f"cell ({row}, {col}) overlaps another"
        taken |= spots
    return None
