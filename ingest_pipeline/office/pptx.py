"""The slides of a PPTX package, from a walk of each slide's shape tree with lxml.

The pptx reader and chunkers share this walk: it yields every text-bearing shape, table,
chart, diagram and raster picture with its frame in slide EMUs, worked out the way
PowerPoint states it: group transforms composed down nested groups (child offset and
extent scaling, then the group's rotation and flips around its centre, as an
axis-aligned envelope), placeholder frames inherited from the layout placeholder of the
same ``idx`` and then from the master placeholder of the mapped type. A frame that cannot
be worked out is left None with a reason. Notes are kept.

A little over 500 lines: the slide walk, the frame geometry it applies and the model it
fills are one reading of the package, and nothing else uses their parts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ingest_pipeline.office.safety import DEFAULT_LIMITS, PackageLimits, localname, open_package, rel_attr

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in slide EMUs
_TRUE = ("1", "true", "on")
# Layout placeholder type -> the master placeholder type it inherits from.
_MASTER_TYPE = {
    "ctrTitle": "title",
    "title": "title",
    "subTitle": "body",
    "body": "body",
    "obj": "body",
    "chart": "body",
    "tbl": "body",
    "clipArt": "body",
    "dgm": "body",
    "media": "body",
    "pic": "body",
    "dt": "dt",
    "ftr": "ftr",
    "sldNum": "sldNum",
}
_TITLE_TYPES = frozenset({"title", "ctrTitle", "vertTitle"})
_RASTER_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
)


@dataclass
class TableCellData:
    row: int
    col: int
    text: str
    row_span: int = 1
    col_span: int = 1
    box: Box | None = None


@dataclass
class ShapeItem:
    """One chunkable thing on a slide, with its frame in slide EMUs (or why not)."""

    kind: str  # text | table | chart | diagram | picture
    order: int
    text: str = ""
    frame: Box | None = None
    frame_reason: str | None = None
    hidden: bool = False
    title: bool = False
    name: str = ""
    image: bytes | None = None
    image_type: str | None = None
    rows: int = 0
    cols: int = 0
    cells: list[TableCellData] = field(default_factory=list)
    chart_rows: list[list[str]] = field(default_factory=list)


@dataclass
class SlideData:
    index: int
    width: float
    height: float
    hidden: bool = False
    items: list[ShapeItem] = field(default_factory=list)
    notes: str = ""
    error: str | None = None  # why the slide could not be read (its page is failed)

    def ordered(self) -> list[ShapeItem]:
        """Reading order: titles first, then top to bottom (in bands), left to right."""
        band = max(self.height * 0.02, 1.0)

        def key(item: ShapeItem):
            if item.frame is None:
                return (1, math.inf, math.inf, item.order)
            return (
                0 if item.title else 1,
                0 if item.title else round(item.frame[1] / band),
                item.frame[0],
                item.order,
            )

        return sorted(self.items, key=key)

    def text(self) -> str:
        parts = [item.text for item in self.ordered() if item.text.strip()]
        if self.notes.strip():
            parts.append(self.notes)
        return "\n".join(parts)


# -- geometry ------------------------------------------------------------------------


@dataclass(frozen=True)
class Xfrm:
    x: float
    y: float
    cx: float
    cy: float
    rot: float = 0.0
    flip_h: bool = False
    flip_v: bool = False
    ch_x: float = 0.0
    ch_y: float = 0.0
    ch_cx: float | None = None
    ch_cy: float | None = None


def read_xfrm(node) -> Xfrm | None:
    """An ``a:xfrm``/``p:xfrm`` with both offset and extent, else None."""
    if node is None:
        return None
    off = ext = ch_off = ch_ext = None
    for child in node:
        name = localname(child)
        if name == "off":
            off = child
        elif name == "ext":
            ext = child
        elif name == "chOff":
            ch_off = child
        elif name == "chExt":
            ch_ext = child
    if off is None or ext is None:
        return None
    try:
        return Xfrm(
            x=float(off.get("x", "0")),
            y=float(off.get("y", "0")),
            cx=float(ext.get("cx", "0")),
            cy=float(ext.get("cy", "0")),
            rot=float(node.get("rot", "0")) / 60000.0,
            flip_h=(node.get("flipH") or "").lower() in _TRUE,
            flip_v=(node.get("flipV") or "").lower() in _TRUE,
            ch_x=float(ch_off.get("x", "0")) if ch_off is not None else 0.0,
            ch_y=float(ch_off.get("y", "0")) if ch_off is not None else 0.0,
            ch_cx=float(ch_ext.get("cx", "0")) if ch_ext is not None else None,
            ch_cy=float(ch_ext.get("cy", "0")) if ch_ext is not None else None,
        )
    except ValueError:
        return None


def rotate_envelope(box: Box, degrees: float) -> Box:
    """The axis-aligned envelope of ``box`` rotated about its centre."""
    if not degrees % 360:
        return box
    x0, y0, x1, y1 = box
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    a = math.radians(degrees)
    cos, sin = math.cos(a), math.sin(a)
    xs, ys = [], []
    for x, y in ((x0, y0), (x1, y0), (x1, y1), (x0, y1)):
        dx, dy = x - cx, y - cy
        xs.append(cx + dx * cos - dy * sin)
        ys.append(cy + dx * sin + dy * cos)
    return (min(xs), min(ys), max(xs), max(ys))


def group_map(box: Box, group: Xfrm) -> Box | None:
    """Map a box from a group's child space into the space the group sits in."""
    ch_cx = group.ch_cx if group.ch_cx is not None else group.cx
    ch_cy = group.ch_cy if group.ch_cy is not None else group.cy
    if ch_cx <= 0 or ch_cy <= 0:
        return None
    sx, sy = group.cx / ch_cx, group.cy / ch_cy
    x0 = group.x + (box[0] - group.ch_x) * sx
    x1 = group.x + (box[2] - group.ch_x) * sx
    y0 = group.y + (box[1] - group.ch_y) * sy
    y1 = group.y + (box[3] - group.ch_y) * sy
    gx, gy = group.x + group.cx / 2, group.y + group.cy / 2
    if group.flip_h:
        x0, x1 = 2 * gx - x1, 2 * gx - x0
    if group.flip_v:
        y0, y1 = 2 * gy - y1, 2 * gy - y0
    if group.rot % 360:
        # Rotation is about the group's centre, not the child box's own centre.
        a = math.radians(group.rot)
        cos, sin = math.cos(a), math.sin(a)
        xs, ys = [], []
        for x, y in ((x0, y0), (x1, y0), (x1, y1), (x0, y1)):
            dx, dy = x - gx, y - gy
            xs.append(gx + dx * cos - dy * sin)
            ys.append(gy + dx * sin + dy * cos)
        x0, y0, x1, y1 = min(xs), min(ys), max(xs), max(ys)
    return (x0, y0, x1, y1)


