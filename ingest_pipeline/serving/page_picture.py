"""A page of a document with chosen chunks' boxes drawn on it, numbered in the order given."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ingest_pipeline import media_types as mt
from ingest_pipeline.commands.show import Box, Panel, ShowError, draw
from ingest_pipeline.identity import display_name

# PDFium is not thread-safe, even across documents: one page is drawn at a time.
_RENDER = threading.Lock()


def page_png(
    parts, document: str, page: int, chunk_ids: Sequence[str], profile: str, width: int = 900
) -> bytes:
    """PNG of ``page`` of ``document`` with the boxes of ``chunk_ids`` (of ``profile``'s chunk
    map) drawn on it, labelled 1, 2, …; a chunk on another page or with no box is left out."""
    from ingest_pipeline.readers.base import password_for
    from ingest_pipeline.stages import source_bytes
    from ingest_pipeline.stages.page_pictures import page_image, slide_image

    source = parts.store.source(document)
    if source is None:
        raise ShowError(f"no document {document!r}")
    media = (source["media_type"] or "").split(";")[0]
    shown = display_name(source["path"])
    if media not in (mt.PDF, mt.PPTX):
        raise ShowError(f"{shown} is {media}: it has no pages to draw")
    sizes = {r["page"]: r for r in parts.store.page_rows(document, columns=["page", "width", "height"])}
    if page not in sizes:
        raise ShowError(f"{shown} has no page {page}")
    wanted = {c: n for n, c in enumerate(chunk_ids, start=1)}
    panel = Panel(f"{len(wanted)} passage{'s' if len(wanted) != 1 else ''}")
    for row in parts.store.chunk_rows(profile, document):
        if row["chunk_id"] in wanted and row["page"] == page and row.get("bbox"):
            b = row["bbox"]
            text = " ".join((row.get("text") or "").split())
            panel.boxes.append(
                Box(
                    (b["x0"], b["y0"], b["x1"], b["y1"]),
                    str(wanted[row["chunk_id"]]),
                    row.get("role") or "none",
                    text,
                )
            )
    row = sizes[page]
    aspect = row["width"] / row["height"] if row.get("width") and row.get("height") else None
    content = source_bytes(source)
    with _RENDER:
        if media == mt.PDF:
            image = page_image(
                content, media, page, width, password_for(source["path"], parts.settings.passwords), aspect
            )
        else:  # a slide is not rendered: its chunks' text and pictures are drawn where they sit
            image = slide_image(parts.store, profile, document, page, width, aspect)
        if image is None:
            raise ShowError(f"page {page} of {shown} cannot be drawn")
        png, _ = draw([image], [panel], caption=f"{shown}  page {page}")
    return png
