"""page@1: the fallback chunker, one chunk per readable non-blank page."""

from __future__ import annotations

from ingest_pipeline.chunkers.base import BaseChunker
from ingest_pipeline.contract import ChunkPiece, PageChunks, PageOutput


class PageChunker(BaseChunker):
    id = "page"
    version = 1
    summary = "the whole text of a page"
    builtin = True
    fallback = True

    def chunk(self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]) -> tuple[PageChunks, ...]:
        return tuple(
            PageChunks(
                page=p.page,
                pieces=(ChunkPiece(text=p.text, bbox_reason="no_geometry", content_type="page"),),
            )
            for p in pages
            if p.status == "read" and p.text and p.text.strip()
        )
