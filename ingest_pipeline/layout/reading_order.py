"""Reading order of a page's lines: column gutters, then rows within each column."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ingest_pipeline.layout.lines import Line, overlap


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
            if overlap(ln.y0, ln.y1, r.y0, r.y1) >= 0.5 * min(ln.y1 - ln.y0, r.y1 - r.y0):
                rows[-1].append(ln)
                continue
        rows.append([ln])
    block = counter[0]
    counter[0] += 1
    for row in rows:
        for ln in sorted(row, key=lambda ln: ln.x0):
            ln.block = block
            out.append(ln)
