"""Page previews for a partition's metadata in the Dagster UI: a page with its chunk boxes drawn on it.

A PDF page is rendered by PDFium in *display space* (crop box and ``/Rotate`` applied,
origin top-left), the space the chunkers normalize their boxes in (see ``layout.frames``),
so a normalized box maps onto the picture by scaling alone. Other media types (slides,
whose boxes are normalized to the slide) get a white canvas of the slide's aspect, with
each box's own text written in it and its picture drawn in it (``fills``): nothing renders
a slide here, so what the chunks hold is what the picture can show.

The PNG is palette-based: the page is quantized to a few dozen colours and the box
colours are added to the palette afterwards, so every box edge has its exact colour and
a letter page at 600 px stays well under :data:`PNG_BUDGET` bytes.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
from collections.abc import Sequence
from typing import Any

from ingest_pipeline import media_types as mt
from ingest_pipeline.identity import display_name
from ingest_pipeline.runtime.budget import check as budget_check
from ingest_pipeline.runtime.memo import BoundedMemo
from ingest_pipeline.stages.common import StageError
from ingest_pipeline.stages.sources import load_source, password_of, source_bytes
from ingest_pipeline.storage.store import Store

log = logging.getLogger(__name__)

# Box outline colours, used in turn: box i is drawn in BOX_COLOURS[i % len(BOX_COLOURS)].
BOX_COLOURS: tuple[tuple[int, int, int], ...] = (
    (230, 25, 75),  # red
    (0, 130, 200),  # blue
    (60, 180, 75),  # green
    (245, 130, 48),  # orange
    (145, 30, 180),  # purple
    (0, 170, 170),  # teal
)
LABEL_TEXT = (255, 255, 255)
DEFAULT_ASPECT = 4.0 / 3.0  # width / height of a canvas when none is given (a 4:3 slide)
MAX_HEIGHT_FACTOR = 4.0  # a picture is at most this many times as tall as wide, and as wide as tall
PNG_BUDGET = 150_000  # bytes; the palette shrinks until the PNG fits (or no smaller palette is left)
PALETTE_STEPS = (128, 64, 32, 16)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def render_page_preview(
    content: bytes,
    media_type: str,
    page: int,
    boxes: Sequence[tuple[float, float, float, float]],
    labels: Sequence[str] | None = None,
    width_px: int = 600,
    password: str | None = None,
    aspect: float | None = None,
    fills: Sequence[tuple[str | None, bytes | None]] | None = None,
) -> bytes | None:
    """PNG bytes of page ``page`` (1-based) with ``boxes`` drawn on it, or None.

    ``boxes`` are normalized ``(x0, y0, x1, y1)`` with the origin at the top-left of the
    page as displayed. Box ``i`` gets an outline in ``BOX_COLOURS[i % 6]`` and, when
    ``labels`` is given (one string per box; an empty string draws none), a small tag
    with ``labels[i]`` at its top-left corner. Boxes that are not four finite numbers or
    lie wholly off the page are skipped; the rest are clipped to the page.

    ``application/pdf``: the page rendered by PDFium about ``width_px`` pixels wide (a
    page more than four times as tall as wide is scaled to fit that height instead), with
    ``/Rotate`` and the crop box honoured. ``password`` opens an encrypted PDF. Any other
    media type: a white canvas ``width_px`` wide with ``aspect`` (width / height,
    default 4:3); ``content`` and ``page`` are not read, and ``fills`` (one
    ``(text, picture bytes)`` per box) puts each box's picture, else its text, inside it.

    Returns None when the page cannot be rendered (not a PDF, corrupt, encrypted without
    the right password, no such page); it does not raise for bad bytes. ValueError for
    a ``width_px`` below 1 or ``labels`` of a different length than ``boxes``.
    """
    if width_px < 1:
        raise ValueError(f"width_px must be at least 1, got {width_px}")
    if labels is not None and len(labels) != len(boxes):
        raise ValueError(f"{len(labels)} labels for {len(boxes)} boxes")

    if mt.base(media_type) != mt.PDF:
        canvas = _canvas(width_px, aspect)
        if fills is not None:
            _fill_canvas(canvas, boxes, fills)
        return _encode_with_boxes(canvas, boxes, labels)
    if not isinstance(content, (bytes, bytearray, memoryview)):
        return None
    key = (hashlib.sha256(content).digest(), page, width_px, password)
    return _encode_with_boxes(
        None, boxes, labels, key, lambda: _render_pdf_page(content, page, width_px, password)
    )


def page_backdrop(
    store: Store,
    source: dict[str, Any],
    document: str,
    page: int,
    width_px: int,
    settings: Any,
    aspect: float | None,
    profile: str,
):
    """The page as an RGB PIL image to draw boxes over: a PDF page rendered from its bytes
    (None when it cannot be), else a slide, which nothing renders here, as the canvas of
    ``aspect`` with every chunk of the page (of ``profile``'s chunk map) written or drawn in
    its box, as the chunk map's pictures show it. ``settings``: the storage root's, for the
    document's password (its route's password file, or the passwords file)."""
    if width_px < 1:
        raise ValueError(f"width_px must be at least 1, got {width_px}")
    if mt.base(source["media_type"]) == mt.PDF:
        try:
            password = password_of(settings, source)
        except StageError:  # a route's password file that cannot be read: nothing to render
            return None
        return _render_pdf_page(source_bytes(source), page, width_px, password)
    rows = [r for r in store.chunk_rows(profile, document) if r["page"] == page and r["bbox"] is not None]
    canvas = _canvas(width_px, aspect)
    if rows:
        fill = _slide_fills(store, rows, profile)
        boxes = [(r["bbox"]["x0"], r["bbox"]["y0"], r["bbox"]["x1"], r["bbox"]["y1"]) for r in rows]
        _fill_canvas(canvas, boxes, [fill(r) for r in rows])
    return canvas


def preview_markdown_image(png: bytes, alt: str) -> str:
    """A Markdown image whose source is ``png`` inlined as a ``data:image/png`` URI."""
    if not isinstance(png, (bytes, bytearray)) or not bytes(png).startswith(PNG_SIGNATURE):
        raise ValueError("preview_markdown_image needs PNG bytes")
    text = " ".join(str(alt).split())
    text = text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
    data = base64.b64encode(bytes(png)).decode("ascii")
    return f"![{text}](data:image/png;base64,{data})"


# --------------------------------------------------------------------------- pictures


def _render_pdf_page(content: bytes, page: int, width_px: int, password: str | None):
    """The page as an RGB PIL image in display space, or None if PDFium will not."""
    from ingest_pipeline.readers.pdf import PDFIUM_LOCK, DocumentError, open_pdf

    if not isinstance(content, (bytes, bytearray, memoryview)) or page < 1:
        return None
    with PDFIUM_LOCK:
        try:
            pdf = open_pdf(bytes(content), password)
        except DocumentError as exc:
            log.debug("no preview: %s", exc)
            return None
        except Exception:  # noqa: BLE001 - bad bytes give no preview, never an exception
            log.debug("no preview: PDFium failed to open the document", exc_info=True)
            return None
        try:
            if page > len(pdf):
                return None
            pdf_page = pdf[page - 1]
            try:
                width, height = pdf_page.get_size()  # display size: crop box, /Rotate applied
                scale = _scale(width, height, width_px)
                if scale is None:
                    return None
                bitmap = pdf_page.render(scale=scale, rev_byteorder=True)
                try:
                    image = bitmap.to_pil().convert("RGB")  # a copy, independent of PDFium's buffer
                finally:
                    bitmap.close()
            finally:
                pdf_page.close()
        except Exception:  # noqa: BLE001 - PdfiumError or worse: a page that will not render has no preview
            log.debug("no preview: page %d will not render", page, exc_info=True)
            return None
        finally:
            pdf.close()
    if image.width < 1 or image.height < 1:
        return None
    return image


def _scale(width: float, height: float, width_px: int) -> float | None:
    """Pixels per point giving ``width_px`` pixels across, within the height limit."""
    if not (math.isfinite(width) and math.isfinite(height)) or width <= 0 or height <= 0:
        return None
    scale = width_px / width
    max_height = width_px * MAX_HEIGHT_FACTOR
    if height * scale > max_height:
        scale = max_height / height
    return scale


def _canvas(width_px: int, aspect: float | None):
    from PIL import Image

    ratio = DEFAULT_ASPECT
    if aspect is not None:
        try:
            value = float(aspect)
        except (TypeError, ValueError):
            value = float("nan")
        if math.isfinite(value) and value > 0:
            ratio = min(max(value, 1.0 / MAX_HEIGHT_FACTOR), MAX_HEIGHT_FACTOR)
    height_px = max(1, round(width_px / ratio))
    return Image.new("RGB", (width_px, height_px), (255, 255, 255))


TEXT_INK = (70, 70, 70)
MAX_PICTURE_PIXELS = 40_000_000  # a picture larger than this is left out, not decoded


def _fill_canvas(image, boxes, fills) -> None:
    """Each box's picture (scaled to fit, centred) or else its text (wrapped to the box,
    cut at its bottom) drawn on the canvas, before the outlines go over them."""
    from PIL import ImageDraw

    draw = ImageDraw.Draw(image)
    font = _label_font(max(9, round(image.width / 70)))
    for raw, (text, picture) in zip(boxes, fills):
        budget_check()
        box = _clean_box(raw)
        if box is None:
            continue
        left, top = math.floor(box[0] * image.width), math.floor(box[1] * image.height)
        right, bottom = math.ceil(box[2] * image.width), math.ceil(box[3] * image.height)
        if picture and _paste_picture(image, picture, (left, top, right, bottom)):
            continue
        if text:
            _write_in(draw, font, str(text), (left + 4, top + 3, right - 4, bottom - 2))


def _paste_picture(image, picture: bytes, box: tuple[int, int, int, int]) -> bool:
    """The picture scaled into the box; False when it cannot be read (or is too large)."""
    import io

    from PIL import Image, ImageOps

    width, height = box[2] - box[0], box[3] - box[1]
    if width < 2 or height < 2:
        return False
    try:
        with Image.open(io.BytesIO(picture)) as opened:
            if opened.width * opened.height > MAX_PICTURE_PIXELS:
                return False
            opened.draft("RGB", (width, height))  # JPEG: decode at a fraction of the size
            shown = opened.convert("RGB")
    except Exception:  # noqa: BLE001 - a picture that will not decode is left out, never an error
        return False
    shown = ImageOps.contain(shown, (width, height))  # up or down, keeping its aspect
    image.paste(shown, (box[0] + (width - shown.width) // 2, box[1] + (height - shown.height) // 2))
    return True


def _write_in(draw, font, text: str, box: tuple[int, int, int, int]) -> None:
    """The text's words wrapped to the box's width, as many lines as fit its height."""
    left, top, right, bottom = box
    if right - left < 8:
        return
    line_height = draw.textbbox((0, 0), "Ag", font=font)[3] + 2
    y, line = top, ""
    for word in text.split():
        budget_check()
        trial = f"{line} {word}" if line else word
        if not line or draw.textlength(trial, font=font) <= right - left:
            line = trial
            continue
        if y + line_height > bottom:
            return
        draw.text((left, y), line, fill=TEXT_INK, font=font)
        y, line = y + line_height, word
    if line and y + line_height <= bottom:
        draw.text((left, y), line, fill=TEXT_INK, font=font)


def _clean_box(box) -> tuple[float, float, float, float] | None:
    try:
        if len(box) != 4:
            return None
        x0, y0, x1, y1 = (float(v) for v in box)
    except (TypeError, ValueError):
        return None
    if not all(math.isfinite(v) for v in (x0, y0, x1, y1)):
        return None
    x0, x1 = sorted((x0, x1))
    y0, y1 = sorted((y0, y1))
    if x1 < 0.0 or y1 < 0.0 or x0 > 1.0 or y0 > 1.0:
        return None
    return (max(x0, 0.0), max(y0, 0.0), min(x1, 1.0), min(y1, 1.0))


def _label_font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError, ImportError):  # Pillow without FreeType: the bitmap font
        return ImageFont.load_default()


class _Kept(BoundedMemo):
    """The last pages' quantized images, by page key and palette size: a batch's chunk
    maps draw each document's page once per profile, and the rendering and the quantizing
    are most of a picture's cost. The rendered page itself is not kept: at three times the
    size of its quantized image, keeping both let a batch of 21 documents push each
    document's page out before the next profile drew it. Given out as copies."""

    LIMIT = 32 * 2**20

    def _cost(self, key: tuple, image) -> int:
        return image.width * image.height * len(image.getbands())

    def get(self, key: tuple | None):
        image = super().get(key)
        return None if image is None else image.copy()

    def put(self, key: tuple | None, image) -> None:
        if key is not None:
            super().put(key, image.copy())


