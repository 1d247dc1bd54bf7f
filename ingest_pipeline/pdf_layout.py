"""Page geometry from PDFium shared by pdf@1, pdf@2 and pdf@3.

Everything here works in *display space*: points, origin at the top-left of the page as
shown (crop box applied, ``/Rotate`` applied), y growing downward. Boxes are normalized
to [0, 1] only at the end, by the display size.

The unit of text is chosen per page for speed: PDFium's text rects (one per run of a
text object) on ordinary pages, its characters on pages whose generator draws every
glyph as its own run. A PDFium line whose rects do not sit in one row with small gaps
(fused columns, hyphenation joins, mixed angles) is rebuilt from its characters.

Callers hold ``PDFIUM_LOCK`` around every function that takes PDFium objects.
"""

from __future__ import annotations

import bisect
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

DPI_ENV = "INGEST_CHUNK_DPI"
DEFAULT_DPI = 120.0

GAP_FACTOR = 1.0  # a gap wider than this many font sizes splits a line
PERP_OVERLAP = 0.4  # share of the smaller height two pieces must share to sit in one row
CROP_KEEP = 0.5  # share of a fragment's area that must lie inside the crop box
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SPACES = re.compile(r"\s+")
_SOLID = re.compile(r"\S")


_CLEAN = {0xFFFE: "-", 0x02: "-", 0x00: None, 0x09: " ", 0x0A: " ", 0x0D: " ", 0x0B: " ", 0x0C: " "}
_CLEAN.update({c: "\ufffd" for c in range(0x20) if c not in _CLEAN})
_CLEAN[0x7F] = "\ufffd"


def clean_text(text: str) -> str:
    """PDFium's marker for a line-end hyphen becomes '-', control characters become
    U+FFFD (broken font encodings), whitespace runs one space."""
    if text.isprintable() and "  " not in text:
        return text.strip()
    text = text.translate(_CLEAN)
    if "  " in text:
        text = _SPACES.sub(" ", text)
    return text.strip()


# --------------------------------------------------------------------------- frames


@dataclass(frozen=True)
class PageFrame:
    """Maps PDF user space to display space for one page."""

    cx0: float
    cy0: float
    cx1: float
    cy1: float
    rotation: int  # clockwise degrees: 0, 90, 180 or 270

    @property
    def crop_width(self) -> float:
        return self.cx1 - self.cx0

    @property
    def crop_height(self) -> float:
        return self.cy1 - self.cy0

    @property
    def width(self) -> float:
        return self.crop_height if self.rotation in (90, 270) else self.crop_width

    @property
    def height(self) -> float:
        return self.crop_width if self.rotation in (90, 270) else self.crop_height

    def point(self, x: float, y: float) -> tuple[float, float]:
        u, v = x - self.cx0, self.cy1 - y
        r = self.rotation
        if r == 90:
            return self.crop_height - v, u
        if r == 180:
            return self.crop_width - u, self.crop_height - v
        if r == 270:
            return v, self.crop_width - u
        return u, v

    def box(self, left: float, bottom: float, right: float, top: float) -> tuple[float, float, float, float]:
        """A user-space box (l, b, r, t) as a display box (x0, y0, x1, y1)."""
        if self.rotation == 0:
            return (left - self.cx0, self.cy1 - top, right - self.cx0, self.cy1 - bottom)
        ax, ay = self.point(left, bottom)
        bx, by = self.point(right, top)
        return (min(ax, bx), min(ay, by), max(ax, bx), max(ay, by))

    def normalize(self, box: Sequence[float]):
        """A display box as a normalized bbox, or None if nothing is left."""
        w, h = self.width, self.height
        x0, y0, x1, y1 = box[0] / w, box[1] / h, box[2] / w, box[3] / h
        x0 = 0.0 if x0 < 0.0 else (1.0 if x0 > 1.0 else x0)
        y0 = 0.0 if y0 < 0.0 else (1.0 if y0 > 1.0 else y0)
        x1 = 0.0 if x1 < 0.0 else (1.0 if x1 > 1.0 else x1)
        y1 = 0.0 if y1 < 0.0 else (1.0 if y1 > 1.0 else y1)
        if x1 <= x0 or y1 <= y0:
            return None
        return (x0, y0, x1, y1)  # in range by construction; ChunkPiece validates it

    def visible_share(self, box: Sequence[float]) -> float:
        area = (box[2] - box[0]) * (box[3] - box[1])
        if area <= 0:
            inside = 0.0 <= box[0] <= self.width and 0.0 <= box[1] <= self.height
            return 1.0 if inside else 0.0
        ix = min(box[2], self.width) - max(box[0], 0.0)
        iy = min(box[3], self.height) - max(box[1], 0.0)
        return max(ix, 0.0) * max(iy, 0.0) / area

    def clamp(self, box: Sequence[float]) -> tuple[float, float, float, float]:
        return (
            max(box[0], 0.0),
            max(box[1], 0.0),
            min(box[2], self.width),
            min(box[3], self.height),
        )


def page_frame(page) -> PageFrame:
    """The frame of a pypdfium2 page: its crop box (within the media box) and /Rotate."""
    ml, mb, mr, mt = page.get_mediabox()
    try:
        cl, cb, cr, ct = page.get_cropbox()
    except Exception:  # noqa: BLE001 - a page without a usable crop box shows its media box
        cl, cb, cr, ct = ml, mb, mr, mt
    ml, mr = sorted((ml, mr))
    mb, mt = sorted((mb, mt))
    cl, cr = sorted((cl, cr))
    cb, ct = sorted((cb, ct))
    x0, y0, x1, y1 = max(cl, ml), max(cb, mb), min(cr, mr), min(ct, mt)
    if x1 - x0 < 1 or y1 - y0 < 1:
        x0, y0, x1, y1 = ml, mb, mr, mt
    rotation = int(page.get_rotation() or 0) % 360
    return PageFrame(x0, y0, x1, y1, rotation)


# --------------------------------------------------------------------------- lines


