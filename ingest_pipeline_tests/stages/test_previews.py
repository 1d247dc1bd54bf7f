"""Page previews: PDF pages rendered in display space, slide canvases, boxes in colour."""

from __future__ import annotations

import base64
import io
import threading

import pytest
from PIL import Image

from ingest_pipeline import media_types as mt
from ingest_pipeline.layout.frames import PageFrame
from ingest_pipeline.readers.pdf import PDFIUM_LOCK
from ingest_pipeline.samples import simple_pdf
from ingest_pipeline.stages.page_pictures import (
    BOX_COLOURS,
    PNG_BUDGET,
    preview_markdown_image,
    render_page_preview,
)
from ingest_pipeline_tests.pdf_writer import PdfWriter

BOXES = [(0.10, 0.05, 0.50, 0.12), (0.10, 0.50, 0.90, 0.90)]


def _decode(png: bytes) -> Image.Image:
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    return Image.open(io.BytesIO(png)).convert("RGB")


def _edge_pixels(image: Image.Image, box) -> list[tuple[int, int, int]]:
    """Pixels on the left and top edges of a normalized box (away from its label)."""
    w, h = image.size
    left, top = int(box[0] * w), int(box[1] * h)
    right, bottom = int(box[2] * w) - 1, int(box[3] * h) - 1
    pixels = [image.getpixel((left, y)) for y in range(top + 2, bottom - 1)]
    pixels += [image.getpixel((x, bottom)) for x in range(left + 2, right - 1)]
    return pixels


def _region(image: Image.Image, x0: float, y0: float, x1: float, y1: float) -> list[tuple[int, int, int]]:
    w, h = image.size
    return [
        image.getpixel((x, y))
        for y in range(int(y0 * h), int(y1 * h))
        for x in range(int(x0 * w), int(x1 * w))
    ]


def test_pdf_preview_follows_the_page_aspect_and_draws_boxes_in_their_colours():
    png = render_page_preview(simple_pdf([["line one", "line two"]]), mt.PDF, 1, BOXES, labels=["1", "2"])
    image = _decode(png)
    assert image.width == 600
    assert abs(image.height - 600 * 792 / 612) <= 1.0

    for i, box in enumerate(BOXES):
        edge = _edge_pixels(image, box)
        assert edge and all(p == BOX_COLOURS[i] for p in edge)

    # page interior away from the boxes (and inside the big box, whose outline is thin)
    for area in [(0.55, 0.15, 0.95, 0.45), (0.15, 0.55, 0.85, 0.85)]:
        pixels = _region(image, *area)
        assert not any(p in BOX_COLOURS for p in pixels)
        assert all(p == (255, 255, 255) for p in pixels)

    # the text is on the page, inside the first box
    assert any(sum(p) < 300 for p in _region(image, 0.10, 0.05, 0.50, 0.12))


def test_a_letter_page_preview_is_small():
    png = render_page_preview(simple_pdf([["line one", "line two"]]), mt.PDF, 1, BOXES)
    assert len(png) < PNG_BUDGET


def test_a_photo_page_is_squeezed_under_the_budget():
    # a full-page noisy RGB image: the worst case for a palette PNG
    import numpy as np

    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:400, 0:300]
    pixels = np.stack([xx * 255 / 300, yy * 255 / 400, (xx + yy) % 256], -1)
    pixels = pixels + rng.normal(0, 30, (400, 300, 3))
    w = PdfWriter()
    w.page().image(0, 0, 612, 792, 300, 400, np.clip(pixels, 0, 255).astype("uint8").tobytes(), gray=False)
    png = render_page_preview(w.to_bytes(), mt.PDF, 1, BOXES)
    assert png is not None and len(png) < PNG_BUDGET
    image = _decode(png)
    assert all(p == BOX_COLOURS[1] for p in _edge_pixels(image, BOXES[1]))


def _square_pdf(rotate: int = 0, cropbox=None) -> bytes:
    """A letter page with a filled black square centred on (150, 650) in user space."""
    w = PdfWriter()
    w.page(rotate=rotate, cropbox=cropbox).rect(110, 610, 80, 80, fill=True)
    return w.to_bytes()