_KEPT = _Kept()


def _encode_with_boxes(image, boxes, labels, key: tuple | None = None, render=None) -> bytes | None:
    """Quantize ``image``, draw the boxes in exact palette colours and encode as PNG,
    with fewer colours while the PNG is over the budget. ``key`` names a page whose
    quantized images are kept; ``image`` is then None and ``render`` draws the page when a
    palette size is not kept (None when it cannot: no picture)."""
    from PIL import Image

    png = b""
    for colours in PALETTE_STEPS:
        budget_check()
        quantized = _KEPT.get(key and (*key, colours))
        if quantized is None:
            if image is None:
                image = render()
                if image is None:
                    return None
            quantized = image.quantize(
                colors=colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
            )
            _KEPT.put(key and (*key, colours), quantized)
        png = _encode_once(quantized, boxes, labels, colours)
        if len(png) <= PNG_BUDGET:
            break
    return png


def _encode_once(quantized, boxes, labels, colours: int) -> bytes:
    """The boxes drawn on ``quantized`` (a page quantized to ``colours``; drawn on in place), as PNG."""
    import io

    from PIL import ImageDraw

    palette = list(quantized.getpalette() or [])[: 3 * colours]
    palette += [0] * (3 * colours - len(palette))
    for rgb in BOX_COLOURS:
        palette += list(rgb)
    label_text = colours + len(BOX_COLOURS)
    palette += list(LABEL_TEXT)
    quantized.putpalette(palette)

    width, height = quantized.size
    draw = ImageDraw.Draw(quantized)
    draw.fontmode = "1"  # palette indices must not be blended
    line = max(1, round(width / 400))
    font = _label_font(max(9, round(width / 55))) if labels is not None else None
    for i, raw in enumerate(boxes):
        budget_check()
        box = _clean_box(raw)
        if box is None:
            continue
        ink = colours + i % len(BOX_COLOURS)
        left = min(max(math.floor(box[0] * width), 0), width - 1)
        top = min(max(math.floor(box[1] * height), 0), height - 1)
        right = min(max(math.ceil(box[2] * width) - 1, left), width - 1)
        bottom = min(max(math.ceil(box[3] * height) - 1, top), height - 1)
        draw.rectangle((left, top, right, bottom), outline=ink, width=line)
        if labels is not None and labels[i]:
            _draw_label(draw, font, str(labels[i]), left, top, width, height, ink, label_text)

    out = io.BytesIO()
    quantized.save(out, format="PNG")  # zlib level 6: as small here as optimize=True, in half the time
    return out.getvalue()


