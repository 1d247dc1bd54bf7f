"""The sheets of an XLSX/XLSM workbook, read by streaming the sheet XML.

Only cells that hold a value are kept, so a sheet that declares A1:XFD1048576 costs what
its real content costs. Cached values are used; a formula without one falls back to its
text (``=A1+1``). Dates are rendered ISO-style from the cell's number format.

A reader that wants only the page text asks for ``cells=False``: each row becomes its line
as the stream passes it, so no per-cell objects are held. Rows out of order, which no
common writer produces, fall back to reading the sheet again with its cells, so both ways
give the same text.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from ingest_pipeline.office.safety import (
    DEFAULT_LIMITS,
    MalformedPart,
    PackageError,
    PackageLimits,
    attr,
    localname,
    open_package,
    rel_attr,
)

NO_VALUE_MARKER = "#NO-CACHED-VALUE"
_BUILTIN_DATE_FORMATS = (
    frozenset(range(14, 23)) | frozenset(range(27, 37)) | frozenset(range(45, 48)) | frozenset(range(50, 59))
)
_CELL_REF = re.compile(r"^\$?([A-Za-z]{1,3})\$?([0-9]+)$")
_QUOTED = re.compile(r'"[^"]*"|\[[^\]]*\]|\\.')


@dataclass
class SheetData:
    """One sheet's non-empty cells (0-based row, col -> text), merges and hidden marks."""

    name: str
    index: int
    state: str = "visible"
    kind: str = "worksheet"
    cells: dict[tuple[int, int], str] = field(default_factory=dict)
    merges: list[tuple[int, int, int, int]] = field(default_factory=list)
    hidden_rows: set[int] = field(default_factory=set)
    hidden_cols: set[int] = field(default_factory=set)
    declared: str | None = None
    formulas_without_value: int = 0
    tables: list[tuple[str, tuple[int, int, int, int]]] = field(default_factory=list)
    charts: list = field(default_factory=list)
    error: str | None = None  # why the sheet could not be read (its page is failed)
    lines: list[str] | None = None  # the rows' lines, when read without cells

    @property
    def hidden(self) -> bool:
        return self.state in ("hidden", "veryHidden")

    def text(self) -> str:
        """Rows of tab-separated values over the used range (the page text)."""
        if self.lines is not None:
            return "\n".join([*self.lines, *(chart.text() for chart in self.charts)])
        rows: dict[int, dict[int, str]] = {}
        for (r, c), value in self.cells.items():
            rows.setdefault(r, {})[c] = value
        lines = [_row_line(rows[r]) for r in sorted(rows)]
        lines.extend(chart.text() for chart in self.charts)
        return "\n".join(lines)


def _row_line(row: dict[int, str]) -> str:
    return "\t".join(" ".join(row[c].split()) for c in sorted(row))


class _OutOfOrder(Exception):
    """A row of a sheet read without cells came after a later one."""


def column_index(letters: str) -> int:
    """0-based column of ``A``..``XFD``."""
    n = 0
    for ch in letters.upper():
        n = n * 26 + (ord(ch) - 64)
    return n - 1


def parse_ref(ref: str) -> tuple[int, int] | None:
    """0-based (row, col) of an A1 reference."""
    split = 0
    for ch in ref:
        if "A" <= ch <= "Z":
            split += 1
        else:
            break
    if 0 < split <= 3 and ref[split:].isdigit():
        n = 0
        for ch in ref[:split]:
            n = n * 26 + (ord(ch) - 64)
        return int(ref[split:]) - 1, n - 1
    match = _CELL_REF.match(ref.strip())
    if not match:
        return None
    return int(match.group(2)) - 1, column_index(match.group(1))


def parse_range(ref: str) -> tuple[int, int, int, int] | None:
    parts = ref.split(":")
    start = parse_ref(parts[0])
    end = parse_ref(parts[-1])
    if start is None or end is None:
        return None
    return min(start[0], end[0]), min(start[1], end[1]), max(start[0], end[0]), max(start[1], end[1])


def _is_date_code(code: str) -> bool:
    stripped = _QUOTED.sub("", code).lower()
    return any(ch in stripped for ch in "dmyhs") and "general" not in stripped


def _format_number(raw: str, date_style: bool, epoch: dt.datetime) -> str:
    try:
        number = float(raw)
    except ValueError:
        return raw
    if date_style and 0 <= number < 2_958_466:
        moment = epoch + dt.timedelta(days=number)
        moment = moment.replace(microsecond=0)
        if moment.time() == dt.time(0, 0):
            return moment.date().isoformat()
        if number < 1:
            return moment.time().isoformat()
        return moment.isoformat(sep=" ")
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return "%.15g" % number


