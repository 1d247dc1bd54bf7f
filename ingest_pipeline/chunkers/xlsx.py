"""xlsx@1: each data island of a worksheet as a table chunk with its cells.

Islands are the bounding boxes of 4-connected non-empty cells (merged ranges count as
filled), grown until no other island touches them; Excel table parts are used as given.
An island whose grid would exceed ``max_table_grid`` positions and is mostly empty (a sparse
sheet spanning the whole grid) is chunked as ``A1<tab>value`` lines instead, so cost follows
the cells; a dense table of any size stays a table.
A single-value top row above an island (a title, often merged across) becomes a
paragraph, and so does an island of one cell. Policy for hidden content: a hidden sheet's
pieces carry ``bbox_reason=hidden``; hidden rows leave the table and come as one extra
``hidden`` piece per table; hidden columns stay (listed in the piece's meta).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import replace

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.base import ChunkerConfig, outside_media_types
from ingest_pipeline.chunkers.grid import (
    Grid,
    GridCell,
    paragraph_piece,
    split_text,
    table_pieces,
    with_reason,
)
from ingest_pipeline.chunkers.ooxml import OoxmlChunker
from ingest_pipeline.contract import ChunkPiece

Rect = tuple[int, int, int, int]
Island = tuple[Rect, list[tuple[int, int]]]  # bounding box, member positions
_MAX_COMPONENTS_TO_MERGE = 2000
_MAX_MERGE_FILL = 2_000_000
# A grid over max_table_grid is sparse (a list of cells) when it has this many positions per
# filled cell; a dense table of any size stays a table, its cost following its cells.
_SPARSE = 4


class XlsxConfig(ChunkerConfig):
    max_chars: int = 2000
    title_rows: bool = True
    # An island whose grid (rows x columns) is larger than this, and mostly empty, is chunked
    # as a list of cells ("B7<tab>value" lines) instead of a table, so a sparse sheet cannot
    # blow up.
    max_table_grid: int = 1_000_000


def _components(filled: set[tuple[int, int]]) -> list[Island]:
    """The 4-connected components of ``filled``, with their bounding boxes."""
    seen: set[tuple[int, int]] = set()
    islands: list[Island] = []
    for start in sorted(filled):
        if start in seen:
            continue
        seen.add(start)
        stack = [start]
        members = []
        while stack:
            pos = stack.pop()
            members.append(pos)
            r, c = pos
            for n in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                if n in filled and n not in seen:
                    seen.add(n)
                    stack.append(n)
        rows = [p[0] for p in members]
        cols = [p[1] for p in members]
        islands.append(((min(rows), min(cols), max(rows), max(cols)), members))
    return islands


def _touch(a: Rect, b: Rect) -> bool:
    """True when ``b`` overlaps ``a`` or lies along one of its sides (not corners)."""
    overlap_rows = a[0] <= b[2] and b[0] <= a[2]
    overlap_cols = a[1] <= b[3] and b[1] <= a[3]
    near_rows = a[0] - 1 <= b[2] and b[0] <= a[2] + 1
    near_cols = a[1] - 1 <= b[3] and b[1] <= a[3] + 1
    return (overlap_rows and near_cols) or (overlap_cols and near_rows)


def _merge_islands(islands: list[Island]) -> list[Island]:
    """Merge islands whose boxes overlap or touch, until none do."""
    if len(islands) > _MAX_COMPONENTS_TO_MERGE:
        return islands
    changed = True
    while changed:
        changed = False
        out: list[Island] = []
        for box, members in islands:
            for i, (other, other_members) in enumerate(out):
                if _touch(other, box):
                    merged = (
                        min(box[0], other[0]),
                        min(box[1], other[1]),
                        max(box[2], other[2]),
                        max(box[3], other[3]),
                    )
                    out[i] = (merged, other_members + members)
                    changed = True
                    break
            else:
                out.append((box, members))
        islands = out
    return islands


def find_islands(sheet) -> list[Island]:
    """Data islands of a sheet (0-based inclusive boxes and member cells), top to bottom."""
    filled = set(sheet.cells)
    budget = _MAX_MERGE_FILL
    for r0, c0, r1, c1 in sheet.merges:
        area = (r1 - r0 + 1) * (c1 - c0 + 1)
        if area > budget:
            filled.add((r0, c0))
            continue
        budget -= area
        filled.update((r, c) for r in range(r0, r1 + 1) for c in range(c0, c1 + 1))
    explicit: list[Island] = [(area, []) for _name, area in sheet.tables]
    if explicit:
        rest = set()
        for pos in filled:
            for area, members in explicit:
                if area[0] <= pos[0] <= area[2] and area[1] <= pos[1] <= area[3]:
                    members.append(pos)
                    break
            else:
                rest.add(pos)
        filled = rest
    return sorted(_merge_islands(_components(filled)) + explicit, key=lambda island: island[0])


class XlsxChunker(OoxmlChunker):
    id = "xlsx"
    version = 1
    summary = "a table (data island) of a worksheet with its cells, or a title above one"
    media_types = frozenset({mt.XLSX, mt.XLSM})
    disclaims = outside_media_types  # its own fast answer: nothing outside media_types
    builtin = True
    opt_in = True
    Config = XlsxConfig

    def parts(self, content: bytes) -> list:
        from ingest_pipeline.office.xlsx import load_sheets

        return load_sheets(content)

    def part_pieces(self, sheet, walk=None) -> list[ChunkPiece]:
        pieces: list[ChunkPiece] = []
        merges_by_origin = {(m[0], m[1]): m for m in sheet.merges}
        for number, (island, members) in enumerate(find_islands(sheet)):
            row_cells: dict[int, dict[int, str]] = {}
            for pos in members:
                value = sheet.cells.get(pos)
                if value is not None:
                    row_cells.setdefault(pos[0], {})[pos[1]] = value
            if not row_cells:
                continue
            grid_size = (island[2] - island[0] + 1) * (island[3] - island[1] + 1)
            filled = sum(len(cells) for cells in row_cells.values())
            if grid_size > self.config.max_table_grid and grid_size > _SPARSE * filled:
                pieces.extend(self._sparse_pieces(sheet, island, row_cells))
                continue
            pieces.extend(self._island_pieces(sheet, island, number, merges_by_origin, row_cells))
        for number, chart in enumerate(sheet.charts):
            meta = {"sheet": sheet.name, "chart_index": number}
            caption = paragraph_piece(chart.caption(), role="chart_title", meta=meta)
            if caption:
                pieces.append(caption)
            if chart.rows:
                grid = Grid(
                    rows=len(chart.rows),
                    cols=max(len(r) for r in chart.rows),
                    header_rows=1,
                    cells=[
                        GridCell(r, c, v) for r, row in enumerate(chart.rows) for c, v in enumerate(row) if v
                    ],
                )
                pieces.extend(table_pieces(grid, self.config.max_chars, role="chart", meta=meta))
        pieces = [replace(p, header_path=(sheet.name,)) for p in pieces]
        if sheet.hidden:
            pieces = [with_reason(p, "hidden") for p in pieces]
        return pieces

    def _sparse_pieces(self, sheet, island: Rect, row_cells: dict[int, dict[int, str]]) -> list[ChunkPiece]:
        """An island too large for a grid: its cells as ``A1<tab>value`` lines."""
        lines = []
        for r in sorted(row_cells):
            for c in sorted(row_cells[r]):
                lines.append(f"{_col_letters(c)}{r + 1}\t{' '.join(row_cells[r][c].split())}")
        meta = {"sheet": sheet.name, "range": _a1(island), "layout": "cell list"}
        pieces = []
        for part in split_text("\n".join(lines), self.config.max_chars):
            piece = paragraph_piece(part, role="cells", meta=meta)
            if piece:
                pieces.append(piece)
        return pieces

    def _island_pieces(
        self, sheet, island: Rect, number: int, merges_by_origin, row_cells: dict[int, dict[int, str]]
    ) -> list[ChunkPiece]:
        r0, c0, r1, c1 = island
        base_meta = {"sheet": sheet.name, "range": _a1(island)}
        out: list[ChunkPiece] = []
        hidden_lines = []
        rows = []
        merged_rows = _rows_covered(sheet.merges, island)
        for r in sorted(set(row_cells) | merged_rows):
            values = [row_cells[r][c] for c in sorted(row_cells.get(r, {}))]
            if r in sheet.hidden_rows:
                if values:
                    hidden_lines.append("\t".join(" ".join(v.split()) for v in values))
            else:
                rows.append(r)
        if not any(r in row_cells for r in rows):
            rows = []

        def count(r: int) -> int:
            return len(row_cells.get(r, ()))

        # Titles: a leading row holding one value above a row holding several.
        while self.config.title_rows and len(rows) > 1 and c1 > c0:
            first = rows[0]
            values = sorted(row_cells.get(first, {}).items())
            if len(values) != 1 or count(rows[1]) < 2:
                break
            piece = paragraph_piece(
                values[0][1],
                role="title",
                meta={**base_meta, "cell": _a1((first, values[0][0], first, values[0][0]))},
            )
            if piece:
                out.append(piece)
            rows = rows[1:]
        if len(rows) == 1:
            values = list(row_cells.get(rows[0], {}).values())
            if len(values) == 1:
                piece = paragraph_piece(values[0], role="paragraph", meta=base_meta)
                if piece:
                    out.append(piece)
                rows = []
        if rows:
            out.extend(self._table(sheet, rows, c0, c1, merges_by_origin, base_meta, number))
        if hidden_lines:
            piece = paragraph_piece("\n".join(hidden_lines), role="hidden_rows", meta=base_meta)
            if piece:
                out.append(with_reason(piece, "hidden"))
        return out

    def _table(
        self, sheet, rows: list[int], c0: int, c1: int, merges_by_origin, meta, number
    ) -> list[ChunkPiece]:
        cells = sheet.cells
        index = {r: i for i, r in enumerate(rows)}
        # Trim empty edge columns left by titles peeled off above.
        island_c0, island_c1 = c0, c1
        used = sorted(
            {c for r in rows for c in range(c0, c1 + 1) if (r, c) in cells or (r, c) in merges_by_origin}
        )
        c0, c1 = used[0], used[-1]
        for r in rows:
            for c in range(c0, c1 + 1):
                merge = merges_by_origin.get((r, c))
                if merge:
                    c1 = max(c1, min(merge[3], island_c1))
        c0 = max(c0, island_c0)
        grid_cells: list[GridCell] = []
        # Overlapping (invalid) merges could mark the same cells again and again.
        budget = 4 * len(rows) * (c1 - c0 + 1)
        covered: dict[tuple[int, int], int] = {}
        for r in rows:
            for c in range(c0, c1 + 1):
                value = cells.get((r, c))
                merge = merges_by_origin.get((r, c))
                if (r, c) in covered:
                    if value is not None:
                        origin = grid_cells[covered[(r, c)]]
                        grid_cells[covered[(r, c)]] = GridCell(
                            origin.row,
                            origin.col,
                            f"{origin.text}\n{value}".strip(),
                            origin.row_span,
                            origin.col_span,
                        )
                    continue
                if value is None and merge is None:
                    continue
                row_span = col_span = 1
                if merge and budget > 0:
                    span_rows = rows[bisect_left(rows, merge[0]) : bisect_right(rows, merge[2])]
                    row_span = max(1, len(span_rows))
                    col_span = max(1, min(merge[3], c1) - c + 1)
                    budget -= row_span * col_span
                    for x in span_rows:
                        for y in range(c, c + col_span):
                            if (x, y) != (r, c):
                                covered[(x, y)] = len(grid_cells)
                grid_cells.append(GridCell(index[r], c - c0, value or "", row_span, col_span))
        grid = Grid(
            rows=len(rows),
            cols=c1 - c0 + 1,
            cells=[g for g in grid_cells if g.text or g.row_span > 1 or g.col_span > 1],
            header_rows=1,
        )
        table_meta = {**meta, "range": _a1((rows[0], c0, rows[-1], c1)), "table_index": number}
        if sheet.hidden_cols & set(range(c0, c1 + 1)):
            table_meta["hidden_cols"] = sorted(c - c0 for c in sheet.hidden_cols if c0 <= c <= c1)
        return table_pieces(grid, self.config.max_chars, meta=table_meta)


def _rows_covered(merges, island: Rect) -> set[int]:
    """Rows of ``island`` that some merged range covers (interval union, then expanded)."""
    r0, c0, r1, c1 = island
    spans = sorted(
        (max(m[0], r0), min(m[2], r1))
        for m in merges
        if m[1] <= c1 and c0 <= m[3] and m[0] <= r1 and r0 <= m[2]
    )
    rows: set[int] = set()
    end = -1
    for lo, hi in spans:
        lo = max(lo, end + 1)
        if lo <= hi:
            rows.update(range(lo, hi + 1))
            end = hi
    return rows


def _col_letters(col: int) -> str:
    letters = ""
    col += 1
    while col:
        col, rem = divmod(col - 1, 26)
        letters = chr(65 + rem) + letters
    return letters


def _a1(rect: Rect) -> str:
    r0, c0, r1, c1 = rect
    start = f"{_col_letters(c0)}{r0 + 1}"
    end = f"{_col_letters(c1)}{r1 + 1}"
    return start if start == end else f"{start}:{end}"