def _draw_label(
    draw, font, text: str, left: int, top: int, width: int, height: int, ink: int, text_ink: int
) -> None:
    """A filled tag in the box colour with ``text`` in white: above the box's top-left
    corner, or just inside it when there is no room above."""
    bx0, by0, bx1, by1 = draw.textbbox((0, 0), text, font=font)
    pad = 2
    tag_w = bx1 - bx0 + 2 * pad
    tag_h = by1 - by0 + 2 * pad
    x = min(left, max(width - tag_w, 0))
    y = top - tag_h if top - tag_h >= 0 else top
    y = min(y, max(height - tag_h, 0))
    draw.rectangle((x, y, x + tag_w - 1, y + tag_h - 1), fill=ink)
    draw.text((x + pad - bx0, y + pad - by0), text, fill=text_ink, font=font)


def _slide_fills(store: Store, rows: list[dict[str, Any]], profile: str | None):
    """Row -> (its text, its picture's bytes) for a slide's canvas; the pictures are read
    from the profile's chunk map (the rows come without them)."""
    pictures: dict[str, bytes] = {}
    wanted = {r["chunk_id"] for r in rows if r["bbox"] is not None}
    if wanted and profile:
        table = store.chunk_map(profile, rows[0]["document_id"], columns=["chunk_id", "image"])
        if table is not None:
            for chunk_id, image in zip(
                table.column("chunk_id").to_pylist(), table.column("image").to_pylist()
            ):
                if chunk_id in wanted and image:
                    pictures[chunk_id] = image
    return lambda row: (row.get("text"), pictures.get(row["chunk_id"]))


