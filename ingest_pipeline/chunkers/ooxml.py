"""The walk the Office chunkers (docx, xlsx, pptx) share, as a base class with hooks.

A subclass opens the package into its parts (``parts``: Word sections, worksheets,
slides, each with a 0-based ``index`` and, where loading can fail per part, an ``error``)
and cuts one part into pieces (``part_pieces``). The base answers one page per part: a
package that does not open disclaims the document, a part that failed to load or whose
page the reader did not read gets no answer, and a part without pieces neither.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from ingest_pipeline.chunkers.base import BaseChunker
from ingest_pipeline.chunkers.grid import GridChecks
from ingest_pipeline.contract import ChunkPiece, PageChunks, PageOutput


class OoxmlChunker(GridChecks, BaseChunker):
    """An Office chunker: ``parts`` and ``part_pieces`` are the hooks; ``new_walk`` gives
    the state one document's walk carries from part to part (None unless overridden)."""

    # Whether parts on pages the reader did not read are still cut (and their pieces
    # dropped): docx's heading path runs on across sections, so it must see them all.
    walks_unread_parts: ClassVar[bool] = False

    @abstractmethod
    def parts(self, content: bytes) -> Sequence[Any]:
        """The package's parts in page order; raises PackageError for a bad package."""

    @abstractmethod
    def part_pieces(self, part: Any, walk: Any) -> list[ChunkPiece]:
        """The pieces of one part, in reading order."""

    def new_walk(self) -> Any:
        return None

    def chunk(self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]) -> tuple[PageChunks, ...]:
        from ingest_pipeline.office.safety import PackageError

        try:
            parts = self.parts(content)
        except PackageError:
            return ()
        readable = {p.page for p in pages if p.readable} if pages else None
        walk = self.new_walk()
        answer = []
        for part in parts:
            page = part.index + 1
            if getattr(part, "error", None):
                continue
            wanted = readable is None or page in readable
            if not wanted and not self.walks_unread_parts:
                continue
            pieces = self.part_pieces(part, walk)
            if pieces and wanted:
                answer.append(PageChunks(page=page, pieces=tuple(pieces)))
        return tuple(answer)