@pytest.mark.parametrize(
    ("rotate", "cropbox"),
    [(0, None), (90, None), (180, None), (270, None), (0, (50, 300, 400, 750)), (90, (50, 300, 400, 750))],
)
def test_rotation_and_crop_box_give_the_display_space_the_chunkers_use(rotate, cropbox):
    png = render_page_preview(_square_pdf(rotate, cropbox), mt.PDF, 1, [])
    image = _decode(png)
    cx0, cy0, cx1, cy1 = cropbox or (0, 0, 612, 792)
    frame = PageFrame(cx0, cy0, cx1, cy1, rotate)

    assert image.width == 600
    assert abs(image.height - 600 * frame.height / frame.width) <= 1.0
    if rotate in (90, 270):
        assert image.width > image.height  # a portrait page turned a quarter: landscape

    # the square's centre, mapped the way layout.frames maps text, is where PDFium drew it
    x, y = frame.point(150, 650)
    centre = (int(x / frame.width * image.width), int(y / frame.height * image.height))
    assert sum(image.getpixel(centre)) < 100
    # a box around it in the chunkers' normalized space frames it
    nbox = frame.normalize(frame.box(105, 605, 195, 695))
    framed = _decode(render_page_preview(_square_pdf(rotate, cropbox), mt.PDF, 1, [nbox]))
    assert all(p == BOX_COLOURS[0] for p in _edge_pixels(framed, nbox))
    inner = frame.normalize(frame.box(120, 620, 180, 680))
    assert all(sum(p) < 100 for p in _region(framed, *inner))


def test_rotate_90_patched_into_simple_pdf_gives_a_landscape_picture():
    pdf = simple_pdf([["line one", "line two"]])
    rotated = pdf.replace(b"/MediaBox [0 0 612 792]", b"/MediaBox [0 0 612 792] /Rotate 90")
    assert rotated != pdf
    image = _decode(render_page_preview(rotated, mt.PDF, 1, BOXES))
    assert image.width == 600 and abs(image.height - 600 * 612 / 792) <= 1.0


@pytest.mark.parametrize(
    "content",
    [b"", b"garbage", b"%PDF-1.7\n" + b"\x00" * 200, b"x" * 5000, simple_pdf([["a"]])[:60]],
)
def test_bad_bytes_give_none(content):
    assert render_page_preview(content, mt.PDF, 1, BOXES) is None


def test_junk_before_the_header_still_renders_and_missing_pages_give_none():
    pdf = simple_pdf([["one"], ["two"]])
    assert render_page_preview(b"junk\r\n" + pdf, mt.PDF, 2, BOXES) is not None
    assert render_page_preview(pdf, mt.PDF, 3, BOXES) is None
    assert render_page_preview(pdf, mt.PDF, 0, BOXES) is None


def test_media_type_parameters_are_ignored():
    png = render_page_preview(simple_pdf([["one"]]), "Application/PDF; name=x.pdf", 1, [], width_px=200)
    assert _decode(png).width == 200


def test_rendering_waits_for_the_pdfium_lock():
    pdf = simple_pdf([["line one"]])
    result = []
    with PDFIUM_LOCK:
        worker = threading.Thread(target=lambda: result.append(render_page_preview(pdf, mt.PDF, 1, BOXES)))
        worker.start()
        worker.join(0.5)
        assert worker.is_alive() and not result
    worker.join(30)
    assert result and result[0] is not None


def test_slide_canvas_is_white_with_the_given_aspect():
    pptx = mt.PPTX
    image = _decode(render_page_preview(b"not read", pptx, 1, BOXES, labels=["1", ""]))
    assert image.size == (600, 450)
    for i, box in enumerate(BOXES):
        assert all(p == BOX_COLOURS[i] for p in _edge_pixels(image, box))
    assert all(p == (255, 255, 255) for p in _region(image, 0.55, 0.15, 0.95, 0.45))

    wide = _decode(render_page_preview(b"", pptx, 1, BOXES, width_px=320, aspect=16 / 9))
    assert wide.size == (320, 180)
    # an unusable aspect falls back to 4:3
    assert _decode(render_page_preview(b"", pptx, 1, [], width_px=400, aspect=0)).size == (400, 300)


def test_colours_cycle_and_bad_boxes_are_skipped():
    boxes = [(0.02 + 0.12 * i, 0.3, 0.12 + 0.12 * i, 0.7) for i in range(len(BOX_COLOURS) + 1)]
    odd = [(float("nan"), 0, 1, 1), (0.1, 0.2, 0.3), (1.5, 1.5, 2.0, 2.0)]
    image = _decode(render_page_preview(b"", mt.PPTX, 1, boxes + odd))
    for i, box in enumerate(boxes):
        assert all(p == BOX_COLOURS[i % len(BOX_COLOURS)] for p in _edge_pixels(image, box))
    # a reversed box is drawn as its sorted self, one partly off the page clipped to it
    flipped = _decode(render_page_preview(b"", mt.PPTX, 1, [(0.8, 0.8, 0.2, 0.2), (-0.5, 0.05, 0.1, 0.15)]))
    assert all(p == BOX_COLOURS[0] for p in _edge_pixels(flipped, (0.2, 0.2, 0.8, 0.8)))
    assert flipped.getpixel((0, int(0.1 * flipped.height))) == BOX_COLOURS[1]


