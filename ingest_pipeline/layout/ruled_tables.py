"""Ruled tables of a PDF page: rules from its path objects, the grids they draw, and the
characters that fall in each cell (pdf@3). Callers hold ``PDFIUM_LOCK``."""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field

from ingest_pipeline.layout.frames import PageFrame
from ingest_pipeline.layout.lines import clean_text
from ingest_pipeline.layout.pdfium_text import TextAccess, fast_function

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


def page_rules(
    page, frame: PageFrame, raw, ctypes, max_objects: int = 20000, max_segments: int = 64
) -> list[Rule]:
    """Horizontal and vertical rules drawn on the page (thin paths, and the straight
    edges of stroked paths), including those inside form XObjects, in display space."""
    rules: list[Rule] = []
    fl, fb, fr, ft = (ctypes.c_float() for _ in range(4))
    refs = tuple(ctypes.byref(v) for v in (fl, fb, fr, ft))
    fill, stroke = ctypes.c_int(), ctypes.c_int()
    px, py = ctypes.c_float(), ctypes.c_float()
    matrix = raw.FS_MATRIX()
    seen = [0]
    # The per-object calls go through unchecked functions (see fast_function); the
    # rarer per-segment calls through pypdfium2's checked ones, which want typed handles.
    handle_type = _handle_type(ctypes)
    get_object = fast_function(raw, ctypes, "FPDFPage_GetObject", handle_type)
    get_type = fast_function(raw, ctypes, "FPDFPageObj_GetType", ctypes.c_int)
    get_bounds = fast_function(raw, ctypes, "FPDFPageObj_GetBounds", ctypes.c_int)
    form_count = fast_function(raw, ctypes, "FPDFFormObj_CountObjects", ctypes.c_int)
    form_object = fast_function(raw, ctypes, "FPDFFormObj_GetObject", handle_type)
    fast = get_object is not raw.FPDFPage_GetObject
    page_handle = ctypes.c_void_p(ctypes.cast(page.raw, ctypes.c_void_p).value) if fast else page.raw
    PATH, FORM = raw.FPDF_PAGEOBJ_PATH, raw.FPDF_PAGEOBJ_FORM
    identity = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)

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
                    visit(child, m)
            return
        if kind != PATH or not get_bounds(obj, *refs):
            return
        if parent_m is identity:
            x0, y0, x1, y1 = frame.box(fl.value, fb.value, fr.value, ft.value)
        else:
            corners = [
                frame.point(*_apply(parent_m, x, y))
                for x, y in (
                    (fl.value, fb.value),
                    (fr.value, ft.value),
                    (fl.value, ft.value),
                    (fr.value, fb.value),
                )
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
            # Most of a page's objects are text: counted here, not visited.
            kind = get_type(obj)
            if kind == PATH or kind == FORM:
                visit(obj, identity)
            else:
                seen[0] += 1
        if seen[0] > max_objects:
            break
    return rules


@functools.lru_cache(maxsize=1)
def _handle_type(ctypes):
    """A pointer type for PDFium's object handles: a function whose result type is a
    subclass of ``c_void_p`` hands back instances of it (not ints), which the unchecked
    calls take as they are, with no wrapping per object."""
    return type("PdfiumHandle", (ctypes.c_void_p,), {})


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
class RuledCell:
    row: int
    col: int
    row_span: int
    col_span: int
    box: tuple[float, float, float, float]
    text: str = ""


@dataclass
class RuledTable:
    xs: list[float]
    ys: list[float]
    cells: list[RuledCell] = field(default_factory=list)
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

    def cell_at(self, x: float, y: float) -> RuledCell | None:
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
    spans = sorted(
        (max(r.a, a), min(r.b, b)) for r in rules if abs(r.pos - pos) <= SNAP and r.b > a and r.a < b
    )
    total, reach = 0.0, a
    for s, e in spans:
        s = max(s, reach)
        if e > s:
            total += e - s
            reach = e
    return total >= 0.6 * (b - a)


def find_ruled_tables(rules: list[Rule]) -> list[RuledTable]:
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
        grid = RuledTable(xs, ys)
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


def _cells(grid: RuledTable, hs: list[Rule], vs: list[Rule]) -> list[RuledCell]:
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
        cells.append(RuledCell(r0, c0, r1 - r0 + 1, c1 - c0 + 1, (xs[c0], ys[r0], xs[c1 + 1], ys[r1 + 1])))
    cells.sort(key=lambda c: (c.row, c.col))
    return cells


def fill_ruled_tables(grids: list[RuledTable], textpage, frame: PageFrame, raw, ctypes, text: str) -> None:
    """Put each character in the grid cell holding its centre (never in two cells)."""
    if not grids:
        return
    acc = TextAccess(textpage, raw, ctypes)
    boxes = [g.box for g in grids]
    per_cell: dict[int, list[tuple[int, str]]] = {}
    cell_ids: dict[int, RuledCell] = {}
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


def usable_ruled_table(grid: RuledTable) -> bool:
    """Whether a grid is a table rather than a drawing: text in at least two cells and a
    quarter of them (chart grids and frames have none), most grid positions not merged
    away, and cells holding words rather than the one-letter labels of a figure."""
    texts = [c.text.replace(" ", "") for c in grid.cells if c.text]
    if len(texts) < 2 or len(texts) < 0.25 * len(grid.cells):
        return False
    if len(grid.cells) < 0.5 * grid.rows * grid.cols:
        return False
    return sum(len(t) for t in texts) / len(texts) >= 3.0