def compose(box: Box | None, groups: tuple[Xfrm, ...]) -> Box | None:
    """Apply group transforms from the innermost group outwards."""
    for group in reversed(groups):
        if box is None:
            return None
        box = group_map(box, group)
    return box


# -- the walk ------------------------------------------------------------------------


def _find(node, *path: str):
    for name in path:
        if node is None:
            return None
        node = next((c for c in node if localname(c) == name), None)
    return node


def _nv(shape):
    """The ``p:nvXxPr`` element of a shape (its first child)."""
    return next(iter(shape), None)


def _placeholder(shape):
    nv = _nv(shape)
    return _find(nv, "nvPr", "ph") if nv is not None else None


def _is_hidden(shape) -> bool:
    c_nv_pr = _find(_nv(shape), "cNvPr") if _nv(shape) is not None else None
    return c_nv_pr is not None and (c_nv_pr.get("hidden") or "").lower() in _TRUE


def _shape_name(shape) -> str:
    c_nv_pr = _find(_nv(shape), "cNvPr") if _nv(shape) is not None else None
    return (c_nv_pr.get("name") or "") if c_nv_pr is not None else ""


def _own_xfrm(shape):
    name = localname(shape)
    if name == "graphicFrame":
        return read_xfrm(_find(shape, "xfrm"))
    if name == "grpSp":
        return read_xfrm(_find(shape, "grpSpPr", "xfrm"))
    return read_xfrm(_find(shape, "spPr", "xfrm"))


