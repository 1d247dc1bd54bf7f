"""The DOCX reader: a page per Word section, from the section model of ``office.docx``."""

from __future__ import annotations

from ingest_pipeline import media_types as mt
from ingest_pipeline.contract import PageOutput
from ingest_pipeline.office.docx import load_docx
from ingest_pipeline.readers.base import ReadOptions


class DocxReader:
    """A page per section; text = paragraphs and tables (rows of tab-separated cells)."""

    id = "docx_sections"
    version = 1
    media_types = frozenset({mt.DOCX})

    def read(self, content: bytes, media_type: str, options: ReadOptions) -> tuple[PageOutput, ...]:
        ref = f"{self.id}@{self.version}"
        pages = []
        for section in load_docx(content):
            text = section.text()
            if text.strip():
                pages.append(PageOutput(page=section.index + 1, status="read", reader=ref, text=text))
            else:
                pages.append(PageOutput(page=section.index + 1, status="blank", reader=ref, text=""))
        return tuple(pages)
