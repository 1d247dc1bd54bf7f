"""pdf@2: the visual lines of a PDF page grouped into paragraphs, running headers and
footers apart; its page walk is pdf@3's too."""

from __future__ import annotations

import logging

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.base import outside_media_types
from ingest_pipeline.chunkers.pdf.page_layer import PageLayer, PdfChunker, text_piece
from ingest_pipeline.contract import ChunkPiece, Layout, PageChunks, PageOutput

log = logging.getLogger(__name__)


def _document_lines(layer: PageLayer, pdf, pages: tuple[PageOutput, ...], extra=None):
    """Per readable page with a text layer, laid out through ``layer``: (PageOutput, lines,
    frame, extra). Pages that fail to lay out are skipped (they cost only themselves)."""
    found = []
    count = len(pdf)
    for po in pages:
        if po.status != "read" or not 1 <= po.page <= count:
            continue
        try:
            lines, frame, n, _unit, more = layer.page_lines(pdf, po.page - 1, extra)
        except Exception:  # noqa: BLE001
            log.warning("layout failed on page %d", po.page, exc_info=True)
            continue
        if n:
            found.append((po, lines, frame, more))
    return found


def paragraph_pieces(paragraphs, frame) -> list[ChunkPiece]:
    pieces = []
    for par in paragraphs:
        piece = text_piece(
            par.text,
            par.box,
            frame,
            layout=Layout(role=par.role),
            content_type="paragraph",
            meta={"lines": len(par.lines)},
        )
        if piece is not None:
            pieces.append(piece)
    return pieces


def _running(found) -> list[set[int]]:
    from ingest_pipeline.layout.paragraphs import running_lines

    marks = running_lines([f[1] for f in found], [f[2].height for f in found])
    per_page: list[set[int]] = [set() for _ in found]
    for p, i in marks:
        per_page[p].add(i)
    return per_page


class PdfParagraphsChunker(PdfChunker):
    """pdf@2: the lines of pdf@1 grouped into paragraphs; renders nothing.

    Its walk is pdf@3's too: ``page_extra`` adds per-page work on the loaded page (pdf@3
    finds ruled tables there) and ``page_pieces`` cuts one page."""

    id = "pdf"
    version = 2
    summary = "a paragraph of a PDF page (its lines' union box); headers and footers apart"
    media_types = frozenset({mt.PDF})
    disclaims = outside_media_types  # its own fast answer: nothing outside media_types
    builtin = True
    opt_in = True
    page_extra = None  # or (page, textpage, frame) -> extra, called with the PDFium lock held

    def chunk(self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]) -> tuple[PageChunks, ...]:
        if not pages:
            return ()
        with self.layer.opened(content) as pdf:
            if pdf is None:
                return ()
            found = _document_lines(self.layer, pdf, pages, self.page_extra)
        out = []
        for (po, lines, frame, extra), running in zip(found, _running(found)):
            pieces = tuple(self.page_pieces(lines, frame, running, extra))
            said = tuple(lines[i].text for i in sorted(running)) if not pieces else ()  # running lines only
            out.append(PageChunks(page=po.page, pieces=pieces, left_out=said))
        return tuple(out)

    def page_pieces(self, lines, frame, running: set[int], extra) -> list[ChunkPiece]:
        from ingest_pipeline.layout.paragraphs import paragraphs

        return paragraph_pieces(paragraphs(lines, frame.height, running), frame)
