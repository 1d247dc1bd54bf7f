"""pptx@1 and pptx@2 on decks the tests build (SPEC T-X1..T-X7)."""

from __future__ import annotations

import io
import struct
import subprocess
import sys

import pytest

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.pptx import PptxChunker, PptxTableChunker
from ingest_pipeline.contract import validate_bbox
from ingest_pipeline.readers import read_pages
from ingest_pipeline_tests.office_fixtures import png_bytes, rewrite_zip, save_pptx

pptx = pytest.importorskip("pptx")
from pptx import Presentation  # noqa: E402
from pptx.oxml import parse_xml  # noqa: E402
from pptx.util import Emu, Inches  # noqa: E402

W, H = 9144000, 6858000
NS = (
    'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
)


def chunk(content: bytes, chunker=None):
    chunker = chunker or PptxChunker()
    pages = read_pages(content, mt.PPTX)
    return {pc.page: pc.pieces for pc in chunker.chunk(content, mt.PPTX, pages)}


def sp_xml(shape_id: int, text: str, box=None, ph: str = "", hidden: bool = False) -> str:
    xfrm = ""
    if box is not None:
        x, y, cx, cy = box
        xfrm = f'<a:xfrm><a:off x="{x}" y="{y}"/><a:ext cx="{cx}" cy="{cy}"/></a:xfrm>'
    hid = ' hidden="1"' if hidden else ""
    return (
        f'<p:sp {NS}><p:nvSpPr><p:cNvPr id="{shape_id}" name="S{shape_id}"{hid}/><p:cNvSpPr/>'
        f"<p:nvPr>{ph}</p:nvPr></p:nvSpPr><p:spPr>{xfrm}</p:spPr>"
        f"<p:txBody><a:bodyPr/><a:lstStyle/><a:p><a:r><a:t>{text}</a:t></a:r></a:p></p:txBody></p:sp>"
    )


def grp_xml(
    shape_id: int, off, ext, ch_off, ch_ext, children: str, rot: int = 0, flip_h: bool = False
) -> str:
    attrs = (f' rot="{rot}"' if rot else "") + (' flipH="1"' if flip_h else "")
    return (
        f'<p:grpSp {NS}><p:nvGrpSpPr><p:cNvPr id="{shape_id}" '
        f'name="G{shape_id}"/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr>'
        f'<p:grpSpPr><a:xfrm{attrs}><a:off x="{off[0]}" y="{off[1]}"/><a:ext cx="{ext[0]}" cy="{ext[1]}"/>'
        f'<a:chOff x="{ch_off[0]}" y="{ch_off[1]}"/><a:chExt '
        f'cx="{ch_ext[0]}" cy="{ch_ext[1]}"/></a:xfrm></p:grpSpPr>'
        f"{children}</p:grpSp>"
    )


def norm(x0, y0, x1, y1):
    return (x0 / W, y0 / H, x1 / W, y1 / H)


def assert_box(actual, expected, tol=1e-6):
    assert actual is not None
    assert all(abs(a - e) < tol for a, e in zip(actual, expected)), (actual, expected)


def test_x1_title_text_table_picture_in_reading_order():
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[5])  # Title Only
    png = png_bytes()
    # Added out of visual order: reading order must still be title, text, table, picture.
    slide.shapes.add_picture(io.BytesIO(png), Inches(5), Inches(3), Inches(2), Inches(1.5))
    table = slide.shapes.add_table(2, 2, Inches(0.5), Inches(3), Inches(4), Inches(1)).table
    for r in range(2):
        for c in range(2):
            table.cell(r, c).text = f"r{r}c{c}"
    box = slide.shapes.add_textbox(Inches(0.5), Inches(1.6), Inches(4), Inches(1))
    box.text_frame.text = "Revenue grew"
    slide.shapes.title.text = "Quarterly review"
    pieces = chunk(save_pptx(prs))[1]
    assert [p.content_type for p in pieces] == ["title", "text", "table", "picture"]
    assert sum(1 for p in pieces if p.text) == 3 and sum(1 for p in pieces if p.image) == 1
    assert pieces[0].text == "Quarterly review"
    assert pieces[2].text == "r0c0\tr0c1\nr1c0\tr1c1"
    assert pieces[3].image == png
    for p in pieces:
        validate_bbox(p.bbox)
    assert_box(pieces[1].bbox, norm(Inches(0.5), Inches(1.6), Inches(4.5), Inches(2.6)))


