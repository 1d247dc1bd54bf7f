"""xlsx@1: each data island of a worksheet as a table chunk with its cells.

Islands are the bounding boxes of 4-connected non-empty cells (merged ranges count as
filled), grown until no other island touches them; Excel table parts are used as given.
A single-value top row above an island (a title, often merged across) becomes a
paragraph, and so does an island of one cell. Policy for hidden content: a hidden sheet's
pieces carry ``bbox_reason=hidden``; hidden rows leave the table and come as one extra
``hidden`` piece per table; hidden columns stay (listed in the piece's meta).
"""

from __future__ import annotations

from dataclasses import replace

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.base import BaseChunker, ChunkerConfig
from ingest_pipeline.chunkers.grid import Grid, GridCell, GridChecks, paragraph_piece, table_pieces, with_reason
from ingest_pipeline.contract import ChunkPiece, PageChunks, PageOutput

Rect = tuple[int, int, int, int]
_MAX_COMPONENTS_TO_MERGE = 2000


class XlsxConfig(ChunkerConfig):
    max_chars: int = 2000
    title_rows: bool = True


def _components(filled: set[tuple[int, int]]) -> list[Rect]:
    """Bounding boxes of the 4-connected components of ``filled``."""
    seen: set[tuple[int, int]] = set()
    boxes: list[Rect] = []
    for start in sorted(filled):
        if start in seen:
            continue
        seen.add(start)
        stack = [start]
        r0, c0, r1, c1 = start[0], start[1], start[0], start[1]
        while stack:
            r, c = stack.pop()
            r0, c0, r1, c1 = min(r0, r), min(c0, c), max(r1, r), max(c1, c)
            for n in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                if n in filled and n not in seen:
                    seen.add(n)
                    stack.append(n)
        boxes.append((r0, c0, r1, c1))
    return boxes


def _touch(a: Rect, b: Rect) -> bool:
    """True when ``b`` overlaps ``a`` or lies along one of its sides (not corners)."""
    overlap_rows = a[0] <= b[2] and b[0] <= a[2]
    overlap_cols = a[1] <= b[3] and b[1] <= a[3]
    near_rows = a[0] - 1 <= b[2] and b[0] <= a[2] + 1
    near_cols = a[1] - 1 <= b[3] and b[1] <= a[3] + 1
    return (overlap_rows and near_cols) or (overlap_cols and near_rows)


def _merge_boxes(boxes: list[Rect]) -> list[Rect]:
    if len(boxes) > _MAX_COMPONENTS_TO_MERGE:
        return boxes
    changed = True
    while changed:
        changed = False
        out: list[Rect] = []
        for box in boxes:
            for i, other in enumerate(out):
                if _touch(other, box):
                    out[i] = (min(box[0], other[0]), min(box[1], other[1]), max(box[2], other[2]), max(box[3], other[3]))
                    changed = True
                    break
            else:
                out.append(box)
        boxes = out
    return sorted(boxes)


def find_islands(sheet) -> list[Rect]:
    """Data islands of a sheet (rectangles, 0-based inclusive), top to bottom."""
    filled = set(sheet.cells)
    for r0, c0, r1, c1 in sheet.merges:
        if (r1 - r0 + 1) * (c1 - c0 + 1) > 100_000:
            continue
        filled.update((r, c) for r in range(r0, r1 + 1) for c in range(c0, c1 + 1))
    explicit = [area for _name, area in sheet.tables]
    if explicit:
        filled = {p for p in filled if not any(a[0] <= p[0] <= a[2] and a[1] <= p[1] <= a[3] for a in explicit)}
    boxes = _merge_boxes(_components(filled)) + list(explicit)
    return sorted(boxes)


