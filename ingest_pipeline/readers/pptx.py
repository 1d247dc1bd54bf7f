"""The PPTX reader: a page per slide, from the slide model of ``office.pptx``."""

from __future__ import annotations

from ingest_pipeline import media_types as mt
from ingest_pipeline.contract import PageOutput
from ingest_pipeline.office.pptx import load_presentation
from ingest_pipeline.readers.base import ReadOptions


class PptxReader:
    """A page per slide: shape, table, chart and diagram text in reading order, then notes."""

    id = "pptx_slides"
    version = 1
    media_types = frozenset({mt.PPTX})

    def read(self, content: bytes, media_type: str, options: ReadOptions) -> tuple[PageOutput, ...]:
        ref = f"{self.id}@{self.version}"
        pages = []
        for slide in load_presentation(content):
            if slide.error:
                pages.append(
                    PageOutput(
                        page=slide.index + 1,
                        status="failed",
                        reader=ref,
                        reason=slide.error,
                        width=slide.width,
                        height=slide.height,
                    )
                )
                continue
            text = slide.text()
            status = "read" if text.strip() else "blank"
            pages.append(
                PageOutput(
                    page=slide.index + 1,
                    status=status,
                    reader=ref,
                    text=text if text.strip() else "",
                    width=slide.width,
                    height=slide.height,
                    reason="hidden slide" if slide.hidden else None,
                )
            )
        return tuple(pages)