@dataclass(slots=True)
class Line:
    """A visual line in display space; ``direction`` is the reading direction in
    clockwise degrees (0 = left to right, 270 = bottom to top) or -1 when skewed."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    direction: int
    size: float
    first_char: int = 0
    role: str = "body"
    block: int = 0

    @property
    def box(self) -> tuple[float, float, float, float]:
        return (self.x0, self.y0, self.x1, self.y1)

    @property
    def cx(self) -> float:
        return (self.x0 + self.x1) / 2

    @property
    def cy(self) -> float:
        return (self.y0 + self.y1) / 2


@dataclass(slots=True)
class _Frag:
    text: str
    box: list  # [x0, y0, x1, y1]
    direction: int
    size: float
    first_char: int
    rtl: bool = False
    head: tuple | None = None  # box of the first rect (for baseline shifts at joins)
    tail: tuple | None = None  # box of the last rect


_RTL = re.compile(r"[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufeff]")
_LTR = re.compile(r"[A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff]")


def _is_rtl(text: str) -> bool:
    """Whether a line is mostly right-to-left script (its characters then advance
    leftward, and PDFium's logical order is kept as it is)."""
    rtl = len(_RTL.findall(text))
    return rtl > 0 and rtl >= len(_LTR.findall(text))


def _quantize(angle_rad: float, rotation: int) -> int:
    if angle_rad == 0.0:
        return rotation
    deg = (math.degrees(angle_rad) + rotation) % 360.0
    for q in (0, 90, 180, 270, 360):
        if abs(deg - q) <= 8.0:
            return q % 360
    return -1


def _along(box, d: int) -> tuple[float, float]:
    if d == 0 or d == -1:
        return box[0], box[2]
    if d == 180:
        return -box[2], -box[0]
    if d == 90:
        return box[1], box[3]
    return -box[3], -box[1]


def _perp(box, d: int) -> tuple[float, float]:
    if d in (90, 270):
        return box[0], box[2]
    return box[1], box[3]


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return min(a1, b1) - max(a0, b0)


def _union(boxes: Iterable[Sequence[float]]) -> list:
    it = iter(boxes)
    first = next(it)
    x0, y0, x1, y1 = first[0], first[1], first[2], first[3]
    for b in it:
        if b[0] < x0:
            x0 = b[0]
        if b[1] < y0:
            y0 = b[1]
        if b[2] > x1:
            x1 = b[2]
        if b[3] > y1:
            y1 = b[3]
    return [x0, y0, x1, y1]


_FAST: dict[str, object] = {}


def _fast_function(raw, ctypes, name: str, restype):
    """A PDFium function without ctypes argument conversion (about 3x cheaper per call,
    which matters at one call per rect); the checked binding when that is unavailable."""
    fn = _FAST.get(name)
    if fn is None:
        try:
            from pypdfium2_raw import bindings

            fn = bindings._libs["pdfium"][name]  # a fresh function object: no argtypes
            fn.restype = restype
        except Exception:  # noqa: BLE001 - fall back to pypdfium2's checked binding
            fn = getattr(raw, name)
        _FAST[name] = fn
    return fn


class _TextAccess:
    """Allocation-free wrappers over the PDFium text calls made per line or character."""

    def __init__(self, textpage, raw, ctypes) -> None:
        self.raw = raw
        self.tp = ctypes.c_void_p(ctypes.cast(textpage.raw, ctypes.c_void_p).value)
        self.l, self.b, self.r, self.t = (ctypes.c_double() for _ in range(4))
        self.refs = tuple(ctypes.byref(v) for v in (self.l, self.b, self.r, self.t))
        self._count_rects = _fast_function(raw, ctypes, "FPDFText_CountRects", ctypes.c_int)
        self._get_rect = _fast_function(raw, ctypes, "FPDFText_GetRect", ctypes.c_int)
        self._char_box = _fast_function(raw, ctypes, "FPDFText_GetCharBox", ctypes.c_int)
        self._angle = _fast_function(raw, ctypes, "FPDFText_GetCharAngle", ctypes.c_float)
        self._font_size = _fast_function(raw, ctypes, "FPDFText_GetFontSize", ctypes.c_double)
        self._loose_box = _fast_function(raw, ctypes, "FPDFText_GetLooseCharBox", ctypes.c_int)
        self.rect = raw.FS_RECTF()
        self.rect_ref = ctypes.byref(self.rect)
        if self._count_rects is raw.FPDFText_CountRects:
            self.tp = textpage.raw

    def rects(self, start: int, count: int) -> list[tuple[float, float, float, float]]:
        n = self._count_rects(self.tp, start, count)
        out = []
        rl, rb, rr, rt = self.refs
        get, tp = self._get_rect, self.tp
        lv, bv, rv, tv = self.l, self.b, self.r, self.t
        for j in range(max(n, 0)):
            if get(tp, j, rl, rt, rr, rb):
                out.append((lv.value, bv.value, rv.value, tv.value))
        return out

    def count_rects(self, start: int, count: int) -> int:
        return self._count_rects(self.tp, start, count)

    def charbox(self, i: int):
        rl, rb, rr, rt = self.refs
        if not self._char_box(self.tp, i, rl, rr, rb, rt):
            return None
        return (self.l.value, self.b.value, self.r.value, self.t.value)

    def angle(self, i: int) -> float:
        a = self._angle(self.tp, i)
        return a if a >= 0 else 0.0

    def font_size(self, i: int) -> float:
        return float(self._font_size(self.tp, i))

    def loose_extent(self, i: int, vertical: bool) -> float:
        rect = self.rect
        if not self._loose_box(self.tp, i, self.rect_ref):
            return 0.0
        return abs(rect.right - rect.left) if vertical else abs(rect.top - rect.bottom)


def page_text(textpage, raw) -> str:
    """The page's characters as a string whose index is the character index."""
    n = textpage.count_chars()
    if n <= 0:
        return ""
    text = textpage.get_text_range(0, n)
    if len(text) == n:
        return text
    chars = []
    for i in range(n):
        code = raw.FPDFText_GetUnicode(textpage.raw, i)
        chars.append(chr(code) if 0 < code < 0x110000 and not 0xD800 <= code < 0xE000 else "\ufffd")
    return "".join(chars)


def _size_of(acc: _TextAccess, index: int, perp_extent: float, vertical: bool = False) -> float:
    """A line's font size in points: PDFium's, or (when it reports 1, as for text set
    with ``1 Tf`` and a scaled matrix) the height of the character's loose box, which
    follows the font's ascent and descent rather than the glyph's ink."""
    fs = acc.font_size(index)
    if not (fs > 1.0):
        fs = acc.loose_extent(index, vertical)
    if not (fs > 1.0):
        return max(perp_extent, 1.0)
    return max(min(fs, 2.0 * perp_extent), perp_extent, 1.0)


def _horizontal_fragment(acc, frame, text, s, e, first, rects):
    """The common case, inlined: an unrotated left-to-right line whose rects form one
    row with small gaps. When they do not, the line's font size, for the general path."""
    cx0, cy1 = frame.cx0, frame.cy1
    l, b, r, t = rects[0]
    x0, x1, top, bottom = l, r, t, b
    height = t - b
    for l2, b2, r2, t2 in rects[1:]:
        if l2 < x0:
            x0 = l2
        if r2 > x1:
            x1 = r2
        if t2 > top:
            top = t2
        if b2 < bottom:
            bottom = b2
        h2 = t2 - b2
        if h2 > height:
            height = h2
    size = _size_of(acc, first, height)
    if len(rects) > 1:
        limit = GAP_FACTOR * size
        back = 0.5 * size
        reach = rects[0][2]
        pb, pt = rects[0][1], rects[0][3]
        for l2, b2, r2, t2 in rects[1:]:
            if l2 < reach - back or l2 - reach > limit:
                return size
            ov = (t2 if t2 < pt else pt) - (b2 if b2 > pb else pb)
            if ov < PERP_OVERLAP * min(t2 - b2, pt - pb):
                return size
            if r2 > reach:
                reach = r2
            pb, pt = b2, t2
    fl, fb, fr, ft = rects[0]
    ll, lb, lr, lt = rects[-1]
    return [
        _Frag(
            text[s:e], [x0 - cx0, cy1 - top, x1 - cx0, cy1 - bottom], 0, size, first,
            head=(fl - cx0, cy1 - ft, fr - cx0, cy1 - fb), tail=(ll - cx0, cy1 - lt, lr - cx0, cy1 - lb),
        )
    ]


def _rect_fragments(acc, frame, text, s, e, first, d, rects):
    """Fragments of a PDFium line from its rects: one, unless consecutive rects leave a
    wide gap, step backwards or change row; then the line is cut where the rect after
    the break starts (found by counting rects over growing prefixes of the line)."""
    size = None
    if d == 0 and frame.rotation == 0:
        fast = _horizontal_fragment(acc, frame, text, s, e, first, rects)
        if isinstance(fast, list):
            return fast
        size = fast
    box = frame.box
    boxes = [box(*r) for r in rects]
    if size is None:
        if d in (0, -1):
            perp_extent = max(b[3] - b[1] for b in boxes)
        else:
            perp_extent = max(_perp(b, d)[1] - _perp(b, d)[0] for b in boxes)
        size = _size_of(acc, first, perp_extent, d in (90, 270))
    if d == -1 or len(boxes) == 1:
        return [_Frag(text[s:e], _union(boxes), d, size, first)]
    gap_limit = GAP_FACTOR * size
    back = 0.5 * size
    breaks = []
    pa0, pa1 = _along(boxes[0], d)
    pp0, pp1 = _perp(boxes[0], d)
    for j in range(1, len(boxes)):
        b = boxes[j]
        a0, a1 = _along(b, d)
        p0, p1 = _perp(b, d)
        if a0 < pa1 - back or a0 - pa1 > gap_limit or _overlap(p0, p1, pp0, pp1) < PERP_OVERLAP * min(p1 - p0, pp1 - pp0):
            breaks.append(j)
            pa1 = a1
        else:
            pa1 = max(a1, pa1)
        pp0, pp1 = p0, p1
    if not breaks:
        return [_Frag(text[s:e], _union(boxes), d, size, first)]
    cuts = [s]
    for j in breaks:
        lo, hi = cuts[-1] - s + 1, e - s
        while lo < hi:  # smallest prefix length holding j + 1 rects
            mid = (lo + hi) // 2
            if acc.count_rects(s, mid) >= j + 1:
                hi = mid
            else:
                lo = mid + 1
        cuts.append(s + lo - 1)
    cuts.append(e)
    frags = []
    bounds = [0, *breaks, len(boxes)]
    for k in range(len(cuts) - 1):
        piece = text[cuts[k]:cuts[k + 1]]
        if not piece.strip():
            continue
        part = boxes[bounds[k]:bounds[k + 1]]
        if not part:
            continue
        pe = max(_perp(b, d)[1] - _perp(b, d)[0] for b in part)
        frags.append(_Frag(piece, _union(part), d, max(min(size, 2.0 * pe), pe, 1.0), cuts[k]))
    return frags


def _char_fragments(acc, frame, text, s, e, rotation, per_char_angle: bool):
    """Fragments of a PDFium line rebuilt from its characters."""
    frags: list[_Frag] = []
    cur_chars: list[str] = []
    cur_box = None
    cur_dir = None
    cur_first = 0
    prev_a1 = None
    pending_space = False
    size = None
    base_angle = None

    def flush():
        nonlocal cur_chars, cur_box, prev_a1, pending_space, size
        if cur_box is not None and "".join(cur_chars).strip():
            pe = _perp(cur_box, cur_dir)
            frags.append(_Frag("".join(cur_chars), list(cur_box), cur_dir, max(size or 0.0, pe[1] - pe[0], 1.0), cur_first))
        cur_chars, cur_box, prev_a1, pending_space, size = [], None, None, False, None

    for i in range(s, e):
        c = text[i]
        if c.isspace():
            pending_space = True
            continue
        ub = acc.charbox(i)
        if ub is None or ub[2] - ub[0] <= 0 or ub[3] - ub[1] <= 0:
            pending_space = True  # generated or zero-area: a separator only
            continue
        b = frame.box(*ub)
        if per_char_angle or base_angle is None:
            base_angle = acc.angle(i)
        d = _quantize(base_angle, rotation)
        a0, a1 = _along(b, d)
        p0, p1 = _perp(b, d)
        if cur_box is not None:
            cp0, cp1 = _perp(cur_box, cur_dir)
            limit = GAP_FACTOR * (size or (cp1 - cp0))
            breaks = (
                d != cur_dir
                or _overlap(p0, p1, cp0, cp1) < PERP_OVERLAP * min(p1 - p0, cp1 - cp0)
                or a0 - prev_a1 > limit
                or a0 < prev_a1 - max(limit, a1 - a0) * 1.5
            )
            if breaks:
                flush()
        if cur_box is None:
            cur_box, cur_dir, cur_first = list(b), d, i
            size = _size_of(acc, i, p1 - p0, d in (90, 270))
            cur_chars = [c]
        else:
            if pending_space:
                cur_chars.append(" ")
            cur_chars.append(c)
            cur_box = _union((cur_box, b))
        pending_space = False
        prev_a1 = a1 if prev_a1 is None else max(prev_a1, a1)
    flush()
    return frags


def extract_lines(page, textpage, raw, ctypes, frame: PageFrame | None = None) -> tuple[list[Line], str]:
    """Visual lines of a page in reading order, and the unit used ("rects" or "chars")."""
    frame = frame or page_frame(page)
    text = page_text(textpage, raw)
    n = len(text)
    if not n:
        return [], "none"
    acc = _TextAccess(textpage, raw, ctypes)
    solid = n - sum(text.count(c) for c in " \r\n\t")
    total_rects = acc.count_rects(0, n)
    per_glyph = solid >= 12 and total_rects >= 0.6 * solid
    unit = "chars" if per_glyph else "rects"
    rotation = frame.rotation
    frags: list[_Frag] = []
    for m in re.finditer(r"[^\r\n]+", text):
        s, e = m.start(), m.end()
        segment = m.group()
        head = _SOLID.search(segment)
        if head is None:
            continue
        first = s + head.start()
        a_first = acc.angle(first)
        # Per-glyph pages check the angle at both ends; elsewhere a change of angle
        # inside a PDFium line shows as a change of row among its rects.
        mixed = False
        if per_glyph:
            last = s + len(segment.rstrip()) - 1
            mixed = last != first and abs(a_first - acc.angle(last)) > 0.05
        got = None
        if _RTL.search(segment) and _is_rtl(segment):
            rects = acc.rects(s, e - s)
            if rects:
                d = _quantize(a_first, rotation)
                boxes = [frame.box(*r) for r in rects]
                pe = max(_perp(b, d)[1] - _perp(b, d)[0] for b in boxes)
                got = [_Frag(segment, _union(boxes), d, _size_of(acc, first, pe, d in (90, 270)), first, rtl=True)]
        if got is None and not per_glyph and not mixed:
            rects = acc.rects(s, e - s)
            if rects:
                got = _rect_fragments(acc, frame, text, s, e, first, _quantize(a_first, rotation), rects)
        if got is None:
            got = _char_fragments(acc, frame, text, s, e, rotation, mixed)
        frags.extend(got)
    kept = []
    width, height = frame.width, frame.height
    for f in frags:
        b = f.box
        if b[0] >= 0.0 and b[1] >= 0.0 and b[2] <= width and b[3] <= height:
            if b[2] > b[0] and b[3] > b[1]:
                kept.append(f)
            continue
        if frame.visible_share(b) < CROP_KEEP:
            continue
        f.box = list(frame.clamp(b))
        if f.box[2] <= f.box[0] or f.box[3] <= f.box[1]:
            continue
        kept.append(f)
    lines = merge_fragments(kept)
    return order_lines(lines, frame.width), unit


def merge_fragments(frags: list[_Frag]) -> list[Line]:
    """Fragments of one direction that share a row and sit close along it become one
    line; far-apart fragments in a row (columns, table cells) stay separate lines."""
    lines: list[Line] = []
    by_dir: dict[int, list[_Frag]] = {}
    for f in frags:
        by_dir.setdefault(f.direction, []).append(f)
    for d, group in by_dir.items():
        if d == -1:
            for f in group:
                t = clean_text(f.text)
                if t:
                    lines.append(Line(t, *f.box, direction=-1, size=f.size, first_char=f.first_char))
            continue
        k0, k1 = (0, 2) if d in (90, 270) else (1, 3)
        group.sort(key=lambda f: f.box[k0] + f.box[k1])
        rows: list[list[_Frag]] = []
        c0 = c1 = 0.0
        for f in group:
            p0, p1 = f.box[k0], f.box[k1]
            if rows:
                ov = (p1 if p1 < c1 else c1) - (p0 if p0 > c0 else c0)
                h = p1 - p0 if p1 - p0 < c1 - c0 else c1 - c0
                if ov >= PERP_OVERLAP * h:
                    rows[-1].append(f)
                    continue
            rows.append([f])
            c0, c1 = p0, p1
        for row in rows:
            if len(row) == 1:
                f = row[0]
                t = clean_text(f.text)
                if t:
                    lines.append(Line(t, *f.box, direction=d, size=f.size, first_char=f.first_char))
                continue
            rd = 180 if d == 0 and 2 * sum(f.rtl for f in row) > len(row) else d
            row.sort(key=lambda f: (_along(f.box, rd)[0], f.first_char))
            current = [row[0]]
            reach = _along(row[0].box, rd)[1]
            for f in row[1:]:
                a0, a1 = _along(f.box, rd)
                size = max(f.size, max(c.size for c in current))
                if a0 - reach > GAP_FACTOR * size:
                    lines.extend(_join(current, d, rd))
                    current = [f]
                    reach = a1
                else:
                    current.append(f)
                    reach = max(reach, a1)
            lines.extend(_join(current, d, rd))
    return lines


def _base(box, d: int) -> float:
    """Where the baseline side of a box lies across the reading direction."""
    if d == 180:
        return box[1]
    if d == 90:
        return box[0]
    if d == 270:
        return box[2]
    return box[3]


def _join(frags: list[_Frag], d: int, rd: int) -> list[Line]:
    """Fragments of one row, ordered along it, as one line. A space goes where they
    are apart, overlap (overprinted runs) or sit on another baseline (superscripts);
    a run printed twice at one place (fake bold) is kept once."""
    first = frags[0]
    parts = [first.text.strip()]
    prev = first
    prev_end = _along(first.box, rd)[1]
    for f in frags[1:]:
        a0, a1 = _along(f.box, rd)
        text = f.text.strip()
        size = max(f.size, prev.size)
        if text == prev.text.strip() and abs(a0 - _along(prev.box, rd)[0]) < 0.5 * size:
            continue
        gap = a0 - prev_end
        shifted = abs(_base(f.head or f.box, d) - _base(prev.tail or prev.box, d)) > 0.25 * size
        apart = gap > 0.12 * size or gap < -0.3 * size or shifted
        parts.append((" " if apart else "") + text)
        prev_end = max(prev_end, a1)
        prev = f
    text = clean_text("".join(parts))
    if not text:
        return []
    box = _union(f.box for f in frags)
    size = max(f.size for f in frags)
    return [Line(text, *box, direction=d, size=size, first_char=min(f.first_char for f in frags))]


# --------------------------------------------------------------------------- order


def column_gutters(lines: Sequence[Line], page_width: float) -> list[float]:
    """x positions of column gutters: strips crossed by few lines (titles, captions and
    page numbers may span them), at least 0.8 font sizes wide, with two or more
    column-sized lines (15% of the page width) entirely on each side. Ragged tables and
    tables of contents have no such line on their narrow side, so they stay in rows."""
    if len(lines) < 4:
        return []
    left = min(ln.x0 for ln in lines)
    right = max(ln.x1 for ln in lines)
    step = 2.0
    n = int((right - left) / step) + 2
    counts = [0] * (n + 1)
    for ln in lines:
        counts[int((ln.x0 - left) / step)] += 1
        counts[int((ln.x1 - left) / step) + 1] -= 1
    running = 0
    for i in range(n + 1):
        running += counts[i]
        counts[i] = running
    allowed = max(3, len(lines) // 8)
    sizes = sorted(ln.size for ln in lines)
    need = max(1, int(0.8 * sizes[len(sizes) // 2] / step))
    min_width = 0.15 * page_width
    wide = [ln for ln in lines if ln.x1 - ln.x0 >= min_width]
    gutters: list[float] = []
    run_start = None
    for i in range(n + 1):
        low = i < n and counts[i] <= allowed
        if low:
            if run_start is None:
                run_start = i
            continue
        if run_start is not None and i - run_start >= need:
            # the emptiest point of the strip, rightmost among ties
            best = min(range(run_start, i), key=lambda k: (counts[k], -abs(k - (run_start + i) / 2)))
            x = left + (best + 0.5) * step
            if sum(1 for ln in wide if ln.x1 <= x) >= 2 and sum(1 for ln in wide if ln.x0 >= x) >= 2:
                gutters.append(x)
        run_start = None
    return gutters


def order_lines(lines: list[Line], page_width: float) -> list[Line]:
    """Reading order. With column gutters, lines crossing a gutter (titles, full-width
    captions) separate sections; each section is read column by column, each column
    top to bottom. Without gutters: rows top to bottom, left to right in a row.
    Each (section, column) run gets its own ``block`` number."""
    if not lines:
        return lines
    out: list[Line] = []
    counter = [0]
    gutters = column_gutters(lines, page_width)
    if not gutters:
        _leaf(lines, out, counter)
        return out
    section: list[Line] = []
    for ln in sorted(lines, key=lambda ln: (ln.y0, ln.x0)):
        if any(ln.x0 < g < ln.x1 for g in gutters):
            _section(section, gutters, out, counter)
            section = []
            _leaf([ln], out, counter)
        else:
            section.append(ln)
    _section(section, gutters, out, counter)
    return out


def _section(lines: list[Line], gutters: list[float], out: list[Line], counter: list[int]) -> None:
    if not lines:
        return
    edges = [-math.inf, *gutters, math.inf]
    cols: list[list[Line]] = [[] for _ in range(len(edges) - 1)]
    for ln in lines:
        k = 0
        while ln.cx > edges[k + 1]:
            k += 1
        cols[k].append(ln)
    for col in cols:
        if col:
            _leaf(col, out, counter)


def _leaf(lines: list[Line], out: list[Line], counter: list[int]) -> None:
    """Lines with no gutter among them: rows top to bottom, left to right in a row."""
    items = sorted(lines, key=lambda ln: (ln.y0, ln.x0))
    rows: list[list[Line]] = []
    for ln in items:
        if rows:
            r = rows[-1][0]
            if _overlap(ln.y0, ln.y1, r.y0, r.y1) >= 0.5 * min(ln.y1 - ln.y0, r.y1 - r.y0):
                rows[-1].append(ln)
                continue
        rows.append([ln])
    block = counter[0]
    counter[0] += 1
    for row in rows:
        for ln in sorted(row, key=lambda ln: ln.x0):
            ln.block = block
            out.append(ln)


# --------------------------------------------------------------------------- paragraphs

_BULLET = re.compile(r"^(?:[\u2022\u25e6\u25aa\u25cf\u2023\u2043\u2013\u2014*\-]\s|\(?\d{1,3}[.)]\s|\(?[a-zA-Z][.)]\s)")


@dataclass
class Paragraph:
    lines: list[Line]
    role: str = "paragraph"
    text: str = ""

    @property
    def box(self) -> list:
        return _union(ln.box for ln in self.lines)


def join_lines(lines: Sequence[Line]) -> str:
    """Lines of a paragraph as text; a hyphen at a line end before a lowercase letter
    joins the word (``continu-`` + ``ation`` reads ``continuation``)."""
    out = ""
    for ln in lines:
        t = ln.text
        if not out:
            out = t
        elif len(out) > 1 and out[-1] == "-" and out[-2].isalpha() and t[:1].islower():
            out = out[:-1] + t
        else:
            out = out + " " + t
    return out


def running_lines(pages_lines: Sequence[Sequence[Line]], heights: Sequence[float]) -> set[tuple[int, int]]:
    """(page index, line index) of running headers/footers: lines near the top or bottom
    edge whose text (digits ignored) recurs on at least two other pages."""
    if len(pages_lines) < 3:
        return set()
    keyed: dict[str, list[tuple[int, int]]] = {}
    for p, (lines, h) in enumerate(zip(pages_lines, heights)):
        for i, ln in enumerate(lines):
            if ln.y1 <= 0.1 * h or ln.y0 >= 0.9 * h:
                key = re.sub(r"\d+", "#", ln.text.lower())
                keyed.setdefault(key, []).append((p, i))
    found = set()
    for hits in keyed.values():
        if len({p for p, _ in hits}) >= 3:
            found.update(hits)
    return found


def paragraphs(lines: Sequence[Line], height: float, running: set[int] = frozenset()) -> list[Paragraph]:
    """Lines (in reading order) grouped into paragraphs: one block, horizontal, close
    below each other, same size, not indented, not a bullet; headers/footers alone."""
    out: list[Paragraph] = []
    pitches: dict[int, list[float]] = {}
    for a, b in zip(lines, lines[1:]):
        if a.block == b.block and a.direction == b.direction == 0:
            pitch = b.y1 - a.y1
            if 0 < pitch < 2.5 * max(a.size, b.size):
                pitches.setdefault(a.block, []).append(pitch)
    median_pitch = {k: statistics.median(v) for k, v in pitches.items()}
    sizes = [ln.size for ln in lines if ln.direction == 0]
    body_size = statistics.median(sizes) if sizes else 0.0
    current: Paragraph | None = None
    for i, ln in enumerate(lines):
        role = "page_header" if i in running and ln.cy < height / 2 else ("page_footer" if i in running else None)
        if current is not None and role is None and current.role == "paragraph" and _continues(current, ln, median_pitch):
            current.lines.append(ln)
            continue
        current = Paragraph([ln], role or "paragraph")
        out.append(current)
    for p in out:
        p.text = join_lines(p.lines)
        if p.role == "paragraph" and body_size and len(p.lines) <= 3 and p.lines[0].size > 1.2 * body_size:
            p.role = "heading"
    return out


def _continues(par: Paragraph, ln: Line, median_pitch: dict[int, float]) -> bool:
    prev = par.lines[-1]
    if ln.block != prev.block or ln.direction != 0 or prev.direction != 0:
        return False
    size = max(prev.size, ln.size)
    if max(prev.size, ln.size) > 1.25 * min(prev.size, ln.size):
        return False
    if ln.y0 < prev.y0 + 0.3 * size:
        return False  # not below: same row
    if _overlap(ln.x0, ln.x1, prev.x0, prev.x1) <= 0:
        return False
    pitch = ln.y1 - prev.y1
    ref = median_pitch.get(ln.block)
    limit = 1.4 * ref if ref else 1.8 * size
    if pitch > min(limit, 2.2 * size) and pitch > 1.05 * size:
        return False
    if _BULLET.match(ln.text):
        return False
    first = par.lines[0]
    indented = ln.x0 - prev.x0 > 0.8 * size
    if indented and not (len(par.lines) == 1 and _BULLET.match(first.text)):
        return False
    return True


# --------------------------------------------------------------------------- rules & tables

RULE_THICKNESS = 2.5
SNAP = 2.0
MIN_RULE = 4.0


@dataclass
class Rule:
    horizontal: bool
    pos: float  # y for horizontal, x for vertical (display points)
    a: float  # start along the rule
    b: float  # end along the rule


def _matmul(m1, m2):
    """Compose affine matrices (a, b, c, d, e, f): apply m1 then m2."""
    a1, b1, c1, d1, e1, f1 = m1
    a2, b2, c2, d2, e2, f2 = m2
    return (
        a1 * a2 + b1 * c2,
        a1 * b2 + b1 * d2,
        c1 * a2 + d1 * c2,
        c1 * b2 + d1 * d2,
        e1 * a2 + f1 * c2 + e2,
        e1 * b2 + f1 * d2 + f2,
    )


def _apply(m, x, y):
    return (m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5])


def page_rules(page, frame: PageFrame, raw, ctypes, max_objects: int = 20000, max_segments: int = 64) -> list[Rule]:
    """Horizontal and vertical rules drawn on the page (thin paths, and the straight
    edges of stroked paths), including those inside form XObjects, in display space."""
    rules: list[Rule] = []
    fl, fb, fr, ft = (ctypes.c_float() for _ in range(4))
    refs = tuple(ctypes.byref(v) for v in (fl, fb, fr, ft))
    fill, stroke = ctypes.c_int(), ctypes.c_int()
    px, py = ctypes.c_float(), ctypes.c_float()
    matrix = raw.FS_MATRIX()
    seen = [0]
    # The per-object calls go through unchecked functions (see _fast_function); the
    # rarer per-segment calls through pypdfium2's checked ones, which want typed handles.
    get_object = _fast_function(raw, ctypes, "FPDFPage_GetObject", ctypes.c_void_p)
    get_type = _fast_function(raw, ctypes, "FPDFPageObj_GetType", ctypes.c_int)
    get_bounds = _fast_function(raw, ctypes, "FPDFPageObj_GetBounds", ctypes.c_int)
    form_count = _fast_function(raw, ctypes, "FPDFFormObj_CountObjects", ctypes.c_int)
    form_object = _fast_function(raw, ctypes, "FPDFFormObj_GetObject", ctypes.c_void_p)
    fast = get_object is not raw.FPDFPage_GetObject
    page_handle = ctypes.c_void_p(ctypes.cast(page.raw, ctypes.c_void_p).value) if fast else page.raw
    PATH, FORM = raw.FPDF_PAGEOBJ_PATH, raw.FPDF_PAGEOBJ_FORM
    identity = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)

    def handle(h):
        return ctypes.c_void_p(h) if fast else h

    def typed(obj):
        return ctypes.cast(obj, raw.FPDF_PAGEOBJECT) if fast else obj

    def add_box(x0, y0, x1, y1):
        w, h = x1 - x0, y1 - y0
        if h <= RULE_THICKNESS and w >= MIN_RULE:
            rules.append(Rule(True, (y0 + y1) / 2, x0, x1))
        elif w <= RULE_THICKNESS and h >= MIN_RULE:
            rules.append(Rule(False, (x0 + x1) / 2, y0, y1))

    def visit(obj, parent_m):
        seen[0] += 1
        if seen[0] > max_objects:
            return
        kind = get_type(obj)
        if kind == FORM:
            raw.FPDFPageObj_GetMatrix(typed(obj), matrix)
            m = _matmul((matrix.a, matrix.b, matrix.c, matrix.d, matrix.e, matrix.f), parent_m)
            for k in range(form_count(obj)):
                child = form_object(obj, k)
                if child:
                    visit(handle(child), m)
            return
        if kind != PATH or not get_bounds(obj, *refs):
            return
        if parent_m is identity:
            x0, y0, x1, y1 = frame.box(fl.value, fb.value, fr.value, ft.value)
        else:
            corners = [
                frame.point(*_apply(parent_m, x, y))
                for x, y in ((fl.value, fb.value), (fr.value, ft.value), (fl.value, ft.value), (fr.value, fb.value))
            ]
            x0, x1 = min(p[0] for p in corners), max(p[0] for p in corners)
            y0, y1 = min(p[1] for p in corners), max(p[1] for p in corners)
        if (y1 - y0) <= RULE_THICKNESS or (x1 - x0) <= RULE_THICKNESS:
            add_box(x0, y0, x1, y1)
            return
        path = typed(obj)
        if not raw.FPDFPath_GetDrawMode(path, ctypes.byref(fill), ctypes.byref(stroke)) or not stroke.value:
            return
        n = raw.FPDFPath_CountSegments(path)
        if n <= 1 or n > max_segments:
            return
        raw.FPDFPageObj_GetMatrix(path, matrix)
        m = _matmul((matrix.a, matrix.b, matrix.c, matrix.d, matrix.e, matrix.f), parent_m)
        start = prev = None
        for k in range(n):
            seg = raw.FPDFPath_GetPathSegment(path, k)
            if not seg or not raw.FPDFPathSegment_GetPoint(seg, ctypes.byref(px), ctypes.byref(py)):
                continue
            point = frame.point(*_apply(m, px.value, py.value))
            kind_s = raw.FPDFPathSegment_GetType(seg)
            if kind_s == raw.FPDF_SEGMENT_MOVETO or prev is None:
                start = prev = point
                continue
            if kind_s == raw.FPDF_SEGMENT_LINETO:
                _segment(rules, prev, point)
            prev = point
            if raw.FPDFPathSegment_GetClose(seg) and start is not None:
                _segment(rules, prev, start)
                prev = start

    count = raw.FPDFPage_CountObjects(page.raw)
    for i in range(count):
        obj = get_object(page_handle, i)
        if obj:
            visit(handle(obj), identity)
        if seen[0] > max_objects:
            break
    return rules


def _segment(rules: list[Rule], p, q) -> None:
    (x0, y0), (x1, y1) = p, q
    if abs(y1 - y0) <= 0.5 and abs(x1 - x0) >= MIN_RULE:
        rules.append(Rule(True, (y0 + y1) / 2, min(x0, x1), max(x0, x1)))
    elif abs(x1 - x0) <= 0.5 and abs(y1 - y0) >= MIN_RULE:
        rules.append(Rule(False, (x0 + x1) / 2, min(y0, y1), max(y0, y1)))


def _cluster(values: Iterable[float], tol: float) -> list[float]:
    out: list[list[float]] = []
    for v in sorted(values):
        if out and v - out[-1][-1] <= tol:
            out[-1].append(v)
        else:
            out.append([v])
    return [sum(c) / len(c) for c in out]


@dataclass
class GridCell:
    row: int
    col: int
    row_span: int
    col_span: int
    box: tuple[float, float, float, float]
    text: str = ""


@dataclass
class Grid:
    xs: list[float]
    ys: list[float]
    cells: list[GridCell] = field(default_factory=list)
    _index: dict | None = field(default=None, repr=False)

    @property
    def box(self) -> tuple[float, float, float, float]:
        return (self.xs[0], self.ys[0], self.xs[-1], self.ys[-1])

    @property
    def rows(self) -> int:
        return len(self.ys) - 1

    @property
    def cols(self) -> int:
        return len(self.xs) - 1

    def cell_at(self, x: float, y: float) -> GridCell | None:
        """The (possibly merged) cell holding the point, found by bisection."""
        if not (self.xs[0] <= x <= self.xs[-1] and self.ys[0] <= y <= self.ys[-1]):
            return None
        if self._index is None:
            self._index = {}
            for cell in self.cells:
                for r in range(cell.row, cell.row + cell.row_span):
                    for c in range(cell.col, cell.col + cell.col_span):
                        self._index[(r, c)] = cell
        col = min(max(bisect.bisect_right(self.xs, x) - 1, 0), self.cols - 1)
        row = min(max(bisect.bisect_right(self.ys, y) - 1, 0), self.rows - 1)
        return self._index.get((row, col))


def _covered(rules: list[Rule], pos: float, a: float, b: float) -> bool:
    """Whether rules at ``pos`` cover most of the span [a, b]."""
    spans = sorted((max(r.a, a), min(r.b, b)) for r in rules if abs(r.pos - pos) <= SNAP and r.b > a and r.a < b)
    total, reach = 0.0, a
    for s, e in spans:
        s = max(s, reach)
        if e > s:
            total += e - s
            reach = e
    return total >= 0.6 * (b - a)


def find_grids(rules: list[Rule]) -> list[Grid]:
    """Ruled tables: connected horizontal and vertical rules forming at least 2 x 2
    cells; a missing inner rule segment merges its two cells (a span)."""
    hs = [r for r in rules if r.horizontal]
    vs = [r for r in rules if not r.horizontal]
    if not hs or not vs or len(hs) * len(vs) > 250000:
        return []
    parent = list(range(len(hs) + len(vs)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, h in enumerate(hs):
        for j, v in enumerate(vs):
            if h.a - SNAP <= v.pos <= h.b + SNAP and v.a - SNAP <= h.pos <= v.b + SNAP:
                a, b = find(i), find(len(hs) + j)
                if a != b:
                    parent[a] = b
    comps: dict[int, tuple[list[Rule], list[Rule]]] = {}
    for i, h in enumerate(hs):
        comps.setdefault(find(i), ([], []))[0].append(h)
    for j, v in enumerate(vs):
        comps.setdefault(find(len(hs) + j), ([], []))[1].append(v)
    grids = []
    for ch, cv in comps.values():
        if not ch or not cv:
            continue
        xs = _thin(_cluster([v.pos for v in cv] + [h.a for h in ch] + [h.b for h in ch], SNAP))
        ys = _thin(_cluster([h.pos for h in ch] + [v.a for v in cv] + [v.b for v in cv], SNAP))
        if len(xs) < 3 or len(ys) < 3:
            continue
        grid = Grid(xs, ys)
        grid.cells = _cells(grid, ch, cv)
        if grid.cells:
            grids.append(grid)
    return grids


def _thin(values: list[float], min_step: float = 3.0) -> list[float]:
    out: list[float] = []
    for v in values:
        if not out or v - out[-1] >= min_step:
            out.append(v)
    return out


def _cells(grid: Grid, hs: list[Rule], vs: list[Rule]) -> list[GridCell]:
    rows, cols = grid.rows, grid.cols
    xs, ys = grid.xs, grid.ys
    owner = {(r, c): (r, c) for r in range(rows) for c in range(cols)}

    def find(k):
        while owner[k] != k:
            owner[k] = owner[owner[k]]
            k = owner[k]
        return k

    def join(a, b):
        ra, rb = find(a), find(b)
        if ra != rb:
            owner[max(ra, rb)] = min(ra, rb)

    for r in range(rows):
        for c in range(cols - 1):
            if not _covered(vs, xs[c + 1], ys[r], ys[r + 1]):
                join((r, c), (r, c + 1))
    for r in range(rows - 1):
        for c in range(cols):
            if not _covered(hs, ys[r + 1], xs[c], xs[c + 1]):
                join((r, c), (r + 1, c))
    changed = True
    while changed:
        changed = False
        groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for k in owner:
            groups.setdefault(find(k), []).append(k)
        for members in groups.values():
            r0 = min(m[0] for m in members)
            r1 = max(m[0] for m in members)
            c0 = min(m[1] for m in members)
            c1 = max(m[1] for m in members)
            if len(members) != (r1 - r0 + 1) * (c1 - c0 + 1):
                for r in range(r0, r1 + 1):
                    for c in range(c0, c1 + 1):
                        if find((r, c)) != find(members[0]):
                            join((r, c), members[0])
                            changed = True
    groups = {}
    for k in owner:
        groups.setdefault(find(k), []).append(k)
    if len(groups) < 2:
        return []
    cells = []
    for members in groups.values():
        r0 = min(m[0] for m in members)
        r1 = max(m[0] for m in members)
        c0 = min(m[1] for m in members)
        c1 = max(m[1] for m in members)
        cells.append(GridCell(r0, c0, r1 - r0 + 1, c1 - c0 + 1, (xs[c0], ys[r0], xs[c1 + 1], ys[r1 + 1])))
    cells.sort(key=lambda c: (c.row, c.col))
    return cells


def fill_grids(grids: list[Grid], textpage, frame: PageFrame, raw, ctypes, text: str) -> None:
    """Put each character in the grid cell holding its centre (never in two cells)."""
    if not grids:
        return
    acc = _TextAccess(textpage, raw, ctypes)
    boxes = [g.box for g in grids]
    per_cell: dict[int, list[tuple[int, str]]] = {}
    cell_ids: dict[int, GridCell] = {}
    for i, c in enumerate(text):
        if c.isspace():
            continue
        ub = acc.charbox(i)
        if ub is None or ub[2] - ub[0] <= 0 or ub[3] - ub[1] <= 0:
            continue
        b = frame.box(*ub)
        x, y = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
        for g, gb in zip(grids, boxes):
            if gb[0] <= x <= gb[2] and gb[1] <= y <= gb[3]:
                cell = g.cell_at(x, y)
                if cell is not None:
                    per_cell.setdefault(id(cell), []).append((i, c))
                    cell_ids[id(cell)] = cell
                break
    for key, chars in per_cell.items():
        parts = []
        prev = None
        for i, c in chars:
            if prev is not None and i != prev + 1:
                parts.append(" ")
            parts.append(c)
            prev = i
        cell_ids[key].text = clean_text("".join(parts))


def usable_grid(grid: Grid) -> bool:
    """Whether a grid is a table rather than a drawing: text in at least two cells and a
    quarter of them (chart grids and frames have none), most grid positions not merged
    away, and cells holding words rather than the one-letter labels of a figure."""
    texts = [c.text.replace(" ", "") for c in grid.cells if c.text]
    if len(texts) < 2 or len(texts) < 0.25 * len(grid.cells):
        return False
    if len(grid.cells) < 0.5 * grid.rows * grid.cols:
        return False
    return sum(len(t) for t in texts) / len(texts) >= 3.0
