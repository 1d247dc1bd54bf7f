"""The OCR reader: RapidOCR (ONNX models shipped in its wheel, runs offline).

It reads PDF pages the text reader found image-only (rendered first) and PNG, JPEG and
TIFF files (one page per image, per frame for TIFF). Its lines are in the pixel space of
the image it saw (``LocatedLine.space``); its id@version goes in ``PageOutput.reader``.
Set ``INGEST_OCR=0`` to leave image-only pages unread; ``INGEST_OCR_DPI`` sets the
render resolution for PDF pages (default 150).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Sequence

from ingest_pipeline import media_types as mt
from ingest_pipeline.contract import LocatedLine, PageOutput
from ingest_pipeline.readers.base import ReadOptions

log = logging.getLogger(__name__)

OCR_ENV = "INGEST_OCR"
OCR_DPI_ENV = "INGEST_OCR_DPI"
DEFAULT_OCR_DPI = 150.0
NEEDS_OCR_PREFIX = "no text layer"

_ENGINE = None
_ENGINE_LOCK = threading.Lock()
_RUN_LOCK = threading.Lock()


def ocr_enabled() -> bool:
    return os.environ.get(OCR_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def ocr_dpi() -> float:
    try:
        dpi = float(os.environ.get(OCR_DPI_ENV, "") or DEFAULT_OCR_DPI)
    except ValueError:
        return DEFAULT_OCR_DPI
    return dpi if 36.0 <= dpi <= 600.0 else DEFAULT_OCR_DPI


def _engine():
    """One RapidOCR engine per process (loading the models takes about a second)."""
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            from rapidocr_onnxruntime import RapidOCR

            _ENGINE = RapidOCR()
        return _ENGINE


def recognize(image) -> tuple[tuple[LocatedLine, ...], str]:
    """OCR a PIL image: located lines (axis-aligned envelopes of the detected
    quadrilaterals, in the image's pixels) and the page text, one line per line."""
    import numpy as np

    rgb = image.convert("RGB")
    width, height = rgb.size
    array = np.asarray(rgb)[:, :, ::-1].copy()  # RapidOCR takes BGR arrays
    engine = _engine()
    with _RUN_LOCK:  # two cores: concurrent runs would only contend
        result, _elapsed = engine(array)
    lines = []
    for quad, text, score in result or ():
        text = (text or "").strip()
        if not text:
            continue
        xs = [float(p[0]) for p in quad]
        ys = [float(p[1]) for p in quad]
        box = (max(min(xs), 0.0), max(min(ys), 0.0), min(max(xs), width), min(max(ys), height))
        if box[2] <= box[0] or box[3] <= box[1]:
            continue
        lines.append(
            LocatedLine(text=text, box=box, space=(float(width), float(height)), confidence=float(score))
        )
    return tuple(lines), "\n".join(line.text for line in lines)


class RapidOcrReader:
    """Reads scanned images (and, through :func:`ocr_pdf_pages`, image-only PDF pages)."""

    id = "rapidocr"
    version = 1
    media_types = frozenset({mt.PNG, mt.JPEG, mt.TIFF})

    @property
    def ref(self) -> str:
        return f"{self.id}@{self.version}"

    def read(self, content: bytes, media_type: str, options: ReadOptions) -> tuple[PageOutput, ...]:
        import io

        from PIL import Image, ImageSequence, UnidentifiedImageError

        from ingest_pipeline.readers.pdf import DocumentError

        try:
            image = Image.open(io.BytesIO(content))
            image.load()
        except (UnidentifiedImageError, OSError, ValueError) as exc:
            raise DocumentError(f"image cannot be decoded: {exc}") from None
        outputs: list[PageOutput] = []
        try:
            for frame in ImageSequence.Iterator(image):  # one frame in memory at a time
                outputs.append(self.read_image(frame.copy(), len(outputs) + 1))
        except (OSError, ValueError) as exc:
            if not outputs:
                raise DocumentError(f"image cannot be decoded: {exc}") from None
            outputs.append(
                PageOutput(
                    page=len(outputs) + 1,
                    status="failed",
                    reader=self.ref,
                    reason=f"frame cannot be decoded: {exc}",
                )
            )
        return tuple(outputs)

    def read_image(
        self, image, number: int, width: float | None = None, height: float | None = None
    ) -> PageOutput:
        """One page from one image; ``width``/``height`` are the page's own size when
        the image is a rendering of it (else the image's pixels)."""
        w = float(width if width is not None else image.width)
        h = float(height if height is not None else image.height)
        try:
            lines, text = recognize(image)
        except Exception as exc:  # noqa: BLE001 - one image that OCR chokes on fails alone
            log.warning("OCR failed on page %d", number, exc_info=True)
            return PageOutput(
                page=number, status="failed", reader=self.ref, reason=f"OCR failed: {exc}", width=w, height=h
            )
        if not lines:
            return PageOutput(
                page=number,
                status="unreadable",
                reader=self.ref,
                width=w,
                height=h,
                reason="no text layer and OCR found no text",
            )
        return PageOutput(
            page=number, status="read", reader=self.ref, text=text, width=w, height=h, lines=lines
        )


def needs_ocr(page: PageOutput) -> bool:
    return page.status == "unreadable" and (page.reason or "").startswith(NEEDS_OCR_PREFIX)


def ocr_concerns(page: PageOutput) -> bool:
    """Whether the OCR settings decide this page's output: OCR read it, or it is an
    image-only page OCR was off for or found nothing on."""
    return page.reader.startswith(f"{RapidOcrReader.id}@") or needs_ocr(page)


def ocr_pdf_pages(
    content: bytes, pages: Sequence[PageOutput], options: ReadOptions
) -> tuple[PageOutput, ...]:
    """Replace the image-only pages of a PDF by what OCR reads on them; pages OCR reads
    nothing on stay unreadable, now with OCR's verdict (pdf@1 renders them to images)."""
    todo = [p for p in pages if needs_ocr(p)]
    if not todo or not (ocr_enabled() if options.ocr is None else options.ocr):
        return tuple(pages)
    try:
        import rapidocr_onnxruntime  # noqa: F401
    except ImportError:
        log.warning("rapidocr-onnxruntime is not installed: %d image-only pages stay unread", len(todo))
        return tuple(pages)
    from ingest_pipeline.readers.pdf import PDFIUM_LOCK, DocumentError, open_pdf

    reader = RapidOcrReader()
    scale = (ocr_dpi() if options.ocr_dpi is None else options.ocr_dpi) / 72.0
    replaced: dict[int, PageOutput] = {}
    with PDFIUM_LOCK:
        try:
            pdf = open_pdf(content, options.password)
        except DocumentError:
            return tuple(pages)
    try:
        for page in todo:
            try:
                with PDFIUM_LOCK:
                    pdf_page = pdf[page.page - 1]
                    try:
                        bitmap = pdf_page.render(scale=scale)
                        image = bitmap.to_pil().copy()
                        bitmap.close()
                    finally:
                        pdf_page.close()
            except Exception:  # noqa: BLE001 - a page that will not render stays unread
                log.warning("could not render page %d for OCR", page.page, exc_info=True)
                continue
            result = reader.read_image(image, page.page, page.width, page.height)
            if result.status in ("read", "unreadable"):
                # an unreadable verdict now says OCR tried; PDFium's verdict stays as a rung
                earlier = (*page.earlier, (page.reader, page.status, page.reason))
                replaced[page.page] = dataclasses.replace(result, earlier=earlier)
    finally:
        with PDFIUM_LOCK:
            pdf.close()
    return tuple(replaced.get(p.page, p) for p in pages)