class _Workbook:
    """Workbook-level facts needed to read sheets: names, shared strings, styles."""

    def __init__(self, package, limits: PackageLimits) -> None:
        self.package = package
        self.limits = limits
        self.part = package.main_part()
        root = package.xml(self.part)
        rels = package.rels(self.part)
        self.epoch = dt.datetime(1899, 12, 30)
        self.sheets: list[tuple[str, str, str, str | None]] = []  # name, state, part, kind
        # Without the workbook's relationships, parts are found by their conventional names
        # (what every writer uses), so a workbook that lost its rels part still reads.
        self.rels_missing = not rels
        for element in root.iter():
            name = localname(element)
            if name == "workbookPr" and (attr(element, "date1904") or "").lower() in ("1", "true"):
                self.epoch = dt.datetime(1904, 1, 1)
            elif name == "sheet":
                rid = rel_attr(element, "id")
                rel = rels.get(rid or "")
                part = rel[1] if rel and not rel[2] else None
                kind = "chartsheet" if rel and "chartsheet" in rel[0].lower() else "worksheet"
                if rel is None:
                    part, kind = self._conventional_sheet(len(self.sheets) + 1, element.get("sheetId"))
                self.sheets.append(
                    (
                        element.get("name") or f"Sheet{len(self.sheets) + 1}",
                        element.get("state") or "visible",
                        part or "",
                        kind,
                    )
                )
        self.shared: list[str] = []
        self.date_styles: set[int] = set()
        parts = [(t, target) for t, target, external in rels.values() if not external]
        if self.rels_missing:
            directory = self.part.rsplit("/", 1)[0] if "/" in self.part else ""
            parts = [
                ("/sharedStrings", f"{directory}/sharedStrings.xml".lstrip("/")),
                ("/styles", f"{directory}/styles.xml".lstrip("/")),
            ]
        for rtype, target in parts:
            if rtype.endswith("/sharedStrings") and package.has(target):
                self._read_shared(target)
            elif rtype.endswith("/styles") and package.has(target):
                self._read_styles(target)

    def _conventional_sheet(self, position: int, sheet_id: str | None) -> tuple[str | None, str]:
        directory = self.part.rsplit("/", 1)[0] if "/" in self.part else ""
        for number in dict.fromkeys(n for n in (sheet_id, str(position)) if n):
            for folder, kind in (("worksheets", "worksheet"), ("chartsheets", "chartsheet")):
                name = f"{directory}/{folder}/sheet{number}.xml".lstrip("/")
                if self.package.has(name):
                    return self.package.resolve(name), kind
        return None, "worksheet"

    def _read_shared(self, part: str) -> None:
        for element in self.package.iterparse(part, ("{*}si",)):
            self.shared.append(_rich_text(element))
            element.clear()
            if len(self.shared) > self.limits.max_cells:
                raise PackageError(f"shared string table over {self.limits.max_cells} entries")

    def _read_styles(self, part: str) -> None:
        root = self.package.optional_xml(part)
        if root is None:
            return
        custom: dict[int, str] = {}
        for element in root.iter():
            if localname(element) == "numFmt":
                try:
                    custom[int(element.get("numFmtId") or "-1")] = element.get("formatCode") or ""
                except ValueError:
                    continue
        for element in root:
            if localname(element) != "cellXfs":
                continue
            for index, xf in enumerate(x for x in element if localname(x) == "xf"):
                try:
                    fmt = int(xf.get("numFmtId") or "0")
                except ValueError:
                    continue
                if fmt in _BUILTIN_DATE_FORMATS or (fmt in custom and _is_date_code(custom[fmt])):
                    self.date_styles.add(index)


def _rich_text(element) -> str:
    """Text of an ``si``/``is`` element: its ``t`` runs, without phonetic runs."""
    parts = []
    for node in element.iter():
        name = localname(node)
        if name == "t":
            parent = node.getparent()
            if parent is not None and localname(parent) == "rPh":
                continue
            parts.append(node.text or "")
    return "".join(parts)


