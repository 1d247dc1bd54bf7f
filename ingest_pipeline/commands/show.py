"""``show``: a page with its chunks' boxes, numbered and coloured by role, with a legend;
or two chunker versions' claims side by side on the same page.

A PDF page is rendered by PDFium in display space, a slide is a white canvas of its
aspect with each chunk's first words written in its box; other formats have no page
geometry and get a clear refusal. The page is quantized to a small palette and the role
colours are added to it afterwards, so every box has its role's exact colour and the PNG
stays small.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ingest_pipeline import media_types as mt
from ingest_pipeline.storage import queries
from ingest_pipeline.storage.catalog import query
from ingest_pipeline.storage.lake import Lake

# A fixed colour for the roles the built-in chunkers use; others take FALLBACK in turn.
ROLE_COLOURS: dict[str, tuple[int, int, int]] = {
    "paragraph": (0, 114, 206),
    "text": (0, 114, 206),
    "body": (0, 114, 206),
    "heading": (214, 39, 40),
    "title": (214, 39, 40),
    "table": (44, 160, 44),
    "cells": (44, 160, 44),
    "list": (148, 52, 186),
    "page_header": (140, 86, 75),
    "page_footer": (140, 86, 75),
    "picture": (255, 127, 14),
    "image": (255, 127, 14),
    "chart": (255, 127, 14),
    "chart_title": (227, 119, 194),
    "notes": (23, 190, 207),
    "none": (0, 114, 206),
}
FALLBACK = ((188, 189, 34), (23, 190, 207), (227, 119, 194), (127, 127, 127), (31, 119, 180))
GEOMETRY = (mt.PDF, mt.PPTX)
PALETTE_SIZE = 96
TEXT_GREY = (70, 70, 70)
WHITE = (255, 255, 255)
BLACK = (0, 0, 0)


class ShowError(Exception):
    """Why no picture can be drawn, in one line."""


@dataclass
class Box:
    bbox: tuple[float, float, float, float]
    label: str
    role: str


@dataclass
class Panel:
    title: str
    boxes: list[Box] = field(default_factory=list)
    without_box: int = 0  # pieces on the page with no box (hidden, unresolved)


def role_colours(roles: Sequence[str]) -> dict[str, tuple[int, int, int]]:
    """A colour per role, distinct within one picture."""
    colours: dict[str, tuple[int, int, int]] = {}
    spare = iter(FALLBACK * 4)
    for role in roles:
        if role in colours:
            continue
        wanted = ROLE_COLOURS.get(role)
        while wanted is None or wanted in colours.values():
            wanted = next(spare)
        colours[role] = wanted
    return colours


def _boxes(rows: list[dict[str, Any]]) -> Panel:
    panel = Panel("")
    for number, row in enumerate(rows, start=1):
        b = row["bbox"]
        if b is None:
            panel.without_box += 1
            continue
        panel.boxes.append(
            Box(
                (b["x0"], b["y0"], b["x1"], b["y1"]),
                str(number),
                row.get("role") or "none",
            )
        )
    return panel


def chunk_panel(lake: Lake, document: str, page: int, profile: str) -> Panel:
    rows = query(lake, queries.CHUNK_BOXES_ON_PAGE, [document, profile, page]).to_pylist()
    panel = _boxes(rows)
    panel.title = f"profile {profile}: {len(rows)} chunks"
    return panel


def claim_panel(lake: Lake, document: str, page: int, chunker: str) -> Panel:
    rows = query(lake, queries.CLAIM_BOXES_ON_PAGE, [document, chunker, page]).to_pylist()
    panel = _boxes(rows)
    panel.title = f"{chunker}: {len(rows)} pieces"
    return panel


def first_page_with_boxes(
    lake: Lake, document: str, profile: str | None, chunkers: Sequence[str]
) -> int | None:
    if chunkers:
        rows = query(lake, queries.FIRST_CLAIMED_PAGE_WITH_BOX, [document, list(chunkers)]).to_pylist()
    else:
        rows = query(lake, queries.FIRST_CHUNK_PAGE_WITH_BOX, [document, profile]).to_pylist()
    return rows[0]["page"] if rows else None


def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError, ImportError):  # Pillow without FreeType
        return ImageFont.load_default()


def box_pixels(bbox: tuple[float, float, float, float], width: int, height: int) -> tuple[int, int, int, int]:
    """The pixel rectangle (inclusive) of a normalized box on a ``width`` × ``height`` picture."""
    x0, y0, x1, y1 = (min(max(v, 0.0), 1.0) for v in bbox)
    left = min(max(math.floor(x0 * width), 0), width - 1)
    top = min(max(math.floor(y0 * height), 0), height - 1)
    right = min(max(math.ceil(x1 * width) - 1, left), width - 1)
    bottom = min(max(math.ceil(y1 * height) - 1, top), height - 1)
    return left, top, right, bottom


def draw(pages: Sequence[Any], panels: Sequence[Panel], caption: str):
    """PNG of the panels side by side (each its page image with its boxes) over one legend,
    and where each page sits in it (left, top)."""
    from PIL import Image, ImageDraw

    roles = [b.role for panel in panels for b in panel.boxes]
    colours = role_colours(roles)
    counts = {role: roles.count(role) for role in colours}
    gap, title_h = 16, 26
    width = sum(p.width for p in pages) + gap * (len(pages) - 1)
    page_h = max(p.height for p in pages)
    font = _font(14)
    legend_rows = [f"{role} ({counts[role]})" for role in colours] or ["no boxes on this page"]
    per_row = max(1, width // 190)
    legend_h = 12 + 22 * math.ceil(len(legend_rows) / per_row) + 20
    sheet = Image.new("RGB", (width, title_h + page_h + legend_h), WHITE)
    x = 0
    origins = []
    for page in pages:
        sheet.paste(page, (x, title_h))
        origins.append((x, title_h))
        x += page.width + gap
    quantized = sheet.quantize(colors=PALETTE_SIZE, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    palette = list(quantized.getpalette() or [])[: 3 * PALETTE_SIZE]
    palette += [0] * (3 * PALETTE_SIZE - len(palette))
    ink: dict[tuple[int, int, int], int] = {}
    for rgb in [*dict.fromkeys(colours.values()), WHITE, BLACK, TEXT_GREY]:
        ink[rgb] = PALETTE_SIZE + len(ink)
        palette += list(rgb)
    quantized.putpalette(palette)
    canvas = ImageDraw.Draw(quantized)
    canvas.fontmode = "1"  # palette indices must not be blended
    line = max(2, round(max(p.width for p in pages) / 350))
    label_font = _font(max(10, round(pages[0].width / 60)))
    small = _font(max(9, round(pages[0].width / 80)))
    x = 0
    for page, panel in zip(pages, panels):
        title = panel.title + (f" ({panel.without_box} without a box)" if panel.without_box else "")
        canvas.text((x + 4, 5), title, fill=ink[BLACK], font=font)
        for box in panel.boxes:
            left, top, right, bottom = box_pixels(box.bbox, page.width, page.height)
            colour = ink[colours[box.role]]
            rect = (x + left, title_h + top, x + right, title_h + bottom)
            canvas.rectangle(rect, outline=colour, width=line)
            _tag(canvas, label_font, box.label, rect[0], rect[1], x, title_h, colour, ink[WHITE])
        x += page.width + gap
    y = title_h + page_h + 12
    for i, text in enumerate(legend_rows):
        col, row = i % per_row, i // per_row
        lx, ly = 8 + col * 190, y + row * 22
        if colours:
            role = list(colours)[i]
            canvas.rectangle((lx, ly + 2, lx + 14, ly + 16), fill=ink[colours[role]])
        canvas.text((lx + 20, ly + 1), text, fill=ink[BLACK], font=font)
    canvas.text((8, title_h + page_h + legend_h - 18), caption, fill=ink[TEXT_GREY], font=small)
    out = io.BytesIO()
    quantized.save(out, format="PNG", optimize=True)
    return out.getvalue(), origins


def _tag(
    canvas, font, text: str, left: int, top: int, page_left: int, page_top: int, fill: int, text_ink: int
) -> None:
    """The box's number on a tag of its colour: left of its top-left corner, in the margin
    (stacked lines keep their text readable), else above it, else just inside it."""
    bx0, by0, bx1, by1 = canvas.textbbox((0, 0), text, font=font)
    w, h = bx1 - bx0 + 4, by1 - by0 + 4
    if left - w >= page_left:
        x, y = left - w, top
    else:
        x, y = left, (top - h if top - h >= page_top else top)
    canvas.rectangle((x, y, x + w - 1, y + h - 1), fill=fill)
    canvas.text((x + 2 - bx0, y + 2 - by0), text, fill=text_ink, font=font)


def show_page(
    p,
    ref: str,
    out: str,
    page: int | None = None,
    profile: str | None = None,
    chunker: str | None = None,
    compare: Sequence[str] = (),
    width_px: int = 900,
) -> dict[str, Any]:
    """Draw one page of a document with its boxes into ``out``; what was drawn, as a dict."""
    from ingest_pipeline.commands.inspection import find_source
    from ingest_pipeline.stages.page_pictures import page_backdrop

    source = find_source(p.lake, ref)
    if source is None:
        raise ShowError(f"no document {ref!r} (use a document_id or its path)")
    media = mt.base(source["media_type"])
    if media not in GEOMETRY:
        raise ShowError(
            f"{source['path']} is {media}: that format has no page geometry (its chunks carry "
            f"bbox_reason no_geometry), so there is no page to draw; show draws PDF pages and slides"
        )
    chunkers = list(compare) or ([chunker] if chunker else [])
    for ref_ in chunkers:
        p.registry.get(ref_)  # an unknown version is a clear error
    profile = profile or p.settings.default_profile
    did = source["document_id"]
    if page is None:
        page = first_page_with_boxes(p.lake, did, profile, chunkers) or 1
    pages = {r["page"]: r for r in query(p.lake, queries.PAGE_SIZES, [did]).to_pylist()}
    if page not in pages:
        raise ShowError(f"{source['path']} has no page {page} (it has {len(pages)})")
    if chunkers:
        panels = [claim_panel(p.lake, did, page, c) for c in chunkers]
        for c, panel in zip(chunkers, panels):
            if (
                not panel.boxes
                and not panel.without_box
                and not query(p.lake, queries.HAS_CLAIMS_OF_CHUNKER, [did, c]).num_rows
            ):
                panel.title = f"{c}: no claims for this document (it disclaimed it, or no profile runs it)"
    else:
        panels = [chunk_panel(p.lake, did, page, profile)]
    row = pages[page]
    aspect = row["width"] / row["height"] if row.get("width") and row.get("height") else None
    per_panel = width_px if len(panels) == 1 else max(300, width_px * 2 // 3)
    image = page_backdrop(p.store, source, did, page, per_panel, p.settings, aspect, profile)
    if image is None:
        raise ShowError(f"page {page} of {source['path']} cannot be rendered")
    caption = f"{source['path']}  page {page}"
    png, origins = draw([image] * len(panels), panels, caption=caption)
    with open(out, "wb") as handle:
        handle.write(png)
    return {
        "out": out,
        "document_id": did,
        "path": source["path"],
        "page": page,
        "bytes": len(png),
        "panels": [
            {"title": panel.title, "boxes": len(panel.boxes), "without_box": panel.without_box}
            for panel in panels
        ],
        "roles": {
            role: list(rgb) for role, rgb in role_colours([b.role for pn in panels for b in pn.boxes]).items()
        },
        "page_width": image.width,
        "page_height": image.height,
        "origins": [list(o) for o in origins],
    }