class XlsxChunker(GridChecks, BaseChunker):
    id = "xlsx"
    version = 1
    summary = "a table (data island) of a worksheet with its cells, or a title above one"
    media_types = frozenset({mt.XLSX, mt.XLSM})
    builtin = True
    opt_in = True
    Config = XlsxConfig

    def chunk(self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]) -> tuple[PageChunks, ...]:
        from ingest_pipeline.ooxml_safety import PackageError
        from ingest_pipeline.readers.xlsx import load_sheets

        try:
            sheets = load_sheets(content)
        except PackageError:
            return ()
        readable = {p.page for p in pages if p.readable} if pages else None
        answer = []
        for sheet in sheets:
            page = sheet.index + 1
            if sheet.error:
                continue
            if readable is not None and page not in readable:
                continue
            pieces = self.sheet_pieces(sheet)
            if pieces:
                answer.append(PageChunks(page=page, pieces=tuple(pieces)))
        return tuple(answer)

    def sheet_pieces(self, sheet) -> list[ChunkPiece]:
        pieces: list[ChunkPiece] = []
        merges_by_origin = {(m[0], m[1]): m for m in sheet.merges}
        for number, island in enumerate(find_islands(sheet)):
            pieces.extend(self._island_pieces(sheet, island, number, merges_by_origin))
        for number, chart in enumerate(sheet.charts):
            meta = {"sheet": sheet.name, "chart_index": number}
            caption = paragraph_piece(chart.caption(), role="chart_title", meta=meta)
            if caption:
                pieces.append(caption)
            if chart.rows:
                grid = Grid(rows=len(chart.rows), cols=max(len(r) for r in chart.rows), header_rows=1,
                            cells=[GridCell(r, c, v) for r, row in enumerate(chart.rows) for c, v in enumerate(row) if v])
                pieces.extend(table_pieces(grid, self.config.max_chars, role="chart", meta=meta))
        pieces = [replace(p, header_path=(sheet.name,)) for p in pieces]
        if sheet.hidden:
            pieces = [with_reason(p, "hidden") for p in pieces]
        return pieces

    def _island_pieces(self, sheet, island: Rect, number: int, merges_by_origin) -> list[ChunkPiece]:
        r0, c0, r1, c1 = island
        cells = sheet.cells
        base_meta = {"sheet": sheet.name, "range": _a1(island)}
        out: list[ChunkPiece] = []
        hidden_lines = []
        rows = []
        merged_rows = {r for m in sheet.merges if m[1] <= c1 and c0 <= m[3] for r in range(max(m[0], r0), min(m[2], r1) + 1)}
        for r in range(r0, r1 + 1):
            values = [cells[(r, c)] for c in range(c0, c1 + 1) if (r, c) in cells]
            if not values and r not in merged_rows:
                continue
            if r in sheet.hidden_rows:
                if values:
                    hidden_lines.append("\t".join(" ".join(v.split()) for v in values))
            else:
                rows.append(r)
        if not any((r, c) in cells for r in rows for c in range(c0, c1 + 1)):
            rows = []

        def count(r: int) -> int:
            return sum(1 for c in range(c0, c1 + 1) if (r, c) in cells)

        # Titles: a leading row holding one value above a row holding several.
        while self.config.title_rows and len(rows) > 1 and c1 > c0:
            first = rows[0]
            values = [(c, cells[(first, c)]) for c in range(c0, c1 + 1) if (first, c) in cells]
            if len(values) != 1 or count(rows[1]) < 2:
                break
            piece = paragraph_piece(values[0][1], role="title", meta={**base_meta, "cell": _a1((first, values[0][0], first, values[0][0]))})
            if piece:
                out.append(piece)
            rows = rows[1:]
        if len(rows) == 1:
            values = [cells[(rows[0], c)] for c in range(c0, c1 + 1) if (rows[0], c) in cells]
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

    def _table(self, sheet, rows: list[int], c0: int, c1: int, merges_by_origin, meta, number) -> list[ChunkPiece]:
        cells = sheet.cells
        index = {r: i for i, r in enumerate(rows)}
        # Trim empty edge columns left by titles peeled off above.
        island_c0, island_c1 = c0, c1
        used = sorted({c for r in rows for c in range(c0, c1 + 1) if (r, c) in cells or (r, c) in merges_by_origin})
        c0, c1 = used[0], used[-1]
        for r in rows:
            for c in range(c0, c1 + 1):
                merge = merges_by_origin.get((r, c))
                if merge:
                    c1 = max(c1, min(merge[3], island_c1))
        c0 = max(c0, island_c0)
        grid_cells: list[GridCell] = []
        covered: dict[tuple[int, int], int] = {}
        for r in rows:
            for c in range(c0, c1 + 1):
                value = cells.get((r, c))
                merge = merges_by_origin.get((r, c))
                if (r, c) in covered:
                    if value is not None:
                        origin = grid_cells[covered[(r, c)]]
                        grid_cells[covered[(r, c)]] = GridCell(origin.row, origin.col, f"{origin.text}\n{value}".strip(),
                                                               origin.row_span, origin.col_span)
                    continue
                if value is None and merge is None:
                    continue
                row_span = col_span = 1
                if merge:
                    span_rows = [x for x in rows if merge[0] <= x <= merge[2]]
                    row_span = max(1, len(span_rows))
                    col_span = max(1, min(merge[3], c1) - c + 1)
                    for x in span_rows:
                        for y in range(c, c + col_span):
                            if (x, y) != (r, c):
                                covered[(x, y)] = len(grid_cells)
                grid_cells.append(GridCell(index[r], c - c0, value or "", row_span, col_span))
        grid = Grid(rows=len(rows), cols=c1 - c0 + 1, cells=[g for g in grid_cells if g.text or g.row_span > 1 or g.col_span > 1], header_rows=1)
        table_meta = {**meta, "range": _a1((rows[0], c0, rows[-1], c1)), "table_index": number}
        if sheet.hidden_cols & set(range(c0, c1 + 1)):
            table_meta["hidden_cols"] = sorted(c - c0 for c in sheet.hidden_cols if c0 <= c <= c1)
        return table_pieces(grid, self.config.max_chars, meta=table_meta)


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