def text_of(tx_body) -> str:
    """Paragraphs of a ``txBody`` joined by newlines (runs, fields, line breaks)."""
    if tx_body is None:
        return ""
    lines = []
    for p in tx_body:
        if localname(p) != "p":
            continue
        parts = []
        for node in p.iter():
            name = localname(node)
            if name == "t" and node.getparent() is not None and localname(node.getparent()) in ("r", "fld"):
                parts.append(node.text or "")
            elif name == "br":
                parts.append("\n")
        lines.append("".join(parts))
    return "\n".join(lines).strip("\n")


class _PlaceholderFrames:
    """Frames of layout and master placeholders, for shapes that state none."""

    def __init__(self, package, layout_part: str | None) -> None:
        self.layout: list[tuple[str, str, Xfrm | None]] = []  # (type, idx, xfrm)
        self.master: list[tuple[str, str, Xfrm | None]] = []
        if layout_part:
            self.layout = self._collect(package, layout_part)
            master_part = next(
                (
                    t
                    for rt, t, ext in package.rels(layout_part).values()
                    if not ext and rt.endswith("/slideMaster") and package.has(t)
                ),
                None,
            )
            if master_part:
                self.master = self._collect(package, master_part)

    @staticmethod
    def _collect(package, part: str) -> list[tuple[str, str, Xfrm | None]]:
        root = package.optional_xml(part)
        tree = next((n for n in root.iter() if localname(n) == "spTree"), None) if root is not None else None
        out = []
        if tree is None:
            return out
        for shape in tree:
            ph = _placeholder(shape) if localname(shape) in ("sp", "pic", "graphicFrame") else None
            if ph is None:
                continue
            out.append((ph.get("type") or "obj", ph.get("idx") or "0", _own_xfrm(shape)))
        return out

    def resolve(self, ph) -> tuple[Xfrm | None, str]:
        """The inherited frame for a slide placeholder, and where it came from."""
        ph_type = ph.get("type") or "obj"
        idx = ph.get("idx") or "0"
        layout = next((entry for entry in self.layout if entry[1] == idx), None)
        if layout is None and ph_type in _TITLE_TYPES:
            layout = next((entry for entry in self.layout if entry[0] == ph_type), None)
        if layout is None:
            return None, "no layout placeholder with this idx"
        if layout[2] is not None:
            return layout[2], "layout"
        master_type = _MASTER_TYPE.get(layout[0], layout[0])
        master = next((entry for entry in self.master if entry[0] == master_type), None)
        if master is None or master[2] is None:
            return None, f"no master placeholder of type {master_type}"
        return master[2], "master"


