"""Lines in reading order grouped into paragraphs; running headers and footers found
across pages (shared by pdf@2, pdf@3 and lines@2); printed page numbers anywhere on a
page (pdf@4)."""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ingest_pipeline.layout.lines import Line, overlap, union

_BULLET = re.compile(
    r"^(?:[\u2022\u25e6\u25aa\u25cf\u2023\u2043\u2013\u2014*\-]\s|\(?\d{1,3}[.)]\s|\(?[a-zA-Z][.)]\s)"
)


@dataclass
class Paragraph:
    lines: list[Line]
    role: str = "paragraph"
    text: str = ""

    @property
    def box(self) -> list:
        return union(ln.box for ln in self.lines)


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


def running_lines(
    pages_lines: Sequence[Sequence[Line]], heights: Sequence[float], widths: Sequence[float] | None = None
) -> set[tuple[int, int]]:
    """(page index, line index) of running headers/footers: lines near the top or bottom
    edge whose text (digits ignored) recurs on at least two other pages. With ``widths``,
    also the lines in a side margin (a print stamp or a filing code run up the edge,
    upright or turned) whose text recurs there on most pages, three at least: a side
    margin holds less that belongs to the page's text, so it takes more pages to say so."""
    if len(pages_lines) < 3:
        return set()
    keyed: dict[str, list[tuple[int, int]]] = {}
    sides: dict[str, list[tuple[int, int]]] = {}
    for p, (lines, h) in enumerate(zip(pages_lines, heights)):
        w = widths[p] if widths is not None else None
        for i, ln in enumerate(lines):
            key = re.sub(r"\d+", "#", ln.text.lower())
            if ln.y1 <= 0.1 * h or ln.y0 >= 0.9 * h:
                keyed.setdefault(key, []).append((p, i))
            elif w and (ln.x1 <= 0.1 * w or ln.x0 >= 0.9 * w):
                sides.setdefault(key, []).append((p, i))
    found = set()
    for hits in keyed.values():
        if len({p for p, _ in hits}) >= 3:
            found.update(hits)
    most = max(3, (len(pages_lines) + 1) // 2)
    for hits in sides.values():
        if len({p for p, _ in hits}) >= most:
            found.update(hits)
    return found


_PAGE_NUMBER = re.compile(
    r"(?:page\s+)?([A-Z]{1,2}\s?[-\u2013]\s?)?(\d{1,3})(?:\s+of\s+\d{1,4})?", re.IGNORECASE
)
_ROMAN = re.compile(r"[ivxlc]{1,7}", re.IGNORECASE)
_ROMAN_VALUES = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}


def _printed_number(text: str) -> tuple[str, int] | None:
    """(series, value) of a line that is only a page number: "7", "F-36", "Page 7 of 90",
    "iv"; None for any other line."""
    text = text.strip()
    found = _PAGE_NUMBER.fullmatch(text)
    if found:
        return ((found.group(1) or "").upper().replace(" ", "").replace("\u2013", "-"), int(found.group(2)))
    if _ROMAN.fullmatch(text):
        values = [_ROMAN_VALUES[c] for c in text.lower()]
        # a numeral before a larger one subtracts: "iv" is 4, "xiv" 14
        return "roman", sum(
            -v if i + 1 < len(values) and v < values[i + 1] else v for i, v in enumerate(values)
        )
    return None


def page_number_lines(pages_lines: Sequence[Sequence[Line]], numbers: Sequence[int]) -> set[tuple[int, int]]:
    """(page index, line index) of printed page numbers that ``running_lines`` misses
    because they sit outside the page margins (right after a short page's last paragraph,
    say): a page's lowest or highest upright line that is only a number, where at least
    three pages print numbers of the same series at the same offset from their page
    number (``numbers``), so a figure's axis label or a lone table value does not count."""
    series: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for p, (lines, number) in enumerate(zip(pages_lines, numbers)):
        upright = [(i, ln) for i, ln in enumerate(lines) if ln.direction == 0]
        if not upright:
            continue
        for i in {min(upright, key=lambda t: t[1].y0)[0], max(upright, key=lambda t: t[1].y1)[0]}:
            printed = _printed_number(lines[i].text)
            if printed is not None:
                series.setdefault((printed[0], printed[1] - number), []).append((p, i))
    return {hit for hits in series.values() if len({p for p, _ in hits}) >= 3 for hit in hits}


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
        role = (
            "page_header"
            if i in running and ln.cy < height / 2
            else ("page_footer" if i in running else None)
        )
        if (
            current is not None
            and role is None
            and current.role == "paragraph"
            and _continues(current, ln, median_pitch)
        ):
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
    if overlap(ln.x0, ln.x1, prev.x0, prev.x1) <= 0:
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
