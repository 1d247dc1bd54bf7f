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
    from ingest_pipeline.stages.page_pictures import page_backdrop

    source = parts.store.source(document)
    if source is None:
        raise ShowError(f"no document {document!r}")
    media = mt.base(source["media_type"])
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
            panel.boxes.append(
                Box(
                    (b["x0"], b["y0"], b["x1"], b["y1"]),
                    str(wanted[row["chunk_id"]]),
                    row.get("role") or "none",
                )
            )
    row = sizes[page]
    aspect = row["width"] / row["height"] if row.get("width") and row.get("height") else None
    with _RENDER:
        image = page_backdrop(parts.store, source, document, page, width, parts.settings, aspect, profile)
        if image is None:
            raise ShowError(f"page {page} of {shown} cannot be drawn")
        png, _ = draw([image], [panel], caption=f"{shown}  page {page}")
    return png
