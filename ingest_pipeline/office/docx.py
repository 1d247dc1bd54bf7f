"""The sections of a DOCX package, from a walk of ``w:body`` with lxml.

The walk keeps what python-docx's paragraph API loses: text inside content controls
(``w:sdt``), tracked insertions (``w:ins``), smart tags, custom XML and simple fields;
it drops tracked deletions (``w:del``/``w:delText``) and field instructions. Text boxes
follow the paragraph that anchors them (the VML fallback copy is skipped); tables nested
in a cell follow their outer table; footnotes and endnotes come at the end of the last
section. Headers, footers and comments are left out: page furniture repeated on every
page, or remarks about the text rather than the text. Names are matched without their namespace,
so ISO Strict documents read like Transitional ones.

About 500 lines: the body walk, list numbering and styles it resolves and the model it
fills are one reading of the package, and nothing else uses their parts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ingest_pipeline.office.safety import DEFAULT_LIMITS, PackageLimits, attr, localname, open_package

_SKIP_INLINE = frozenset(
    {
        "pPr",
        "rPr",
        "sectPr",
        "sdtPr",
        "sdtEndPr",
        "del",
        "moveFrom",
        "delText",
        "delInstrText",
        "instrText",
        "fldChar",
        "Fallback",
        "tblPr",
        "trPr",
        "tcPr",
        "tblGrid",
        "commentRangeStart",
        "commentRangeEnd",
        "bookmarkStart",
        "bookmarkEnd",
        "proofErr",
        "lastRenderedPageBreak",
    }
)
_WRAPPERS = frozenset({"sdt", "sdtContent", "customXml", "ins", "moveTo", "smartTag"})
_HEADING = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)
_FALSE = ("0", "false", "off")
_MAX_COLUMNS = 64


@dataclass
class TableData:
    rows: int
    cols: int
    cells: list[tuple[int, int, str, int, int]]  # row, col, text, row_span, col_span
    header_rows: int = 1

    def text(self) -> str:
        grid: dict[int, dict[int, str]] = {}
        for row, col, text, _rs, _cs in self.cells:
            grid.setdefault(row, {})[col] = " ".join(text.split())
        return "\n".join(
            "\t".join(grid.get(r, {}).get(c, "") for c in range(self.cols)) for r in range(self.rows)
        )


@dataclass
class DocBlock:
    """A paragraph or a table of a Word document, in document order."""

    kind: str  # "paragraph" | "table"
    text: str = ""
    hidden_text: str = ""
    style: str = ""
    heading_level: int | None = None
    list_item: bool = False
    source: str = "body"  # body | textbox | footnote | endnote
    table: TableData | None = None
    nested: bool = False

    def plain(self) -> str:
        return self.table.text() if self.table is not None else self.text


@dataclass
class DocSection:
    index: int
    blocks: list[DocBlock] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join(b.plain() for b in self.blocks if b.plain().strip())


def _roman(n: int) -> str:
    out = ""
    for value, letters in (
        (1000, "m"),
        (900, "cm"),
        (500, "d"),
        (400, "cd"),
        (100, "c"),
        (90, "xc"),
        (50, "l"),
        (40, "xl"),
        (10, "x"),
        (9, "ix"),
        (5, "v"),
        (4, "iv"),
        (1, "i"),
    ):
        while n >= value:
            out += letters
            n -= value
    return out


def _letters(n: int) -> str:
    out = ""
    while n > 0:
        n, rem = divmod(n - 1, 26)
        out = chr(97 + rem) + out
    return out


def _format_number(n: int, fmt: str) -> str:
    if fmt in ("lowerLetter",):
        return _letters(n)
    if fmt == "upperLetter":
        return _letters(n).upper()
    if fmt == "lowerRoman":
        return _roman(n)
    if fmt == "upperRoman":
        return _roman(n).upper()
    if fmt in ("none", "bullet"):
        return ""
    return str(n)


class _Numbering:
    """List and heading numbers as Word renders them (``1.2``, ``a)``, ``iv.``);
    bullets give no label. Counters run per list instance."""

    def __init__(self, package, main: str) -> None:
        self.levels: dict[str, dict[int, tuple[int, str, str]]] = {}  # numId -> ilvl -> (start, fmt, text)
        self.counters: dict[str, dict[int, int]] = {}
        for rtype, target, external in package.rels(main).values():
            root = package.optional_xml(target) if not external and rtype.endswith("/numbering") else None
            if root is not None:
                self._load(root)

    def _load(self, root) -> None:
        abstract: dict[str, dict[int, tuple[int, str, str]]] = {}
        for node in root:
            if localname(node) != "abstractNum":
                continue
            levels = {}
            for lvl in node:
                if localname(lvl) != "lvl":
                    continue
                start, fmt, text = 1, "decimal", ""
                for prop in lvl:
                    pname = localname(prop)
                    if pname == "start":
                        start = _int(attr(prop, "val"), 1)
                    elif pname == "numFmt":
                        fmt = attr(prop, "val") or "decimal"
                    elif pname == "lvlText":
                        text = attr(prop, "val") or ""
                levels[_int(attr(lvl, "ilvl"), 0)] = (start, fmt, text)
            abstract[attr(node, "abstractNumId") or ""] = levels
        for node in root:
            if localname(node) != "num":
                continue
            ref = next((attr(c, "val") for c in node if localname(c) == "abstractNumId"), None)
            levels = dict(abstract.get(ref or "", {}))
            for override in node:
                if localname(override) != "lvlOverride":
                    continue
                ilvl = _int(attr(override, "ilvl"), 0)
                for prop in override:
                    if localname(prop) == "startOverride" and ilvl in levels:
                        start, fmt, text = levels[ilvl]
                        levels[ilvl] = (_int(attr(prop, "val"), start), fmt, text)
            self.levels[attr(node, "numId") or ""] = levels

    def label(self, num_id: str, ilvl: int) -> str:
        levels = self.levels.get(num_id)
        if not levels or ilvl not in levels:
            return ""
        counters = self.counters.setdefault(num_id, {})
        start = levels[ilvl][0]
        counters[ilvl] = counters.get(ilvl, start - 1) + 1
        for deeper in [k for k in counters if k > ilvl]:
            del counters[deeper]
        fmt_level = levels[ilvl]
        if fmt_level[1] in ("bullet", "none"):
            return ""
        text = fmt_level[2]
        for level in range(9):
            token = f"%{level + 1}"
            if token in text:
                lv = levels.get(level, (1, "decimal", ""))
                value = counters.get(level, lv[0])
                text = text.replace(token, _format_number(value, lv[1]))
        return text.strip()


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


class _Walker:
    def __init__(
        self,
        styles: dict[str, str],
        style_numbering: dict[str, tuple[str | None, int | None]] | None = None,
        numbering: _Numbering | None = None,
    ) -> None:
        self.styles = styles
        self.style_numbering = style_numbering or {}
        self.numbering = numbering
        self.sections: list[DocSection] = [DocSection(0)]

    @property
    def current(self) -> DocSection:
        return self.sections[-1]

    # -- block level ---------------------------------------------------------------

    def blocks(self, container, out: list[DocBlock], source: str, top: bool = False) -> None:
        for child in container:
            name = localname(child)
            if name == "p":
                self.paragraph(child, out, source)
                if top and self._has_sect_pr(child):
                    self.sections.append(DocSection(len(self.sections)))
                    out = self.current.blocks
            elif name == "tbl":
                data, nested = self.table(child)
                out.append(DocBlock(kind="table", table=data, source=source))
                out.extend(nested)
            elif name in _WRAPPERS:
                before = len(self.sections)
                self.blocks(child, out, source, top)
                if len(self.sections) != before:
                    out = self.current.blocks
            elif name == "AlternateContent":
                choice = next((c for c in child if localname(c) == "Choice"), None)
                if choice is not None:
                    self.blocks(choice, out, source, top)

    @staticmethod
    def _has_sect_pr(paragraph) -> bool:
        for child in paragraph:
            if localname(child) == "pPr":
                return any(localname(c) == "sectPr" for c in child)
        return False

    def paragraph(self, p, out: list[DocBlock], source: str) -> None:
        visible: list[str] = []
        hidden: list[str] = []
        boxes: list = []
        self.inline(p, visible, hidden, boxes, False)
        style_id = ""
        numbered = False
        outline = None
        num_id: str | None = None
        ilvl: int | None = None
        for child in p:
            if localname(child) == "pPr":
                for prop in child:
                    pname = localname(prop)
                    if pname == "pStyle":
                        style_id = attr(prop, "val") or ""
                    elif pname == "numPr":
                        numbered = True
                        for item in prop:
                            if localname(item) == "numId":
                                num_id = attr(item, "val")
                            elif localname(item) == "ilvl":
                                ilvl = _int(attr(item, "val"), 0)
                    elif pname == "outlineLvl":
                        try:
                            outline = int(attr(prop, "val") or "9") + 1
                        except ValueError:
                            outline = None
        style = self.styles.get(style_id, style_id)
        style_num = self.style_numbering.get(style_id, (None, None))
        if num_id is None:
            num_id = style_num[0]
        if ilvl is None:
            ilvl = style_num[1] or 0
        label = ""
        if self.numbering is not None and num_id and num_id != "0" and "".join(visible).strip():
            label = self.numbering.label(num_id, ilvl)
            numbered = True
        if label:
            visible.insert(0, label + " ")
        level = None
        match = _HEADING.match(style.strip())
        if match:
            level = int(match.group(1))
        elif style.strip().lower() == "title":
            level = 0
        elif outline is not None and outline <= 9:
            level = outline
        out.append(
            DocBlock(
                kind="paragraph",
                text="".join(visible),
                hidden_text="".join(hidden),
                style=style,
                heading_level=level,
                list_item=numbered or style.lower().startswith("list"),
                source=source,
            )
        )
        for box in boxes:
            self.blocks(box, out, "textbox")

    def inline(self, element, visible: list[str], hidden: list[str], boxes: list, vanish: bool) -> None:
        for child in element:
            name = localname(child)
            if name in _SKIP_INLINE:
                continue
            if name == "r":
                self.inline(child, visible, hidden, boxes, vanish or self._vanished(child))
            elif name == "t":
                text = child.text or ""
                if "/math" in child.tag:
                    text = f" {text} "  # math runs are tokens of a formula
                (hidden if vanish else visible).append(text)
            elif name == "tab":
                (hidden if vanish else visible).append("\t")
            elif name in ("br", "cr"):
                (hidden if vanish else visible).append("\n")
            elif name == "noBreakHyphen":
                (hidden if vanish else visible).append("-")
            elif name == "txbxContent":
                boxes.append(child)
            elif name == "AlternateContent":
                choice = next((c for c in child if localname(c) == "Choice"), None)
                if choice is not None:
                    self.inline(choice, visible, hidden, boxes, vanish)
            elif name in ("tbl", "p"):
                # Only inside text boxes and similar; kept as text of this paragraph.
                boxes.append(_Wrap(child))
            else:
                self.inline(child, visible, hidden, boxes, vanish)

    @staticmethod
    def _vanished(run) -> bool:
        for child in run:
            if localname(child) == "rPr":
                for prop in child:
                    if localname(prop) in ("vanish", "specVanish"):
                        return (attr(prop, "val") or "true").lower() not in _FALSE
        return False

    # -- tables --------------------------------------------------------------------

    def _rows(self, tbl):
        for child in tbl:
            name = localname(child)
            if name == "tr":
                yield child
            elif name in _WRAPPERS:
                yield from self._rows(child)

    def _cells(self, tr):
        for child in tr:
            name = localname(child)
            if name == "tc":
                yield child
            elif name in _WRAPPERS:
                yield from self._cells(child)

    def cell_text(self, tc, nested: list[DocBlock]) -> str:
        """A cell's paragraph text; tables nested in it go to ``nested`` (chunked after
        the outer table, so no text is there twice)."""
        inner: list[DocBlock] = []
        self.blocks(tc, inner, "cell")
        parts = []
        for block in inner:
            if block.table is not None:
                block.nested = True
                nested.append(block)
            elif block.text.strip():
                parts.append(block.text.strip())
        return "\n".join(parts)

    def table(self, tbl) -> tuple[TableData, list[DocBlock]]:
        nested: list[DocBlock] = []
        grid_cols = 0
        for child in tbl:
            if localname(child) == "tblGrid":
                grid_cols = sum(1 for c in child if localname(c) == "gridCol")
        raw_rows: list[list[tuple[int, int, str | None, str, bool]]] = []
        header_rows = 0
        header_run = True
        for tr in self._rows(tbl):
            col = 0
            is_header = False
            for child in tr:
                if localname(child) in ("trPr", "tblPrEx"):
                    for prop in child:
                        pname = localname(prop)
                        if pname == "gridBefore":
                            col = min(max(0, _int(attr(prop, "val"), 0)), _MAX_COLUMNS)
                        elif pname == "tblHeader" and (attr(prop, "val") or "true").lower() not in _FALSE:
                            is_header = True
            if header_run and is_header:
                header_rows += 1
            else:
                header_run = False
            row: list[tuple[int, int, str | None, str, bool]] = []
            for tc in self._cells(tr):
                span, vmerge, hmerge = 1, None, False
                for child in tc:
                    if localname(child) == "tcPr":
                        for prop in child:
                            pname = localname(prop)
                            if pname == "gridSpan":
                                # Word tables have at most 63 columns; a larger span is junk.
                                span = min(max(1, _int(attr(prop, "val"), 1)), _MAX_COLUMNS)
                            elif pname == "vMerge":
                                vmerge = attr(prop, "val") or "continue"
                            elif pname == "hMerge":
                                hmerge = (attr(prop, "val") or "continue") == "continue"
                row.append((col, span, vmerge, self.cell_text(tc, nested), hmerge))
                col += span
            raw_rows.append(row)
        cols = max([grid_cols] + [c + s for row in raw_rows for c, s, *_ in row] + [0])
        cells: list[list] = []  # row, col, text, row_span, col_span
        open_by_col: dict[int, list] = {}
        for r, row in enumerate(raw_rows):
            last: list | None = None
            for col, span, vmerge, text, hmerge in row:
                if hmerge and last is not None:
                    last[4] += span
                    if text:
                        last[2] = f"{last[2]}\n{text}".strip()
                    continue
                if vmerge == "continue" and col in open_by_col and open_by_col[col][4] == span:
                    origin = open_by_col[col]
                    origin[3] = r - origin[0] + 1
                    if text:
                        origin[2] = f"{origin[2]}\n{text}".strip()
                    last = origin
                    continue
                cell = [r, col, text or "", 1, span]
                cells.append(cell)
                last = cell
                for c in range(col, col + span):
                    open_by_col.pop(c, None)
                open_by_col[col] = cell
        data = TableData(
            rows=len(raw_rows),
            cols=cols,
            cells=[tuple(c) for c in cells],
            header_rows=header_rows or 1,
        )
        return data, nested


class _Wrap:
    """Makes a single element iterable as a container of itself."""

    def __init__(self, element) -> None:
        self._element = element

    def __iter__(self):
        return iter((self._element,))


def _styles(package, main: str) -> tuple[dict[str, str], dict[str, tuple[str | None, int | None]]]:
    """Style names by id, and the numbering (numId, ilvl) a paragraph style carries,
    following ``basedOn``."""
    names: dict[str, str] = {}
    own: dict[str, tuple[str | None, int | None]] = {}
    based: dict[str, str] = {}
    for rtype, target, external in package.rels(main).values():
        root = package.optional_xml(target) if not external and rtype.endswith("/styles") else None
        if root is not None:
            for style in root:
                if localname(style) != "style":
                    continue
                sid = attr(style, "styleId") or ""
                for child in style:
                    cname = localname(child)
                    if cname == "name":
                        names[sid] = attr(child, "val") or sid
                    elif cname == "basedOn":
                        based[sid] = attr(child, "val") or ""
                    elif cname == "pPr":
                        for prop in child:
                            if localname(prop) == "numPr":
                                num_id = next((attr(c, "val") for c in prop if localname(c) == "numId"), None)
                                ilvl = next(
                                    (_int(attr(c, "val"), 0) for c in prop if localname(c) == "ilvl"), None
                                )
                                own[sid] = (num_id, ilvl)
    numbering: dict[str, tuple[str | None, int | None]] = {}
    for sid in names:
        seen = set()
        cursor: str | None = sid
        while cursor and cursor not in seen and cursor not in own:
            seen.add(cursor)
            cursor = based.get(cursor)
        if cursor in own:
            numbering[sid] = own[cursor]
    return names, numbering


def load_docx(content: bytes, limits: PackageLimits = DEFAULT_LIMITS) -> list[DocSection]:
    """The sections of a Word document with their blocks; PackageError if unreadable."""
    from ingest_pipeline.office.safety import PackageError

    package = open_package(content, limits, kind="DOCX")
    main = package.main_part()
    root = package.xml(main)
    body = next((c for c in root if localname(c) == "body"), None)
    if body is None:
        raise PackageError(f"not a Word document: {main} has no body")
    names, style_numbering = _styles(package, main)
    walker = _Walker(names, style_numbering, _Numbering(package, main))
    try:
        walker.blocks(body, walker.current.blocks, "body", top=True)
    except RecursionError:
        raise PackageError("document nests tables or controls too deeply to read") from None
    sections = walker.sections
    # A body ends with its sectPr; a trailing section opened by the last paragraph's
    # sectPr with nothing after it is not a section of its own.
    if len(sections) > 1 and not sections[-1].blocks and not any(localname(c) == "sectPr" for c in body):
        sections.pop()
    notes: list[DocBlock] = []
    for rtype, target, external in package.rels(main).values():
        kind = rtype.rsplit("/", 1)[-1]
        root = None if external or kind not in ("footnotes", "endnotes") else package.optional_xml(target)
        if root is None:
            continue
        for note in root:
            if localname(note) not in ("footnote", "endnote"):
                continue
            if (attr(note, "type") or "normal") != "normal":
                continue
            walker.blocks(note, notes, kind[:-1])
    sections[-1].blocks.extend(b for b in notes if b.plain().strip())
    return sections
