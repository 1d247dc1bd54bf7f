"""Page readers by media type; ``read_pages`` is the one entry point."""

from __future__ import annotations

from collections.abc import Mapping

from ingest_pipeline import media_types as mt
from ingest_pipeline.contract import PageOutput
from ingest_pipeline.readers.base import PageReader, ReadOptions
from ingest_pipeline.readers.docx import DocxReader
from ingest_pipeline.readers.ocr import DEFAULT_OCR_DPI, RapidOcrReader, ocr_dpi, ocr_enabled, ocr_pdf_pages
from ingest_pipeline.readers.pdf import PdfTextReader
from ingest_pipeline.readers.pptx import PptxReader
from ingest_pipeline.readers.text import TextReader
from ingest_pipeline.readers.xlsx import Ole2Reader, XlsxReader


class UnsupportedMediaType(Exception):
    """No installed reader handles this media type."""


READERS: tuple[PageReader, ...] = (TextReader(), PdfTextReader())
READERS += (PptxReader(), DocxReader(), XlsxReader(), Ole2Reader())
READERS += (RapidOcrReader(),)


def reader_for(media_type: str) -> PageReader:
    for reader in READERS:
        if media_type in reader.media_types:
            return reader
    raise UnsupportedMediaType(f"no reader for media type {media_type}")


def read_pages(content: bytes, media_type: str, options: ReadOptions | None = None) -> tuple[PageOutput, ...]:
    """Read every page of a document; raises for a document that cannot be opened.
    Image-only PDF pages then go to the OCR reader."""
    options = options or ReadOptions()
    pages = reader_for(media_type).read(content, media_type, options)
    if media_type == mt.PDF:
        pages = ocr_pdf_pages(content, pages, options)
    return pages


def reader_ids() -> frozenset[str]:
    return frozenset(r.id for r in READERS)


# The readers' settings and their defaults. A setting only counts in a document's identity
# when it differs from its default, so a default install keeps its fingerprints and ids.
READER_DEFAULTS: dict[str, object] = {"ocr": True, "ocr_dpi": DEFAULT_OCR_DPI}


def reader_settings(media_type: str, route: Mapping[str, object] | None = None) -> dict[str, object]:
    """The settings, with their current values, that change what the readers make of a
    document of ``media_type``: for a PDF, OCR on or off and the resolution its
    image-only pages are rendered at for OCR (``INGEST_OCR``, ``INGEST_OCR_DPI``, or the
    ``ocr`` and ``ocr_dpi`` of the document's route)."""
    if media_type == mt.PDF:
        return {"ocr": ocr_enabled(), "ocr_dpi": ocr_dpi(), **(route or {})}
    return {}


def changed_settings(settings: dict[str, object]) -> dict[str, object]:
    """The settings that differ from their defaults."""
    return {k: v for k, v in sorted(settings.items()) if READER_DEFAULTS.get(k) != v}
