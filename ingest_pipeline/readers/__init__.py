"""Page readers by media type; ``read_pages`` is the one entry point."""

from __future__ import annotations

from ingest_pipeline import media_types as mt
from ingest_pipeline.contract import PageOutput
from ingest_pipeline.readers.base import PageReader, ReadOptions
from ingest_pipeline.readers.ocr import RapidOcrReader, ocr_pdf_pages
from ingest_pipeline.readers.pdf import PdfTextReader
from ingest_pipeline.readers.text import TextReader
from ingest_pipeline.readers.docx import DocxReader
from ingest_pipeline.readers.pptx import PptxReader
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