def test_x2_group_scaled_and_moved_gives_transformed_child_boxes():
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])  # Blank
    group = slide.shapes.add_group_shape()
    a = group.shapes.add_textbox(Emu(914400), Emu(914400), Emu(914400), Emu(457200))
    a.text_frame.text = "Child A"
    b = group.shapes.add_textbox(Emu(1828800), Emu(1828800), Emu(914400), Emu(457200))
    b.text_frame.text = "Child B"
    xfrm = group._element.grpSpPr.xfrm
    raw_w, raw_h = xfrm.ext.cx, xfrm.ext.cy
    xfrm.off.x, xfrm.off.y = 457200, 1371600
    xfrm.ext.cx, xfrm.ext.cy = 2 * raw_w, 2 * raw_h
    # python-pptx itself still reports the untransformed child position.
    assert a.left == 914400
    pieces = {p.text: p for p in chunk(save_pptx(prs))[1]}
    box_a = pieces["Child A"].bbox
    assert_box(box_a, norm(457200, 1371600, 457200 + 2 * 914400, 1371600 + 2 * 457200))
    assert abs((box_a[2] - box_a[0]) * W - 2 * 914400) < 1


def _nested_deck(rot: int = 0, flip_h: bool = False) -> bytes:
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    child = sp_xml(12, "Child C", (100000, 100000, 200000, 100000))
    inner = grp_xml(11, (1000000, 1000000), (2000000, 1000000), (0, 0), (1000000, 500000), child)
    outer = grp_xml(
        10,
        (500000, 2000000),
        (3000000, 1500000),
        (1000000, 1000000),
        (2000000, 1000000),
        inner,
        rot=rot,
        flip_h=flip_h,
    )
    slide.shapes._spTree.append(parse_xml(outer))
    return save_pptx(prs)


def test_x2_nested_groups_compose_both_transforms():
    (piece,) = chunk(_nested_deck())[1]
    # inner: x 1.0M + 0.1M*2 .. ; outer: 0.5M + (x - 1.0M) * 1.5
    assert_box(piece.bbox, norm(800000, 2300000, 1400000, 2600000))


def test_group_rotation_and_flip_give_the_envelope():
    (rotated,) = chunk(_nested_deck(rot=90 * 60000))[1]
    # rotated 90 degrees about the outer group's centre (2.0M, 2.75M)
    assert_box(rotated.bbox, norm(2150000, 1550000, 2450000, 2150000))
    (flipped,) = chunk(_nested_deck(flip_h=True))[1]
    assert_box(flipped.bbox, norm(2600000, 2300000, 3200000, 2600000))


def test_zero_child_extent_is_unresolved():
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    slide.shapes._spTree.append(
        parse_xml(grp_xml(10, (0, 0), (100, 100), (0, 0), (0, 0), sp_xml(11, "Lost", (0, 0, 10, 10))))
    )
    (piece,) = chunk(save_pptx(prs))[1]
    assert piece.bbox is None and piece.bbox_reason == "unresolved"


def _master_title_box(prs):
    for ph in prs.slide_master.placeholders:
        if ph.placeholder_format.type == 1:  # TITLE
            return (ph.left, ph.top, ph.left + ph.width, ph.top + ph.height)
    raise AssertionError("no master title")


def test_x3_placeholder_frames_inherit_from_layout_then_master():
    prs = Presentation()
    layout_no_xfrm = prs.slide_layouts[1]
    title_ph = layout_no_xfrm.placeholders[0]
    xfrm = title_ph._element.spPr.find("{http://schemas.openxmlformats.org/drawingml/2006/main}xfrm")
    if xfrm is not None:
        title_ph._element.spPr.remove(xfrm)
    layout_own = prs.slide_layouts[5]
    layout_own.placeholders[0].left, layout_own.placeholders[0].top = Emu(1000000), Emu(500000)
    layout_own.placeholders[0].width, layout_own.placeholders[0].height = Emu(4000000), Emu(800000)

    s1 = prs.slides.add_slide(layout_no_xfrm)
    s1.shapes.title.text = "From the master"
    s2 = prs.slides.add_slide(layout_own)
    s2.shapes.title.text = "From the layout"
    for slide in (s1, s2):
        assert (
            slide.shapes.title._element.spPr.find(
                "{http://schemas.openxmlformats.org/drawingml/2006/main}xfrm"
            )
            is None
        )
    answer = chunk(save_pptx(prs))
    assert_box(answer[1][0].bbox, norm(*_master_title_box(prs)))
    assert_box(answer[2][0].bbox, norm(1000000, 500000, 5000000, 1300000))
    assert answer[1][0].content_type == "title"