def _read_sheet(
    book: _Workbook, index: int, name: str, state: str, part: str, kind: str, keep_cells: bool = True
) -> SheetData:
    from ingest_pipeline.office.charts import charts_of

    sheet = SheetData(name=name, index=index, state=state, kind=kind)
    if not part or not book.package.has(part):
        # A sheet whose part cannot be found is unread, not blank.
        why = (
            "the workbook's relationships part is missing"
            if book.rels_missing
            else "its relationship is broken"
        )
        sheet.error = f"sheet {name!r}: its part was not found ({why})"
        return sheet
    package = book.package
    for rtype, target, external in package.rels(part).values():
        if not external and rtype.endswith("/drawing") and package.has(target):
            sheet.charts.extend(charts_of(package, target))
    if kind != "worksheet":
        return sheet
    tags = ("{*}row", "{*}mergeCell", "{*}col", "{*}dimension", "{*}tablePart")
    next_row = 0
    scanned = 0
    limit = book.limits.max_cells
    table_rids: list[str] = []
    cells = sheet.cells
    if not keep_cells:
        sheet.lines = []
        last_row = filled = 0
    for element in package.iterparse(part, tags):
        tag = localname(element)
        if tag == "row":
            r_attr = element.get("r")
            row = int(r_attr) - 1 if r_attr and r_attr.isdigit() else next_row
            if (element.get("hidden") or "").lower() in ("1", "true"):
                sheet.hidden_rows.add(row)
            next_row = row + 1
            next_col = 0
            for cell in element:
                if not isinstance(cell.tag, str) or not cell.tag.endswith("}c") and cell.tag != "c":
                    continue
                scanned += 1
                if scanned > limit * 4:
                    raise PackageError(f"sheet {name!r} has over {limit * 4} cell elements")
                ref = cell.get("r")
                pos = parse_ref(ref) if ref else None
                if pos is None:
                    pos = (row, next_col)
                next_col = pos[1] + 1
                if len(cell) == 0:
                    continue  # a styled empty cell
                value = _cell_text(book, sheet, cell)
                if value is not None and value.strip():
                    cells[pos] = value
                    if len(cells) > limit:
                        raise PackageError(f"sheet {name!r} has over {limit} non-empty cells")
            if not keep_cells and cells:
                filled += len(cells)
                last_row = _take_row_line(sheet.lines, cells, last_row)
                if filled > limit:
                    raise PackageError(f"sheet {name!r} has over {limit} non-empty cells")
            element.clear()
            parent = element.getparent()
            while parent is not None and element.getprevious() is not None:
                del parent[0]
        elif tag == "mergeCell":
            merged = parse_range(element.get("ref") or "")
            if merged:
                sheet.merges.append(merged)
            element.clear()
        elif tag == "col":
            if (element.get("hidden") or "").lower() in ("1", "true"):
                try:
                    lo, hi = int(element.get("min") or "0"), int(element.get("max") or "0")
                except ValueError:
                    lo = hi = 0
                sheet.hidden_cols.update(range(max(lo, 1) - 1, min(hi, 16384)))
        elif tag == "dimension":
            sheet.declared = element.get("ref")
        elif tag == "tablePart":
            rid = rel_attr(element, "id")
            if rid:
                table_rids.append(rid)
    if table_rids:
        rels = package.rels(part)
        for rid in table_rids:
            rel = rels.get(rid)
            if rel and not rel[2] and package.has(rel[1]):
                root = package.optional_xml(rel[1])
                if root is None:
                    continue
                area = parse_range(root.get("ref") or "")
                if area:
                    sheet.tables.append((root.get("displayName") or root.get("name") or "", area))
    return sheet


def _take_row_line(lines: list[str], cells: dict[tuple[int, int], str], after: int) -> int:
    """Move one row's cells into ``lines`` as its line (emptying ``cells``) and return its
    1-based number, which must come after ``after``."""
    rows = {r for r, _ in cells}
    row = rows.pop() + 1
    if rows or row <= after:
        raise _OutOfOrder
    lines.append(_row_line({c: value for (_, c), value in cells.items()}))
    cells.clear()
    return row


def _cell_text(book: _Workbook, sheet: SheetData, cell) -> str | None:
    ctype = cell.get("t") or "n"
    value_node = formula_node = inline = None
    for child in cell:
        name = localname(child)
        if name == "v":
            value_node = child
        elif name == "f":
            formula_node = child
        elif name == "is":
            inline = child
    if ctype == "inlineStr" and inline is not None:
        return _rich_text(inline)
    raw = value_node.text if value_node is not None else None
    if raw is None or (raw == "" and ctype != "str"):
        if formula_node is not None:
            sheet.formulas_without_value += 1
            formula = (formula_node.text or "").strip()
            return f"={formula}" if formula else NO_VALUE_MARKER
        if inline is not None:
            return _rich_text(inline)
        return None
    if ctype == "s":
        try:
            return book.shared[int(raw)]
        except (ValueError, IndexError):
            return raw
    if ctype == "b":
        return "TRUE" if raw.strip() in ("1", "true") else "FALSE"
    if ctype in ("e", "str", "inlineStr"):
        return raw
    if ctype == "d":
        return raw.replace("T00:00:00", "").replace("T", " ")
    try:
        style = int(cell.get("s") or "0")
    except ValueError:
        style = 0
    return _format_number(raw, style in book.date_styles, book.epoch)


def load_sheets(
    content: bytes, limits: PackageLimits = DEFAULT_LIMITS, *, cells: bool = True
) -> list[SheetData]:
    """Every sheet of a workbook, in workbook order; PackageError if it cannot be read.
    With ``cells=False`` a sheet keeps its text lines only (``SheetData.lines``)."""
    package = open_package(content, limits, kind="XLSX")
    book = _Workbook(package, limits)
    if not book.sheets:
        raise PackageError("workbook lists no sheets")
    sheets = []
    for index, (name, state, part, kind) in enumerate(book.sheets):
        try:
            try:
                sheets.append(_read_sheet(book, index, name, state, part, kind, keep_cells=cells))
            except _OutOfOrder:
                sheets.append(_read_sheet(book, index, name, state, part, kind))
        except MalformedPart as exc:
            # One broken sheet fails its own page, not the workbook.
            sheets.append(SheetData(name=name, index=index, state=state, kind=kind, error=str(exc)))
    return sheets
