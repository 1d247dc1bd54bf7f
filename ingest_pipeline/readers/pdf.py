"""The PDF text reader: per-page text from PDFium, with a verdict per page."""

from __future__ import annotations

import threading

from ingest_pipeline import media_types as mt
from ingest_pipeline.contract import PageOutput
from ingest_pipeline.readers.base import ReadOptions

# PDFium is not thread-safe, not even across documents: every call goes through this.
PDFIUM_LOCK = threading.RLock()


class DocumentError(Exception):
    """The document as a whole cannot be read (corrupt, encrypted, not a PDF)."""


def open_pdf(content: bytes, password: str | None = None):
    """Open PDF bytes with PDFium (caller holds PDFIUM_LOCK); DocumentError if it won't."""
    import pypdfium2 as pdfium

    start = content.find(b"%PDF-", 0, mt.PDF_HEADER_WINDOW)
    if start < 0:
        raise DocumentError("not a PDF: no %PDF- header in the first KiB")
    data = content[start:] if start else content
    try:
        return pdfium.PdfDocument(data, password=password)
    except pdfium.PdfiumError as exc:
        message = str(exc)
        if "password" in message.lower():
            if password:
                raise DocumentError("encrypted PDF: the supplied password is wrong") from None
            raise DocumentError(
                "encrypted PDF: it needs a password (put it in passwords.toml under the storage root)"
            ) from None
        raise DocumentError(f"PDFium cannot open it: {message}") from None


class PdfTextReader:
    """Reads each page's text with PDFium; a page with images but no text layer is
    ``unreadable`` (it needs OCR or rendering), one with neither is ``blank``."""

    id = "pdfium_text"
    version = 1
    media_types = frozenset({mt.PDF})

    def read(self, content: bytes, media_type: str, options: ReadOptions) -> tuple[PageOutput, ...]:
        import pypdfium2 as pdfium
        import pypdfium2.raw as raw

        ref = f"{self.id}@{self.version}"
        with PDFIUM_LOCK:
            pdf = open_pdf(content, options.password)
            try:
                outputs = []
                for index in range(len(pdf)):
                    outputs.append(self._read_page(pdf, index, ref, pdfium, raw))
                return tuple(outputs)
            finally:
                pdf.close()

    @staticmethod
    def _read_page(pdf, index: int, ref: str, pdfium, raw) -> PageOutput:
        number = index + 1
        try:
            page = pdf[index]
        except pdfium.PdfiumError as exc:
            return PageOutput(page=number, status="failed", reader=ref, reason=f"page will not load: {exc}")
        try:
            width, height = page.get_size()
            textpage = page.get_textpage()
            try:
                count = textpage.count_chars()
                text = textpage.get_text_range() if count > 0 else ""
            finally:
                textpage.close()
            text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
            if text.strip():
                return PageOutput(
                    page=number, status="read", reader=ref, text=text, width=width, height=height
                )
            has_image = any(True for _ in page.get_objects(filter=[raw.FPDF_PAGEOBJ_IMAGE], max_depth=4))
            if has_image:
                return PageOutput(
                    page=number,
                    status="unreadable",
                    reader=ref,
                    width=width,
                    height=height,
                    reason="no text layer (image-only page)",
                )
            return PageOutput(page=number, status="blank", reader=ref, text="", width=width, height=height)
        except pdfium.PdfiumError as exc:
            return PageOutput(page=number, status="failed", reader=ref, reason=f"PDFium: {exc}")
        finally:
            page.close()