class _SlideWalker:
    def __init__(self, package, part: str, slide: SlideData, frames: _PlaceholderFrames) -> None:
        self.package = package
        self.part = part
        self.slide = slide
        self.frames = frames
        self.rels = package.rels(part)
        self.counter = 0

    def walk(self, tree, groups: tuple[Xfrm, ...], hidden: bool, group_ok: bool) -> None:
        for shape in tree:
            name = localname(shape)
            if name == "AlternateContent":
                choice = _find(shape, "Choice")
                self.walk(choice if choice is not None else (), groups, hidden, group_ok)
                continue
            if name not in ("sp", "grpSp", "graphicFrame", "pic", "cxnSp", "contentPart"):
                continue
            self.counter += 1
            shape_hidden = hidden or _is_hidden(shape)
            if name == "grpSp":
                xfrm = _own_xfrm(shape)
                ok = (
                    group_ok
                    and xfrm is not None
                    and (xfrm.ch_cx is None or xfrm.ch_cx > 0)
                    and (xfrm.ch_cy is None or xfrm.ch_cy > 0)
                )
                self.walk(shape, groups + ((xfrm,) if xfrm is not None else ()), shape_hidden, ok)
                continue
            try:
                self.shape(shape, name, groups, shape_hidden, group_ok)
            except (ValueError, KeyError, IndexError, TypeError):
                # A malformed shape is one item lost, never the whole slide.
                continue

    def frame(self, shape, groups: tuple[Xfrm, ...], group_ok: bool):
        """(slide box, reason, is title, box in the parent group's space)."""
        xfrm = _own_xfrm(shape)
        ph = _placeholder(shape)
        is_title = ph is not None and (ph.get("type") or "obj") in _TITLE_TYPES
        if xfrm is None and ph is not None:
            xfrm, _source = self.frames.resolve(ph)
        if xfrm is None or not group_ok:
            return None, "unresolved", is_title, None
        local = (xfrm.x, xfrm.y, xfrm.x + xfrm.cx, xfrm.y + xfrm.cy)
        box = compose(rotate_envelope(local, xfrm.rot), groups)
        if box is None:
            return None, "unresolved", is_title, None
        return box, None, is_title, (local if not xfrm.rot % 360 else None)

    def add(self, **kwargs) -> ShapeItem:
        item = ShapeItem(order=self.counter, **kwargs)
        self.slide.items.append(item)
        return item

    def shape(self, shape, name: str, groups, hidden: bool, group_ok: bool) -> None:
        box, reason, is_title, local = self.frame(shape, groups, group_ok)
        common = {"frame": box, "frame_reason": reason, "hidden": hidden, "name": _shape_name(shape)}
        if name == "sp":
            text = text_of(_find(shape, "txBody"))
            if text.strip():
                self.add(kind="text", text=text, title=is_title, **common)
        elif name == "pic":
            self.picture(shape, common)
        elif name == "graphicFrame":
            data = _find(shape, "graphic", "graphicData")
            if data is None:
                return
            tbl = _find(data, "tbl")
            if tbl is not None:
                self.table(tbl, local, groups, common)
                return
            uri = data.get("uri") or ""
            if uri.endswith("/chart"):
                self.chart(data, common)
            elif uri.endswith("/diagram"):
                self.diagram(data, common)

    def picture(self, shape, common) -> None:
        blip = next((n for n in shape.iter() if localname(n) == "blip"), None)
        if blip is None:
            return
        rid = rel_attr(blip, "embed")
        rel = self.rels.get(rid or "")
        if not rel or rel[2] or not self.package.has(rel[1]):
            return  # linked or missing image: nothing to embed
        blob = self.package.read(rel[1])
        kind = next((ctype for magic, ctype in _RASTER_MAGIC if blob.startswith(magic)), None)
        if kind is None:
            return  # EMF/WMF vector, SVG or a broken image part
        self.add(kind="picture", image=blob, image_type=kind, **common)

    def table(self, tbl, local: Box | None, groups, common) -> None:
        grid = _find(tbl, "tblGrid")
        widths = [
            float(c.get("w", "0")) for c in (grid if grid is not None else ()) if localname(c) == "gridCol"
        ]
        rows = [r for r in tbl if localname(r) == "tr"]
        heights = [float(r.get("h", "0")) for r in rows]
        cells: list[TableCellData] = []
        for r, tr in enumerate(rows):
            c = 0
            for tc in tr:
                if localname(tc) != "tc":
                    continue
                spanned = (tc.get("hMerge") or "").lower() in _TRUE or (
                    tc.get("vMerge") or ""
                ).lower() in _TRUE
                if not spanned:
                    cells.append(
                        TableCellData(
                            row=r,
                            col=c,
                            text=text_of(_find(tc, "txBody")),
                            row_span=min(max(1, int(tc.get("rowSpan") or "1")), len(rows) - r),
                            col_span=min(max(1, int(tc.get("gridSpan") or "1")), max(len(widths) - c, 1)),
                        )
                    )
                c += 1
        cols = max([len(widths)] + [cell.col + cell.col_span for cell in cells] + [0])
        if local is not None and len(widths) == cols and rows:
            x0, y0, x1, y1 = local
            widths = _fill_zero(widths, x1 - x0)
            heights = _fill_zero(heights, y1 - y0)
            sx, sy = (x1 - x0) / sum(widths), (y1 - y0) / sum(heights)
            xs = [x0 + sum(widths[:i]) * sx for i in range(cols + 1)]
            ys = [y0 + sum(heights[:i]) * sy for i in range(len(rows) + 1)]
            for cell in cells:
                end_r = min(cell.row + cell.row_span, len(rows))
                end_c = min(cell.col + cell.col_span, cols)
                cell.box = compose((xs[cell.col], ys[cell.row], xs[end_c], ys[end_r]), groups)
        lines = []
        grid = {(cell.row, cell.col): cell.text for cell in cells}
        for r in range(len(rows)):
            lines.append("\t".join(" ".join(grid.get((r, c), "").split()) for c in range(cols)))
        self.add(kind="table", text="\n".join(lines), rows=len(rows), cols=cols, cells=cells, **common)

    def chart(self, data, common) -> None:
        from ingest_pipeline.office.charts import chart_rel_target, read_chart

        target = chart_rel_target(self.package, self.part, data)
        if target is None:
            return
        root = self.package.optional_xml(target)
        if root is None:
            return
        chart = read_chart(root)
        self.add(kind="chart", text=chart.text(), chart_rows=chart.rows, **common)

    def diagram(self, data, common) -> None:
        ids = next((n for n in data.iter() if localname(n) == "relIds"), None)
        if ids is None:
            return
        rel = self.rels.get(rel_attr(ids, "dm") or "")
        if not rel or rel[2] or not self.package.has(rel[1]):
            return
        root = self.package.optional_xml(rel[1])
        if root is None:
            return
        texts = []
        for p in root.iter():
            if localname(p) == "p":
                line = "".join(t.text or "" for t in p.iter() if localname(t) == "t")
                if line.strip():
                    texts.append(line)
        if texts:
            self.add(kind="diagram", text="\n".join(texts), **common)


