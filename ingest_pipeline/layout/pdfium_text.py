"""A page's lines from PDFium's text page.

The unit of text is chosen per page for speed: PDFium's text rects (one per run of a
text object) on ordinary pages, its characters on pages whose generator draws every
glyph as its own run. A PDFium line whose rects do not sit in one row with small gaps
(fused columns, hyphenation joins, mixed angles) is rebuilt from its characters.

Callers hold ``PDFIUM_LOCK`` around every function that takes PDFium objects.
"""

from __future__ import annotations

import re

from ingest_pipeline.layout.frames import PageFrame, page_frame
from ingest_pipeline.layout.lines import (
    CROP_KEEP,
    GAP_FACTOR,
    PERP_OVERLAP,
    RTL,
    SOLID,
    Fragment,
    Line,
    along,
    is_rtl,
    merge_fragments,
    overlap,
    perp,
    quantize,
    union,
)
from ingest_pipeline.layout.reading_order import order_lines

_FAST: dict[tuple[str, object], object] = {}


def fast_function(raw, ctypes, name: str, restype):
    """A PDFium function without ctypes argument conversion (several times cheaper per call,
    which matters at one call per rect); the checked binding when that is unavailable.
    Kept per name and result type: each is a function object of its own, so asking for
    another result type never changes what an earlier caller gets back."""
    fn = _FAST.get((name, restype))
    if fn is None:
        try:
            from pypdfium2_raw import bindings

            fn = bindings._libs["pdfium"][name]  # a fresh function object: no argtypes
            fn.restype = restype
        except Exception:  # noqa: BLE001 - fall back to pypdfium2's checked binding
            fn = getattr(raw, name)
        _FAST[name, restype] = fn
    return fn


class TextAccess:
    """Allocation-free wrappers over the PDFium text calls made per line or character."""

    def __init__(self, textpage, raw, ctypes) -> None:
        self.raw = raw
        self.tp = ctypes.c_void_p(ctypes.cast(textpage.raw, ctypes.c_void_p).value)
        self.l, self.b, self.r, self.t = (ctypes.c_double() for _ in range(4))
        self.refs = tuple(ctypes.byref(v) for v in (self.l, self.b, self.r, self.t))
        self._count_rects = fast_function(raw, ctypes, "FPDFText_CountRects", ctypes.c_int)
        self._get_rect = fast_function(raw, ctypes, "FPDFText_GetRect", ctypes.c_int)
        self._char_box = fast_function(raw, ctypes, "FPDFText_GetCharBox", ctypes.c_int)
        self._angle = fast_function(raw, ctypes, "FPDFText_GetCharAngle", ctypes.c_float)
        self._font_size = fast_function(raw, ctypes, "FPDFText_GetFontSize", ctypes.c_double)
        self._loose_box = fast_function(raw, ctypes, "FPDFText_GetLooseCharBox", ctypes.c_int)
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


