"""pdf@1: one chunk per visual line of a PDF page, with its box; pages the reader could not
read (failed, unreadable) become page images rendered at the chunk DPI."""

from __future__ import annotations

import io
import logging
import os

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.base import outside_media_types
from ingest_pipeline.chunkers.pdf.page_layer import PageLayer, PdfChunker, text_piece
from ingest_pipeline.contract import ChunkPiece, PageChunks, PageOutput

log = logging.getLogger(__name__)

_UNREAD = ("failed", "unreadable")


def chunk_dpi() -> float:
    """Rendering DPI from ``INGEST_CHUNK_DPI`` (default 120)."""
    from ingest_pipeline.layout.frames import DEFAULT_DPI, DPI_ENV

    try:
        dpi = float(os.environ.get(DPI_ENV, "") or DEFAULT_DPI)
    except ValueError:
        return DEFAULT_DPI
    return dpi if 1.0 <= dpi <= 1200.0 else DEFAULT_DPI


class PdfLinesChunker(PdfChunker):
    """pdf@1: one chunk per visual line; failed or unreadable pages become images."""

    id = "pdf"
    version = 1
    summary = "a visual line of a PDF page, with its box; unread pages as page images"
    media_types = frozenset({mt.PDF})
    disclaims = outside_media_types  # its own fast answer: nothing outside media_types
    builtin = True

    def __init__(self, config=None, layer: PageLayer | None = None) -> None:
        super().__init__(config, layer)
        # Read once, when built: the worker process renders with the DPI that was hashed.
        self.render_dpi = chunk_dpi()

    def environment(self) -> dict:
        from ingest_pipeline.layout.frames import DEFAULT_DPI

        return {} if self.render_dpi == DEFAULT_DPI else {"render_dpi": self.render_dpi}

    def chunk(self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]) -> tuple[PageChunks, ...]:
        if not pages:
            return ()
        out: list[PageChunks] = []
        with self.layer.opened(content) as pdf:
            if pdf is None:
                return ()
            count = len(pdf)
            for po in pages:
                if not 1 <= po.page <= count:
                    continue
                if po.status in _UNREAD:
                    piece = self._rendered(pdf, po.page - 1)
                    if piece is not None:
                        out.append(PageChunks(page=po.page, pieces=(piece,)))
                    continue
                if po.status != "read":
                    continue  # blank: nothing, not even a picture
                try:
                    lines, frame, n, _unit, _ = self.layer.page_lines(pdf, po.page - 1)
                except Exception:  # noqa: BLE001 - one broken page costs only itself
                    log.warning("pdf@1 could not lay out page %d", po.page, exc_info=True)
                    continue
                if n == 0:
                    continue  # no text layer (a scan read by OCR): lines@1's page
                pieces = []
                for ln in lines:
                    piece = text_piece(ln.text, ln.box, frame, content_type="line")
                    if piece is not None:
                        pieces.append(piece)
                out.append(PageChunks(page=po.page, pieces=tuple(pieces)))
        return tuple(out)

    def _rendered(self, pdf, index: int) -> ChunkPiece | None:
        """The page as a PNG image piece at the chunk DPI, or None if it will not render."""
        dpi = getattr(self, "render_dpi", None) or chunk_dpi()
        try:
            image = self.render(pdf, index, dpi / 72.0)
            buffer = io.BytesIO()
            image.save(buffer, format="PNG", optimize=False)
        except Exception:  # noqa: BLE001 - a page that will not rasterize keeps no chunk (D05)
            log.warning("pdf@1 could not render page %d", index + 1, exc_info=True)
            return None
        return ChunkPiece(
            image=buffer.getvalue(),
            bbox=(0.0, 0.0, 1.0, 1.0),
            content_type="page_image",
            meta={"dpi": dpi, "width_px": image.width, "height_px": image.height},
        )

    @staticmethod
    def render(pdf, index: int, scale: float):
        """Render one page (PDFium honours /Rotate and the crop box) to a PIL image."""
        page = pdf[index]
        try:
            bitmap = page.render(scale=scale)
            try:
                return bitmap.to_pil().copy()
            finally:
                bitmap.close()
        finally:
            page.close()