def _fill_zero(sizes: list[float], total: float) -> list[float]:
    """Stated sizes with zeros (rows PowerPoint sizes to fit) given a share of the frame."""
    zeros = sum(1 for v in sizes if v <= 0)
    if not zeros:
        return sizes
    stated = sum(v for v in sizes if v > 0)
    share = (total - stated) / zeros if total > stated else (stated / (len(sizes) - zeros) if stated else 1.0)
    return [v if v > 0 else share for v in sizes]


def load_presentation(content: bytes, limits: PackageLimits = DEFAULT_LIMITS) -> list[SlideData]:
    """Every slide with its items and notes; PackageError if the deck cannot be read."""
    from ingest_pipeline.office.safety import MalformedPart, PackageError

    package = open_package(content, limits, kind="PPTX")
    main = package.main_part()
    root = package.xml(main)
    width, height = 9144000.0, 6858000.0
    slide_ids = []
    for node in root:
        name = localname(node)
        if name == "sldSz":
            try:
                width, height = float(node.get("cx", width)), float(node.get("cy", height))
            except ValueError:
                pass
        elif name == "sldIdLst":
            slide_ids = [rel_attr(s, "id") for s in node if localname(s) == "sldId"]
    rels = package.rels(main)
    slides = []
    for index, rid in enumerate(slide_ids):
        rel = rels.get(rid or "")
        if not rel or rel[2] or not package.has(rel[1]):
            raise PackageError(f"corrupt package: slide {index + 1} part is missing")
        part = rel[1]
        try:
            sld = package.xml(part)
        except MalformedPart as exc:
            # One broken slide fails its own page, not the deck.
            slides.append(SlideData(index=index, width=width, height=height, error=str(exc)))
            continue
        slide = SlideData(
            index=index, width=width, height=height, hidden=(sld.get("show") or "1").lower() in ("0", "false")
        )
        slide_rels = package.rels(part)
        layout_part = next(
            (
                t
                for rt, t, ext in slide_rels.values()
                if not ext and rt.endswith("/slideLayout") and package.has(t)
            ),
            None,
        )
        walker = _SlideWalker(package, part, slide, _PlaceholderFrames(package, layout_part))
        tree = next((n for n in sld.iter() if localname(n) == "spTree"), None)
        if tree is not None:
            walker.walk(tree, (), slide.hidden, True)
        notes_part = next(
            (
                t
                for rt, t, ext in slide_rels.values()
                if not ext and rt.endswith("/notesSlide") and package.has(t)
            ),
            None,
        )
        if notes_part:
            notes = package.optional_xml(notes_part)
            slide.notes = _notes_text(notes) if notes is not None else ""
        slides.append(slide)
    return slides


def _notes_text(root) -> str:
    tree = next((n for n in root.iter() if localname(n) == "spTree"), None)
    texts = []
    for shape in tree if tree is not None else ():
        ph = _placeholder(shape) if localname(shape) == "sp" else None
        if ph is not None and (ph.get("type") or "") == "body":
            text = text_of(_find(shape, "txBody"))
            if text.strip():
                texts.append(text)
    return "\n".join(texts)