def page_picture(
    store: Store,
    settings: Any,
    rows: list[dict[str, Any]],
    also: Sequence[int] = (),
    profile: str | None = None,
    most: int = 4,
    chunker: str | None = None,
    flagged_by: str = "page_text_covered",
) -> str | None:
    """Markdown showing the first page with geometry among ``rows`` and the pages in
    ``also`` (the ones ``flagged_by`` flagged), at most ``most`` in all, each with its chunk
    boxes drawn on the page rendered from the source bytes; then, for the other pages, the
    command that draws any of them (a ``profile``'s chunks, or a ``chunker`` version's
    pieces). None when no row has a box, or the bytes can no longer be read."""
    first = next((r for r in rows if r["bbox"] is not None), None)
    if first is None:
        return None
    try:
        source, _ = load_source(store, first["document_id"])
        content = source_bytes(source)
        password = password_of(settings, source)
    except Exception:
        return None
    page_sizes = store.page_rows(first["document_id"], columns=["page", "width", "height"])
    drawn_in = _slide_fills(store, rows, profile) if mt.base(source["media_type"]) != mt.PDF else None
    sizes = {r["page"]: (r["width"], r["height"]) for r in page_sizes}
    wanted = list(dict.fromkeys([first["page"], *sorted(p for p in also if p in sizes)]))[:most]
    path = display_name(first["path"])
    parts = []
    for page in wanted:
        same_page = [r for r in rows if r["page"] == page and r["bbox"] is not None]
        width, height = sizes.get(page) or (None, None)
        png = render_page_preview(
            content,
            source["media_type"],
            page,
            [(r["bbox"]["x0"], r["bbox"]["y0"], r["bbox"]["x1"], r["bbox"]["y1"]) for r in same_page],
            labels=[str(r["index"]) for r in same_page],
            aspect=width / height if width and height else None,
            password=password,
            fills=[drawn_in(r) for r in same_page] if drawn_in else None,
        )
        if png is not None:
            why = "" if page == first["page"] else f" (flagged by {flagged_by})"
            parts.append(f"{path}, page {page}{why}:\n\n" + preview_markdown_image(png, f"{path} p{page}"))
    if not parts:
        return None
    drawn = f"--chunker {chunker}" if chunker else f"--profile {profile}" if profile else None
    if drawn and len(sizes) > len(wanted):
        parts.append(
            f"Any other of its {len(sizes)} pages: "
            f"`ingest-pipeline show '{path}' --page N {drawn} --out page.png`"
        )
    return "\n\n".join(parts)