def test_x4_unmatched_idx_and_unmapped_type_are_unresolved():
    prs = Presentation()
    layout = prs.slide_layouts[6]
    # HEADER is one of the types python-pptx's layout->master map lacks (with
    # VERTICAL_TITLE and others, which have no XML value of their own).
    layout.shapes._spTree.append(parse_xml(sp_xml(40, "layout header", ph='<p:ph type="hdr" idx="55"/>')))
    slide = prs.slides.add_slide(layout)
    slide.shapes._spTree.append(parse_xml(sp_xml(41, "Orphan body", ph='<p:ph type="body" idx="99"/>')))
    slide.shapes._spTree.append(parse_xml(sp_xml(42, "Header text", ph='<p:ph type="hdr" idx="55"/>')))
    content = save_pptx(prs)
    reopened = Presentation(io.BytesIO(content)).slides[0]
    # python-pptx's own gap: it cannot map HEADER to a master placeholder.
    header = [s for s in reopened.shapes if s.name == "S42"][0]
    with pytest.raises(KeyError):
        _ = header.left
    pieces = {p.text: p for p in chunk(content)[1]}
    for text in ("Orphan body", "Header text"):
        assert pieces[text].bbox is None and pieces[text].bbox_reason == "unresolved"


def test_x5_hidden_shape_and_hidden_slide_are_kept_as_hidden():
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    slide.shapes._spTree.append(parse_xml(sp_xml(20, "Secret", (100, 100, 1000, 1000), hidden=True)))
    slide.shapes._spTree.append(parse_xml(sp_xml(21, "Shown", (100, 2000, 1000, 1000))))
    hidden_slide = prs.slides.add_slide(prs.slide_layouts[6])
    hidden_slide.shapes._spTree.append(parse_xml(sp_xml(22, "On a hidden slide", (100, 100, 1000, 1000))))
    hidden_slide._element.set("show", "0")
    answer = chunk(save_pptx(prs))
    pieces = {p.text: p for p in answer[1]}
    assert pieces["Secret"].bbox is None and pieces["Secret"].bbox_reason == "hidden"
    assert_box(pieces["Secret"].meta["hidden_bbox"], norm(100, 100, 1100, 1100))
    assert pieces["Shown"].bbox is not None
    (on_hidden,) = answer[2]
    assert on_hidden.bbox_reason == "hidden" and on_hidden.bbox is None


def _emf_bytes() -> bytes:
    header = struct.pack("<II4i4i", 1, 108, 0, 0, 100, 100, 0, 0, 2540, 2540) + b" EMF" + b"\x00" * 64
    return header + struct.pack("<II", 14, 20) + b"\x00" * 12


def test_x6_raster_pictures_give_image_chunks_and_emf_does_not():
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    png, jpeg = png_bytes(), png_bytes((10, 120, 10), fmt="JPEG")
    slide.shapes.add_picture(io.BytesIO(png), Inches(1), Inches(1), Inches(1), Inches(1))
    slide.shapes.add_picture(io.BytesIO(jpeg), Inches(3), Inches(1), Inches(1), Inches(1))
    content = save_pptx(prs)
    blobs = [s.image.blob for s in Presentation(io.BytesIO(content)).slides[0].shapes]
    images = [p.image for p in chunk(content)[1] if p.image]
    assert images == blobs == [png, jpeg]

    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    slide.shapes.add_picture(io.BytesIO(png), Inches(1), Inches(1), Inches(1), Inches(1))
    slide.shapes.add_textbox(Inches(1), Inches(3), Inches(2), Inches(1)).text_frame.text = "caption"

    def to_emf(name: str, data: bytes):
        if name.startswith("ppt/media/") and name.endswith(".png"):
            return name[:-4] + ".emf", _emf_bytes()
        if name.endswith(".rels") or name == "[Content_Types].xml":
            text = data.decode()
            text = text.replace('.png"', '.emf"').replace(
                '<Default Extension="xml"',
                '<Default Extension="emf" ContentType="image/x-emf"/><Default Extension="xml"',
            )
            return name, text.encode()
        return name, data

    emf_deck = rewrite_zip(save_pptx(prs), to_emf)
    shapes = list(Presentation(io.BytesIO(emf_deck)).slides[0].shapes)
    assert shapes[0].image.content_type in ("image/x-emf", "image/x-wmf")  # a vector metafile
    pieces = chunk(emf_deck)[1]
    assert [p.text for p in pieces] == ["caption"]


