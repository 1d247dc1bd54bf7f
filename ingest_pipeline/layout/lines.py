"""A located line of text in display space, and how text fragments merge into lines
(shared by the PDF and OCR chunkers; nothing here touches PDFium)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

GAP_FACTOR = 1.0  # a gap wider than this many font sizes splits a line
PERP_OVERLAP = 0.4  # share of the smaller height two pieces must share to sit in one row
CROP_KEEP = 0.5  # share of a fragment's area that must lie inside the crop box
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SPACES = re.compile(r"\s+")
SOLID = re.compile(r"\S")


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
class Fragment:
    text: str
    box: list  # [x0, y0, x1, y1]
    direction: int
    size: float
    first_char: int
    rtl: bool = False
    head: tuple | None = None  # box of the first rect (for baseline shifts at joins)
    tail: tuple | None = None  # box of the last rect


RTL = re.compile(r"[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufeff]")
_LTR = re.compile(r"[A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff]")


def is_rtl(text: str) -> bool:
    """Whether a line is mostly right-to-left script (its characters then advance
    leftward, and PDFium's logical order is kept as it is)."""
    rtl = len(RTL.findall(text))
    return rtl > 0 and rtl >= len(_LTR.findall(text))


def quantize(angle_rad: float, rotation: int) -> int:
    if angle_rad == 0.0:
        return rotation
    deg = (math.degrees(angle_rad) + rotation) % 360.0
    for q in (0, 90, 180, 270, 360):
        if abs(deg - q) <= 8.0:
            return q % 360
    return -1


def along(box, d: int) -> tuple[float, float]:
    if d == 0 or d == -1:
        return box[0], box[2]
    if d == 180:
        return -box[2], -box[0]
    if d == 90:
        return box[1], box[3]
    return -box[3], -box[1]


def perp(box, d: int) -> tuple[float, float]:
    if d in (90, 270):
        return box[0], box[2]
    return box[1], box[3]


def overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return min(a1, b1) - max(a0, b0)


def union(boxes: Iterable[Sequence[float]]) -> list:
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


def merge_fragments(frags: list[Fragment]) -> list[Line]:
    """Fragments of one direction that share a row and sit close along it become one
    line; far-apart fragments in a row (columns, table cells) stay separate lines."""
    lines: list[Line] = []
    by_dir: dict[int, list[Fragment]] = {}
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
        rows: list[list[Fragment]] = []
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
            row.sort(key=lambda f: (along(f.box, rd)[0], f.first_char))
            current = [row[0]]
            reach = along(row[0].box, rd)[1]
            for f in row[1:]:
                a0, a1 = along(f.box, rd)
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


def _join(frags: list[Fragment], d: int, rd: int) -> list[Line]:
    """Fragments of one row, ordered along it, as one line. A space goes where they
    are apart, overlap (overprinted runs) or sit on another baseline (superscripts);
    a run printed twice at one place (fake bold) is kept once."""
    first = frags[0]
    parts = [first.text.strip()]
    prev = first
    prev_end = along(first.box, rd)[1]
    for f in frags[1:]:
        a0, a1 = along(f.box, rd)
        text = f.text.strip()
        size = max(f.size, prev.size)
        if text == prev.text.strip() and abs(a0 - along(prev.box, rd)[0]) < 0.5 * size:
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
    box = union(f.box for f in frags)
    size = max(f.size for f in frags)
    return [Line(text, *box, direction=d, size=size, first_char=min(f.first_char for f in frags))]