def test_argument_errors():
    with pytest.raises(ValueError):
        render_page_preview(b"", mt.PPTX, 1, BOXES, labels=["only one"])
    with pytest.raises(ValueError):
        render_page_preview(b"", mt.PPTX, 1, BOXES, width_px=0)


def test_markdown_image_inlines_the_png():
    png = render_page_preview(simple_pdf([["line one", "line two"]]), mt.PDF, 1, BOXES)
    text = preview_markdown_image(png, "page 1 [2 chunks]")
    assert text.startswith("![")
    assert text.startswith("![page 1 \\[2 chunks\\]](data:image/png;base64,")
    assert text.endswith(")")
    encoded = text.split("base64,", 1)[1][:-1]
    assert base64.b64decode(encoded) == png
    with pytest.raises(ValueError):
        preview_markdown_image(b"not a png", "x")


def test_importing_previews_loads_neither_pdfium_nor_pillow():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import ingest_pipeline.stages.page_pictures\n"
        "print(','.join(m for m in ('pypdfium2', 'PIL') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_pictures_of_one_page_with_other_boxes_render_it_once_and_equal_fresh_ones(monkeypatch):
    """Each profile's chunk map draws its own boxes on the same page: the page is rendered
    and quantized once, and every picture is byte for byte the one a fresh render gives."""
    from ingest_pipeline.stages import page_pictures as previews

    pdf = simple_pdf([["Pumps and valves", "A page about the sluice gate."] * 6])
    other = [(0.2, 0.2, 0.6, 0.4)]
    fresh = {}
    for name, boxes in (("first", BOXES), ("second", other)):
        monkeypatch.setattr(previews, "_KEPT", previews._Kept())  # nothing kept: a fresh render
        fresh[name] = render_page_preview(pdf, mt.PDF, 1, boxes, labels=[str(i) for i in range(len(boxes))])
    monkeypatch.setattr(previews, "_KEPT", previews._Kept())
    renders = []
    real = previews._render_pdf_page
    monkeypatch.setattr(previews, "_render_pdf_page", lambda *a: renders.append(a) or real(*a))
    first = render_page_preview(pdf, mt.PDF, 1, BOXES, labels=[str(i) for i in range(len(BOXES))])
    second = render_page_preview(pdf, mt.PDF, 1, other, labels=["0"])
    assert len(renders) == 1
    assert first == fresh["first"] and second == fresh["second"] and first != second
    assert render_page_preview(simple_pdf([["Another document"]]), mt.PDF, 1, other, labels=["0"]) != second
    assert len(renders) == 2  # another document's page is its own


def test_a_slide_canvas_shows_each_boxs_picture_or_else_its_text():
    from ingest_pipeline_tests.office_fixtures import png_bytes

    red = png_bytes((200, 30, 30), (40, 30))
    boxes = [(0.05, 0.05, 0.60, 0.30), (0.55, 0.50, 0.95, 0.95), (0.05, 0.60, 0.40, 0.95)]
    fills = [
        ("Quarterly harvest figures for the northern fields", None),
        (None, red),
        ("x", b"not a picture"),
    ]
    image = _decode(render_page_preview(b"", mt.PPTX, 1, boxes, width_px=800, aspect=4 / 3, fills=fills))
    w, h = image.size

    def inside(box):  # pixels well inside a box, away from its outline
        x0, y0, x1, y1 = (int(box[0] * w) + 6, int(box[1] * h) + 6, int(box[2] * w) - 6, int(box[3] * h) - 6)
        return [image.getpixel((x, y)) for x in range(x0, x1, 2) for y in range(y0, y1, 2)]

    def dark(pixels):
        return sum(max(p) < 140 for p in pixels)

    assert dark(inside(boxes[0])) > 50  # the text is written in its box
    reds = [p for p in inside(boxes[1]) if p[0] > 150 and p[1] < 90 and p[2] < 90]
    assert len(reds) > 0.3 * len(inside(boxes[1]))  # the picture fills its box (scaled, centred)
    assert dark(inside(boxes[2])) > 0  # an unreadable picture: its text instead
    blank = _decode(render_page_preview(b"", mt.PPTX, 1, boxes, width_px=800, aspect=4 / 3))
    assert blank.getpixel((int(0.3 * w), int(0.17 * h))) == (255, 255, 255)  # no fills: boxes only
