"""pptx@1 and pptx@2: a chunk per text-bearing shape, table, chart or diagram and an
image chunk per raster picture, each at the box the slide states.

Boxes come from the shared slide walk (``office/pptx.py``): group transforms composed
down nested groups, placeholder frames inherited from layout then master. A hidden shape
(or any shape of a hidden slide) gets ``bbox_reason=hidden``; a frame that cannot be
worked out gets ``unresolved``. Reading order is the title first, then top to bottom and
left to right. Speaker notes come last, without geometry. pptx@2 cuts the same chunks and
adds the table grid (a box per cell, merges as spans) to table chunks.
"""

from __future__ import annotations

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.base import ChunkerConfig, outside_media_types
from ingest_pipeline.chunkers.grid import Grid, GridCell, render_rows
from ingest_pipeline.chunkers.ooxml import OoxmlChunker
from ingest_pipeline.contract import ChunkPiece, Layout, TableCell, TableLayout, normalize_box


class PptxConfig(ChunkerConfig):
    include_notes: bool = True


class PptxChunker(OoxmlChunker):
    id = "pptx"
    version = 1
    summary = "a slide's text shape, table, chart or diagram at its box, or a picture"
    media_types = frozenset({mt.PPTX})
    disclaims = outside_media_types  # its own fast answer: nothing outside media_types
    builtin = True
    Config = PptxConfig
    table_cells = False

    def parts(self, content: bytes) -> list:
        from ingest_pipeline.office.pptx import load_presentation

        return load_presentation(content)

    def part_pieces(self, slide, walk=None) -> list[ChunkPiece]:
        pieces = []
        for item in slide.ordered():
            piece = self._piece(slide, item)
            if piece is not None:
                pieces.append(piece)
        if self.config.include_notes and slide.notes.strip():
            reason = "hidden" if slide.hidden else "no_geometry"
            pieces.append(
                ChunkPiece(
                    text=slide.notes, bbox_reason=reason, layout=Layout(role="notes"), content_type="notes"
                )
            )
        return pieces

    def _where(self, slide, item) -> tuple[tuple | None, str | None]:
        if item.hidden:
            return None, "hidden"
        if item.frame is None:
            return None, item.frame_reason or "unresolved"
        box = normalize_box(item.frame, slide.width, slide.height)
        return (box, None) if box is not None else (None, "unresolved")

    def _piece(self, slide, item) -> ChunkPiece | None:
        bbox, reason = self._where(slide, item)
        meta: dict = {"shape": item.name} if item.name else {}
        if item.hidden and item.frame is not None:
            # The contract gives a hidden piece no bbox; the stated box stays findable.
            stated = normalize_box(item.frame, slide.width, slide.height)
            if stated is not None:
                meta["hidden_bbox"] = list(stated)
        if item.kind == "picture":
            if not item.image:
                return None
            return ChunkPiece(
                image=item.image,
                bbox=bbox,
                bbox_reason=reason,
                content_type="picture",
                meta={**meta, "image_type": item.image_type},
            )
        if item.kind == "table":
            grid = Grid(
                rows=item.rows,
                cols=item.cols,
                header_rows=1,
                cells=[GridCell(c.row, c.col, c.text, c.row_span, c.col_span) for c in item.cells],
            )
            text = "\n".join(render_rows(grid, range(grid.rows)))
            if not text.strip():
                return None
            return ChunkPiece(
                text=text,
                bbox=bbox,
                bbox_reason=reason,
                layout=self._table_layout(slide, item),
                content_type="table",
                meta={**meta, "table_rows": item.rows, "table_cols": item.cols},
            )
        if not item.text.strip():
            return None
        role = "title" if item.title else {"text": "text"}.get(item.kind, item.kind)
        return ChunkPiece(
            text=item.text,
            bbox=bbox,
            bbox_reason=reason,
            layout=Layout(role=role),
            content_type=role,
            meta=meta,
        )

    def _table_layout(self, slide, item) -> Layout:
        if not self.table_cells:
            return Layout(role="table")
        cells = []
        for c in item.cells:
            box = None
            if c.box is not None and not item.hidden:
                box = normalize_box(c.box, slide.width, slide.height)
            cells.append(
                TableCell(
                    row=c.row,
                    col=c.col,
                    text=c.text,
                    row_span=c.row_span,
                    col_span=c.col_span,
                    bbox=box,
                    header=c.row == 0,
                )
            )
        return Layout(
            role="table", table=TableLayout(rows=item.rows, cols=item.cols, cells=tuple(cells), header_rows=1)
        )


class PptxTableChunker(PptxChunker):
    id = "pptx"
    version = 2
    summary = "as pptx@1, and table chunks carry their cells with a box per cell"
    opt_in = True
    table_cells = True
