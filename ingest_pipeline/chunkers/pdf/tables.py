"""pdf@3: a PDF page's ruled tables as cell grids (header row repeated per piece), the
rest of its text as pdf@2's paragraphs."""

from __future__ import annotations

import logging

from pydantic import Field

from ingest_pipeline.chunkers.base import ChunkerConfig
from ingest_pipeline.chunkers.grid import flatten_cell, pack_rows
from ingest_pipeline.chunkers.pdf.page_layer import text_piece
from ingest_pipeline.chunkers.pdf.paragraphs import PdfParagraphsChunker, paragraph_pieces
from ingest_pipeline.contract import ChunkPiece, Layout, TableCell, TableLayout

log = logging.getLogger(__name__)


class TableConfig(ChunkerConfig):
    max_table_chars: int = Field(
        default=2000, ge=50, description="split a table's rows over pieces past this size"
    )


class PdfTablesChunker(PdfParagraphsChunker):
    """pdf@3: ruled tables as cell grids (header row repeated per piece), the other text
    as pdf@2 paragraphs."""

    id = "pdf"
    version = 3
    summary = "a ruled table of a PDF page as a cell grid, or a paragraph outside tables"
    Config = TableConfig

    @staticmethod
    def _grids(page, textpage, frame):
        """The page's ruled tables with their cells filled (lock held by the caller)."""
        import ctypes

        import pypdfium2.raw as raw

        from ingest_pipeline.layout.pdfium_text import page_text
        from ingest_pipeline.layout.ruled_tables import (
            fill_ruled_tables,
            find_ruled_tables,
            page_rules,
            usable_ruled_table,
        )

        try:
            grids = find_ruled_tables(page_rules(page, frame, raw, ctypes))
            if not grids:
                return []
            fill_ruled_tables(grids, textpage, frame, raw, ctypes, page_text(textpage, raw))
            return [g for g in grids if usable_ruled_table(g)]
        except Exception:  # noqa: BLE001 - a page whose rules will not parse keeps its paragraphs
            log.warning("pdf@3 could not read the rules of a page", exc_info=True)
            return []

    page_extra = _grids  # the hook pdf@2's walk calls on each loaded page

    def page_pieces(self, lines, frame, running: set[int], grids) -> list[ChunkPiece]:
        from ingest_pipeline.layout.paragraphs import paragraphs

        def inside(ln, g) -> bool:
            x0, y0, x1, y1 = g.box
            return x0 <= ln.cx <= x1 and y0 <= ln.cy <= y1

        keep_idx = [i for i, ln in enumerate(lines) if not any(inside(ln, g) for g in grids)]
        kept = [lines[i] for i in keep_idx]
        remap = {old: new for new, old in enumerate(keep_idx)}
        pars = paragraphs(kept, frame.height, {remap[i] for i in running if i in remap})
        pieces = paragraph_pieces(pars, frame)  # one piece per paragraph
        placed = []
        for g in grids:
            placed.append((self._table_position(pars, g.box), g.box[1], self._table_pieces(g, frame)))
        # insert from the back so earlier positions stay valid; tables at one position by height
        for at, _top, table_pieces in sorted(placed, key=lambda t: (-t[0], -t[1])):
            pieces[at:at] = table_pieces
        return pieces

    @staticmethod
    def _table_position(pars, box) -> int:
        """Where a table goes among the paragraphs (in reading order): before the first
        paragraph of its column below its top, else after the last one of its column
        above it, else by height alone."""
        x0, y0, x1, _y1 = box
        column = [k for k, p in enumerate(pars) if min(p.box[2], x1) - max(p.box[0], x0) > 0]
        below = [k for k in column if pars[k].box[1] >= y0]
        if below:
            return below[0]
        if column:
            return column[-1] + 1
        return next((k for k, p in enumerate(pars) if p.box[1] >= y0), len(pars))

    def _table_pieces(self, grid, frame) -> list[ChunkPiece]:
        """One piece per run of rows that fits ``max_table_chars`` (grid.pack_rows, as the
        Office and delimited tables); every piece starts with the header row. Unlike
        grid.table_pieces, pdf@3 writes a cell's tabs and newlines as plain spaces, drops
        rows without cells and cuts a row span at a piece's end rather than keeping the
        rows it ties together: its output is kept as it was cut when pdf@3 was released."""
        rows: dict[int, list] = {}
        for cell in grid.cells:
            rows.setdefault(cell.row, []).append(cell)

        def row_text(r: int) -> str:
            texts = [""] * grid.cols
            for cell in rows.get(r, []):
                texts[cell.col] = flatten_cell(cell.text)
            return "\t".join(texts)

        header = [0] if grid.rows > 1 else []
        body = [r for r in range(grid.rows) if r not in header and r in rows]
        length = {r: len(row_text(r)) + 1 for r in header + body}
        parts = pack_rows(header, [[r] for r in body], length, self.config.max_table_chars)
        pieces = []
        for k, order in enumerate(parts):
            part = order[len(header) :]
            new_row = {r: i for i, r in enumerate(order)}
            cells = []
            boxes = []
            for r in order:
                for cell in sorted(rows.get(r, []), key=lambda c: c.col):
                    span = cell.row_span
                    last = r + span - 1
                    if r not in header and last not in part:
                        span = sum(1 for rr in range(r, last + 1) if rr in part) or 1
                    cells.append(
                        TableCell(
                            row=new_row[r],
                            col=cell.col,
                            text=cell.text,
                            row_span=min(span, len(order) - new_row[r]),
                            col_span=cell.col_span,
                            bbox=frame.normalize(cell.box),
                            header=r in header,
                        )
                    )
                    boxes.append(cell.box)
            text = "\n".join(row_text(r) for r in order)
            x0 = min(b[0] for b in boxes)
            y0 = min(b[1] for b in boxes)
            x1 = max(b[2] for b in boxes)
            y1 = max(b[3] for b in boxes)
            layout = Layout(
                role="table",
                table=TableLayout(
                    rows=len(order), cols=grid.cols, cells=tuple(cells), header_rows=len(header)
                ),
            )
            piece = text_piece(
                text,
                (x0, y0, x1, y1),
                frame,
                layout=layout,
                content_type="table",
                meta={"table_part": k, "table_parts": len(parts), "table_rows": grid.rows},
            )
            if piece is not None:
                pieces.append(piece)
        return pieces