def _merged_table_deck() -> bytes:
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    frame = slide.shapes.add_table(3, 3, Inches(1), Inches(1), Inches(6), Inches(3))
    table = frame.table
    for r in range(3):
        for c in range(3):
            table.cell(r, c).text = f"r{r}c{c}"
    table.cell(0, 0).merge(table.cell(0, 1))
    table.cell(0, 0).text = "merged"
    return save_pptx(prs)


def test_x7_pptx2_table_cells_with_spans_and_tiling_boxes():
    content = _merged_table_deck()
    (v2,) = chunk(content, PptxTableChunker())[1]
    (v1,) = chunk(content, PptxChunker())[1]
    assert v1.text == v2.text == "merged\t\tr0c2\nr1c0\tr1c1\tr1c2\nr2c0\tr2c1\tr2c2"
    assert v1.bbox == v2.bbox
    assert v1.layout.table is None and v1.layout.role == "table"
    grid = v2.layout.table
    assert (grid.rows, grid.cols) == (3, 3)
    assert len(grid.cells) == 8
    origin = [c for c in grid.cells if (c.row, c.col) == (0, 0)][0]
    assert origin.col_span == 2 and origin.row_span == 1 and origin.text == "merged"
    frame = v2.bbox
    boxes = [c.bbox for c in grid.cells]
    for b in boxes:
        validate_bbox(b)
        assert (
            frame[0] - 1e-9 <= b[0]
            and b[2] <= frame[2] + 1e-9
            and frame[1] - 1e-9 <= b[1]
            and b[3] <= frame[3] + 1e-9
        )
    area = sum((b[2] - b[0]) * (b[3] - b[1]) for b in boxes)
    assert abs(area - (frame[2] - frame[0]) * (frame[3] - frame[1])) < 1e-9
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            overlap_w = min(a[2], b[2]) - max(a[0], b[0])
            overlap_h = min(a[3], b[3]) - max(a[1], b[1])
            assert overlap_w <= 1e-9 or overlap_h <= 1e-9


def test_reader_gives_a_page_per_slide_with_notes():
    prs = Presentation()
    first = prs.slides.add_slide(prs.slide_layouts[5])
    first.shapes.title.text = "Agenda"
    first.notes_slide.notes_text_frame.text = "Speak slowly"
    prs.slides.add_slide(prs.slide_layouts[6])
    content = save_pptx(prs)
    pages = read_pages(content, mt.PPTX)
    assert [(p.page, p.status) for p in pages] == [(1, "read"), (2, "blank")]
    assert "Agenda" in pages[0].text and "Speak slowly" in pages[0].text
    pieces = chunk(content)[1]
    assert pieces[-1].text == "Speak slowly" and pieces[-1].bbox_reason == "no_geometry"


def test_chunker_modules_import_no_office_library():
    code = (
        "import sys\n"
        "import ingest_pipeline.chunkers.pptx, ingest_pipeline.chunkers.docx\n"
        "import ingest_pipeline.chunkers.xlsx, "
        "ingest_pipeline.chunkers.delimited, ingest_pipeline.chunkers.grid\n"
        "heavy = [m for m in ('pptx', 'docx', 'openpyxl', 'lxml', 'pypdfium2') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_unreadable_deck_is_disclaimed_not_raised():
    assert PptxChunker().chunk(b"PK\x03\x04 not really a zip", mt.PPTX, ()) == ()
