"""docx@1: Word paragraphs and tables of each section, in document order.

Each table is one chunk whose layout carries the cells (``gridSpan`` and ``vMerge`` as
spans, each merged cell once); each paragraph is a chunk of its own (role ``heading``,
``list_item``, ``paragraph``, ``textbox`` or ``footnote``) with the heading path above it.
Vanished (hidden) text comes as separate pieces with ``bbox_reason=hidden``.
"""

from __future__ import annotations

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


class DocxConfig(ChunkerConfig):
    max_chars: int = 2000


class DocxChunker(OoxmlChunker):
    id = "docx"
    version = 1
    summary = "a Word paragraph, or a table with its cells"
    media_types = frozenset({mt.DOCX})
    disclaims = outside_media_types  # its own fast answer: nothing outside media_types
    builtin = True
    opt_in = True
    Config = DocxConfig
    walks_unread_parts = True

    def parts(self, content: bytes) -> list:
        from ingest_pipeline.office.docx import load_docx

        return load_docx(content)

    def new_walk(self) -> list[tuple[int, str]]:
        return []  # the heading path, (level, text) pairs, running on across sections

    def part_pieces(self, section, headings: list[tuple[int, str]]) -> list[ChunkPiece]:
        pieces: list[ChunkPiece] = []
        max_chars = self.config.max_chars
        tables = 0
        for block in section.blocks:
            if block.heading_level is not None and block.source == "body" and block.text.strip():
                while headings and headings[-1][0] >= block.heading_level:
                    headings.pop()
            path = tuple(text for _level, text in headings)
            if block.table is not None:
                table = block.table
                grid = Grid(
                    rows=table.rows,
                    cols=table.cols,
                    cells=[GridCell(r, c, text, rs, cs) for r, c, text, rs, cs in table.cells],
                    header_rows=table.header_rows,
                )
                tables += 1
                pieces.extend(
                    table_pieces(
                        grid,
                        max_chars,
                        header_path=path,
                        meta={"table_index": tables, "source": block.source, "nested": block.nested},
                    )
                )
                continue
            text = block.text.strip()
            if block.heading_level is not None and block.source == "body" and text:
                headings.append((block.heading_level, " ".join(text.split())))
                role = "heading"
            elif block.source in ("textbox", "footnote", "endnote"):
                role = "footnote" if block.source == "endnote" else block.source
            elif block.list_item:
                role = "list_item"
            else:
                role = "paragraph"
            meta = {"style": block.style} if block.style else {}
            if block.heading_level is not None:
                meta["level"] = block.heading_level
            for part in split_text(text, max_chars) if text else []:
                piece = paragraph_piece(part, role=role, header_path=path, meta=meta)
                if piece:
                    pieces.append(piece)
            hidden = block.hidden_text.strip()
            if hidden:
                piece = paragraph_piece(hidden, role=role, header_path=path, meta={**meta, "vanished": True})
                if piece:
                    pieces.append(with_reason(piece, "hidden"))
        return pieces