def _size_of(acc: TextAccess, index: int, perp_extent: float, vertical: bool = False) -> float:
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
    left, b, r, t = rects[0]
    x0, x1, top, bottom = left, r, t, b
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
        Fragment(
            text[s:e],
            [x0 - cx0, cy1 - top, x1 - cx0, cy1 - bottom],
            0,
            size,
            first,
            head=(fl - cx0, cy1 - ft, fr - cx0, cy1 - fb),
            tail=(ll - cx0, cy1 - lt, lr - cx0, cy1 - lb),
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
            perp_extent = max(perp(b, d)[1] - perp(b, d)[0] for b in boxes)
        size = _size_of(acc, first, perp_extent, d in (90, 270))
    if d == -1 or len(boxes) == 1:
        return [Fragment(text[s:e], union(boxes), d, size, first)]
    gap_limit = GAP_FACTOR * size
    back = 0.5 * size
    breaks = []
    pa0, pa1 = along(boxes[0], d)
    pp0, pp1 = perp(boxes[0], d)
    for j in range(1, len(boxes)):
        b = boxes[j]
        a0, a1 = along(b, d)
        p0, p1 = perp(b, d)
        if (
            a0 < pa1 - back
            or a0 - pa1 > gap_limit
            or overlap(p0, p1, pp0, pp1) < PERP_OVERLAP * min(p1 - p0, pp1 - pp0)
        ):
            breaks.append(j)
            pa1 = a1
        else:
            pa1 = max(a1, pa1)
        pp0, pp1 = p0, p1
    if not breaks:
        return [Fragment(text[s:e], union(boxes), d, size, first)]
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
        piece = text[cuts[k] : cuts[k + 1]]
        if not piece.strip():
            continue
        part = boxes[bounds[k] : bounds[k + 1]]
        if not part:
            continue
        pe = max(perp(b, d)[1] - perp(b, d)[0] for b in part)
        frags.append(Fragment(piece, union(part), d, max(min(size, 2.0 * pe), pe, 1.0), cuts[k]))
    return frags


def _char_fragments(acc, frame, text, s, e, rotation, per_char_angle: bool):
    """Fragments of a PDFium line rebuilt from its characters. One call per character on
    per-glyph pages, so the box arithmetic of ``frame.box``, ``along``, ``perp`` and
    ``union`` is written out here (same operations, same results)."""
    frags: list[Fragment] = []
    cur_chars: list[str] = []
    cur_box: list | None = None
    cur_dir = None
    cur_first = 0
    prev_a1 = None
    pending_space = False
    size = None
    base_angle = None
    d = rotation
    char_box, tp = acc._char_box, acc.tp
    rl, rb, rr, rt = acc.refs
    lv, bv, rv, tv = acc.l, acc.b, acc.r, acc.t
    upright = frame.rotation == 0
    cx0, cy1 = frame.cx0, frame.cy1

    def flush():
        nonlocal cur_chars, cur_box, prev_a1, pending_space, size
        if cur_box is not None and "".join(cur_chars).strip():
            pe = perp(cur_box, cur_dir)
            frags.append(
                Fragment(
                    "".join(cur_chars),
                    list(cur_box),
                    cur_dir,
                    max(size or 0.0, pe[1] - pe[0], 1.0),
                    cur_first,
                )
            )
        cur_chars, cur_box, prev_a1, pending_space, size = [], None, None, False, None

    for i in range(s, e):
        c = text[i]
        if c.isspace():
            pending_space = True
            continue
        if not char_box(tp, i, rl, rr, rb, rt):
            pending_space = True
            continue
        left, bottom, right, top = lv.value, bv.value, rv.value, tv.value
        if right - left <= 0 or top - bottom <= 0:
            pending_space = True  # generated or zero-area: a separator only
            continue
        if upright:
            b0, b1, b2, b3 = left - cx0, cy1 - top, right - cx0, cy1 - bottom
        else:
            b0, b1, b2, b3 = frame.box(left, bottom, right, top)
        if per_char_angle or base_angle is None:
            base_angle = acc.angle(i)
            d = quantize(base_angle, rotation)
        if d == 0 or d == -1:
            a0, a1, p0, p1 = b0, b2, b1, b3
        elif d == 180:
            a0, a1, p0, p1 = -b2, -b0, b1, b3
        elif d == 90:
            a0, a1, p0, p1 = b1, b3, b0, b2
        else:
            a0, a1, p0, p1 = -b3, -b1, b0, b2
        if cur_box is not None:
            if cur_dir == 90 or cur_dir == 270:
                cp0, cp1 = cur_box[0], cur_box[2]
            else:
                cp0, cp1 = cur_box[1], cur_box[3]
            limit = GAP_FACTOR * (size or (cp1 - cp0))
            # min and max written out: this runs once per glyph
            ext, cext, width = p1 - p0, cp1 - cp0, a1 - a0
            if (
                d != cur_dir
                or (
                    (p1 if p1 < cp1 else cp1) - (p0 if p0 > cp0 else cp0)
                    < PERP_OVERLAP * (ext if ext < cext else cext)
                )
                or a0 - prev_a1 > limit
                or a0 < prev_a1 - (limit if limit > width else width) * 1.5
            ):
                flush()
        if cur_box is None:
            cur_box, cur_dir, cur_first = [b0, b1, b2, b3], d, i
            size = _size_of(acc, i, p1 - p0, d in (90, 270))
            cur_chars = [c]
        else:
            if pending_space:
                cur_chars.append(" ")
            cur_chars.append(c)
            if b0 < cur_box[0]:
                cur_box[0] = b0
            if b1 < cur_box[1]:
                cur_box[1] = b1
            if b2 > cur_box[2]:
                cur_box[2] = b2
            if b3 > cur_box[3]:
                cur_box[3] = b3
        pending_space = False
        if prev_a1 is None or a1 > prev_a1:
            prev_a1 = a1
    flush()
    return frags


def extract_lines(page, textpage, raw, ctypes, frame: PageFrame | None = None) -> tuple[list[Line], str]:
    """Visual lines of a page in reading order, and the unit used ("rects" or "chars")."""
    frame = frame or page_frame(page)
    text = page_text(textpage, raw)
    n = len(text)
    if not n:
        return [], "none"
    acc = TextAccess(textpage, raw, ctypes)
    solid = n - sum(text.count(c) for c in " \r\n\t")
    total_rects = acc.count_rects(0, n)
    per_glyph = solid >= 12 and total_rects >= 0.6 * solid
    unit = "chars" if per_glyph else "rects"
    rotation = frame.rotation
    frags: list[Fragment] = []
    for m in re.finditer(r"[^\r\n]+", text):
        s, e = m.start(), m.end()
        segment = m.group()
        head = SOLID.search(segment)
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
        if RTL.search(segment) and is_rtl(segment):
            rects = acc.rects(s, e - s)
            if rects:
                d = quantize(a_first, rotation)
                boxes = [frame.box(*r) for r in rects]
                pe = max(perp(b, d)[1] - perp(b, d)[0] for b in boxes)
                got = [
                    Fragment(
                        segment, union(boxes), d, _size_of(acc, first, pe, d in (90, 270)), first, rtl=True
                    )
                ]
        if got is None and not per_glyph and not mixed:
            rects = acc.rects(s, e - s)
            if rects:
                got = _rect_fragments(acc, frame, text, s, e, first, quantize(a_first, rotation), rects)
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
