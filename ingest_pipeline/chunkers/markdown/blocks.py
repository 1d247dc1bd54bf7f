"""A top-level Markdown block, and the line rules CommonMark uses to recognise one."""

from __future__ import annotations

import re
from collections.abc import Sequence


class Block:
    """A top-level block: ``start``/``end`` are 0-based half-open line indices, without
    trailing blank lines. Headings carry ``level`` and their raw inline ``text``."""

    __slots__ = ("kind", "start", "end", "level", "text", "broken")

    def __init__(
        self, kind: str, start: int, end: int, level: int = 0, text: str = "", broken: bool = False
    ) -> None:
        self.kind = kind
        self.start = start
        self.end = end
        self.level = level
        self.text = text
        self.broken = broken

    def __repr__(self) -> str:
        extra = f" h{self.level} {self.text!r}" if self.kind == "heading" else ""
        return f"<{self.kind} {self.start}:{self.end}{extra}{' broken' if self.broken else ''}>"

    def key(self) -> tuple[str, int, int]:
        return (self.kind, self.start, self.end)


_ATX = re.compile(r"(#{1,6})(?:[ \t]|$)")
_FENCE = re.compile(r"(`{3,}|~{3,})(.*)$")
_HR = re.compile(r"(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$")
_SETEXT = re.compile(r"(?:=+|-+)[ \t]*$")
_BULLET = re.compile(r"([-*+])(?:([ \t]+)(.?)|$)")
_ORDERED = re.compile(r"([0-9]{1,9})([.)])(?:([ \t]+)(.?)|$)")
_TABLE_DELIM_CHARS = frozenset("|-: \t")
_ALIGN = re.compile(r":?-+:?$")
_MATH_LABEL_REV = re.compile(r"^\s*\)([^)$\r\n]+?)\(\s*\${2}")

_ATTR = (
    r"(?:\s+[a-zA-Z_:][a-zA-Z0-9:._-]*"
    r"(?:\s*=\s*(?:[^\"'=<>`\x00-\x20]+|'[^']*'|\"[^\"]*\"))?)"
)
_HTML_BLOCK_NAMES = (
    "address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|"
    "details|dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|"
    "h1|h2|h3|h4|h5|h6|head|header|hr|html|iframe|legend|li|link|main|menu|menuitem|nav|"
    "noframes|ol|optgroup|option|p|param|search|section|summary|table|tbody|td|tfoot|th|"
    "thead|title|tr|track|ul"
)
# (start, end or None for "ends at a blank line", may interrupt a paragraph)
_HTML_KINDS: tuple[tuple[re.Pattern[str], re.Pattern[str] | None, bool], ...] = (
    (
        re.compile(r"<(?a:script|pre|style|textarea)(?=\s|>|$)", re.IGNORECASE),
        re.compile(r"</(?a:script|pre|style|textarea)>", re.IGNORECASE),
        True,
    ),
    (re.compile(r"<!--"), re.compile(r"-->"), True),
    (re.compile(r"<\?"), re.compile(r"\?>"), True),
    (re.compile(r"<![A-Za-z]"), re.compile(r">"), True),
    (re.compile(r"<!\[CDATA\["), re.compile(r"\]\]>"), True),
    (re.compile(r"</?(?a:" + _HTML_BLOCK_NAMES + r")(?=\s|/?>|$)", re.IGNORECASE), None, True),
    (
        re.compile(r"(?:<[A-Za-z][A-Za-z0-9\-]*" + _ATTR + r"*\s*/?>|</[A-Za-z][A-Za-z0-9\-]*\s*>)\s*$"),
        None,
        False,
    ),
)


def _indent(line: str) -> int:
    """Leading columns of spaces and tabs (tab stops of 4), as CommonMark counts them."""
    n = 0
    for ch in line:
        if ch == " ":
            n += 1
        elif ch == "\t":
            n += 4 - n % 4
        else:
            break
    return n


def _is_blank(line: str) -> bool:
    return not line.strip(" \t")


def _html_kind(s: str) -> int:
    """Index into _HTML_KINDS of the HTML block ``s`` (line without indentation) opens, or -1."""
    for k, (start, _end, _interrupts) in enumerate(_HTML_KINDS):
        if start.match(s):
            return k
    return -1


def _table_columns(header: str, delim: str) -> bool:
    """Whether ``header`` and the delimiter row ``delim`` (both stripped) open a table."""
    if len(delim) < 2 or delim[0] not in "|-:" or "-" not in delim:
        return False
    if delim[1] not in "|-: \t" or (delim[0] == "-" and delim[1] in " \t"):
        return False
    if not _TABLE_DELIM_CHARS.issuperset(delim):
        return False
    cols = delim.split("|")
    aligns = 0
    last = len(cols) - 1
    for k, col in enumerate(cols):
        t = col.strip(" \t")
        if not t:
            if k == 0 or k == last:
                continue
            return False
        if not _ALIGN.match(t):
            return False
        aligns += 1
    if "|" not in header:
        return False
    cells = _escaped_split(header)
    if cells and cells[0] == "":
        cells.pop(0)
    if cells and cells[-1] == "":
        cells.pop()
    return len(cells) == aligns and aligns > 0


def _escaped_split(s: str) -> list[str]:
    if "\\|" not in s:
        return s.split("|")
    return re.split(r"(?<!\\)\|", s)


def _fill_gaps(lines: Sequence[str], blocks: list[Block], start: int, end: int) -> list[Block]:
    """``blocks`` plus a paragraph for every run of non-blank lines none of them holds
    (markdown-it makes no token for link reference definitions)."""
    out: list[Block] = []
    pos = start
    for b in [*blocks, Block("end", end, end)]:
        k = pos
        while k < b.start:
            if _is_blank(lines[k]):
                k += 1
                continue
            j = k
            while j < b.start and not _is_blank(lines[j]):
                j += 1
            out.append(Block("paragraph", k, j))
            k = j
        if b.kind != "end":
            out.append(b)
            pos = max(pos, b.end)
    return out


_MAYBE_INTERRUPT = frozenset("#`~>-*+_<0123456789")


def _content_offset(line: str, m: re.Match[str], ordered: bool) -> int:
    """Column where a list item's content starts (the continuation indent)."""
    if ordered:
        width, spaces, first = len(m.group(1)) + 1, m.group(3), m.group(4)
    else:
        width, spaces, first = 1, m.group(2), m.group(3)
    marker_end = _indent(line) + width
    if not spaces or not first:
        return marker_end + 1
    col = marker_end
    for ch in spaces:
        col = col + 1 if ch == " " else col + 4 - col % 4
    columns = col - marker_end
    return marker_end + (columns if columns <= 4 else 1)


def _atx_text(s: str, pos: int) -> str:
    text = s[pos:].strip(" \t")
    stripped = text.rstrip("#")
    if stripped != text and (not stripped or stripped[-1] in " \t"):
        text = stripped.rstrip(" \t")
    return text


def _trim_blank(lines: Sequence[str], start: int, end: int) -> int:
    while end > start + 1 and _is_blank(lines[end - 1]):
        end -= 1
    return end
