"""Chunkers over a reader's located lines (OCR): lines@1 one chunk per line, lines@2
paragraphs. They never reopen the bytes, so they serve any media type."""

from __future__ import annotations

from ingest_pipeline.chunkers.base import BaseChunker
from ingest_pipeline.contract import (
    ChunkPiece,
    Layout,
    LocatedLine,
    PageChunks,
    PageOutput,
    normalize_box,
)


def _usable(line: LocatedLine) -> bool:
    return bool(line.text and line.text.strip())


class LinesChunker(BaseChunker):
    """lines@1: one chunk per located line, at the line's normalized box."""

    id = "lines"
    version = 1
    summary = "a line a reader located on a page (OCR), with its box"
    builtin = True

    def chunk(self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]) -> tuple[PageChunks, ...]:
        out = []
        for page in pages:
            if not page.lines:
                continue  # no located lines: not mine
            pieces = []
            for i, line in enumerate(page.lines):
                if not _usable(line):
                    continue
                text = " ".join(line.text.split())
                bbox = line.bbox()
                if bbox is None:
                    pieces.append(
                        ChunkPiece(text=text, bbox_reason="unresolved", content_type="line", meta={"line": i})
                    )
                else:
                    pieces.append(ChunkPiece(text=text, bbox=bbox, content_type="line", meta={"line": i}))
            out.append(PageChunks(page=page.page, pieces=tuple(pieces)))
        return tuple(out)


class LineParagraphsChunker(BaseChunker):
    """lines@2: located lines grouped into paragraphs with pdf@2's geometry rules, boxes
    normalized by the space of the image the reader saw."""

    id = "lines"
    version = 2
    summary = "a paragraph of located lines (OCR), with the union box of its lines"
    builtin = True
    opt_in = True

    def chunk(self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]) -> tuple[PageChunks, ...]:
        from ingest_pipeline.layout.lines import Line
        from ingest_pipeline.layout.paragraphs import paragraphs
        from ingest_pipeline.layout.reading_order import order_lines

        out = []
        for page in pages:
            usable = [ln for ln in page.lines or () if _usable(ln)]
            if not page.lines:
                continue
            if not usable:
                out.append(PageChunks(page=page.page, pieces=()))
                continue
            width, height = usable[0].space
            lines = []
            for i, ln in enumerate(usable):
                bbox = ln.bbox()
                if bbox is None:
                    continue
                x0, y0, x1, y1 = bbox[0] * width, bbox[1] * height, bbox[2] * width, bbox[3] * height
                # OCR boxes hold ascenders and descenders: about 1.2 font sizes tall
                lines.append(
                    Line(
                        " ".join(ln.text.split()),
                        x0,
                        y0,
                        x1,
                        y1,
                        direction=0,
                        size=(y1 - y0) / 1.2,
                        first_char=i,
                    )
                )
            ordered = order_lines(lines, width)
            pieces = []
            for par in paragraphs(ordered, height):
                x0, y0, x1, y1 = par.box
                bbox = normalize_box((x0, y0, x1, y1), width, height)
                if bbox is None:
                    pieces.append(
                        ChunkPiece(
                            text=par.text,
                            bbox_reason="unresolved",
                            layout=Layout(role=par.role),
                            content_type="paragraph",
                        )
                    )
                else:
                    pieces.append(
                        ChunkPiece(
                            text=par.text,
                            bbox=bbox,
                            layout=Layout(role=par.role),
                            content_type="paragraph",
                            meta={"lines": len(par.lines)},
                        )
                    )
            out.append(PageChunks(page=page.page, pieces=tuple(pieces)))
        return tuple(out)
