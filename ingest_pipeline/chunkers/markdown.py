"""markdown@1: structure-aware Markdown chunks with heading paths, packed to character limits.

The block structure is found by a line scanner that follows CommonMark's block rules for
everything that decides a chunk boundary at the top level (ATX and setext headings, fences,
indented code, ``$$`` math, HTML blocks, tables, thematic breaks, front matter, and the
extent of lists and block quotes). Where the extent of a list or block quote hinges on a
lazy continuation line, which only a real parse can settle, that region alone goes to
markdown-it-py (tables, dollar math and front matter enabled). A full markdown-it parse of
every document is several times slower than the whole chunker.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

from pydantic import Field, model_validator

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.base import BaseChunker, ChunkerConfig
from ingest_pipeline.contract import CheckOutcome, ChunkPiece, PageChunks, PageOutput

MARKDOWN = mt.MARKDOWN

# ---------------------------------------------------------------------------------------
# Blocks
# ---------------------------------------------------------------------------------------


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
        re.compile(
            r"(?:<[A-Za-z][A-Za-z0-9\-]*" + _ATTR + r"*\s*/?>|</[A-Za-z][A-Za-z0-9\-]*\s*>)\s*$"
        ),
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


class _Scanner:
    """One pass over the lines of a document, producing its top-level blocks."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines
        self.n = len(lines)
        self.blocks: list[Block] = []
        self.regions = 0  # regions handed to markdown-it

    # -- helpers ---------------------------------------------------------------------
    def is_table_start(self, i: int, s: str) -> bool:
        if i + 1 >= self.n or "|" not in s:
            return False
        nxt = self.lines[i + 1]
        if _indent(nxt) >= 4:
            return False
        return _table_columns(s.strip(" \t"), nxt.strip(" \t"))

    def interrupts_paragraph(self, i: int, line: str, tables: bool = True) -> bool:
        """Whether ``line`` (non-blank, indent < 4) ends a paragraph that precedes it.

        Inside a container a table cannot (its delimiter row would be outdented), so a
        container asks with ``tables=False``."""
        s = line.lstrip(" \t")
        c = s[0]
        if c == "#":
            if _ATX.match(s):
                return True
        elif c == "`" or c == "~":
            m = _FENCE.match(s)
            if m and not (c == "`" and "`" in m.group(2)):
                return True
        elif c == ">":
            return True
        elif c == "-" or c == "*" or c == "+" or c == "_":
            if _HR.match(s):
                return True
            if c != "_":
                m = _BULLET.match(s)
                if m and m.group(3):
                    return True
        elif c == "<":
            k = _html_kind(s)
            if k >= 0 and _HTML_KINDS[k][2]:
                return True
        elif "0" <= c <= "9":
            m = _ORDERED.match(s)
            if m and m.group(4) and int(m.group(1)) == 1:
                return True
        return tables and "|" in s and self.is_table_start(i, s)

    def ends_table(self, line: str) -> bool:
        s = line.lstrip(" \t")
        c = s[0]
        if c == "#":
            return bool(_ATX.match(s))
        if c == "`" or c == "~":
            m = _FENCE.match(s)
            return bool(m) and not (c == "`" and "`" in m.group(2))
        if c == ">":
            return True
        if c in "-*+_":
            return bool(_HR.match(s)) or (c != "_" and bool(_BULLET.match(s)))
        if c == "<":
            k = _html_kind(s)
            return k >= 0 and _HTML_KINDS[k][2]
        if "0" <= c <= "9":
            return bool(_ORDERED.match(s))
        return False

    # -- the scan --------------------------------------------------------------------
    def scan(self) -> list[Block]:
        lines = self.lines
        n = self.n
        blocks = self.blocks
        i = 0
        if n and lines[0].startswith("---"):
            end = self.front_matter(n)
            if end:
                blocks.append(Block("front_matter", 0, end))
                i = end
        while i < n:
            line = lines[i]
            if not line or (line[0] == " " or line[0] == "\t"):
                if _is_blank(line):
                    i += 1
                    continue
                ind = _indent(line)
                if ind >= 4:
                    i = self.indented_code(i, n)
                    continue
                s = line.lstrip(" \t")
            else:
                s = line
            c = s[0]
            if c == "#":
                m = _ATX.match(s)
                if m:
                    blocks.append(Block("heading", i, i + 1, len(m.group(1)), _atx_text(s, m.end(1))))
                    i += 1
                    continue
            elif c == "`" or c == "~":
                m = _FENCE.match(s)
                if m and not (c == "`" and "`" in m.group(2)):
                    i = self.fence(i, n, m.group(1))
                    continue
            elif c == "$":
                if s.startswith("$$"):
                    end = self.math(i, n, s)
                    if end:
                        blocks.append(Block("math", i, end))
                        i = end
                        continue
            elif c == "<":
                k = _html_kind(s)
                if k >= 0:
                    i = self.html(i, n, s, k)
                    continue
            elif c == ">":
                i = self.container(i, n, "blockquote", None, 0)
                continue
            elif c == "-" or c == "*" or c == "+" or c == "_":
                if _HR.match(s):
                    blocks.append(Block("thematic_break", i, i + 1))
                    i += 1
                    continue
                if c != "_":
                    m = _BULLET.match(s)
                    if m:
                        i = self.container(i, n, "list", c, _content_offset(line, m, False))
                        continue
            elif "0" <= c <= "9":
                m = _ORDERED.match(s)
                if m:
                    i = self.container(i, n, "list", m.group(2), _content_offset(line, m, True))
                    continue
            if "|" in s and self.is_table_start(i, s):
                i = self.table(i, n)
                continue
            i = self.paragraph(i, n)
        return blocks

    def front_matter(self, n: int) -> int:
        first = self.lines[0]
        marks = len(first) - len(first.lstrip("-"))
        if marks < 3:
            return 0
        for j in range(1, n):
            line = self.lines[j]
            if line.startswith("...") and not line[3:].strip(" \t"):
                return j + 1
            s = line.lstrip(" \t")
            if not s.startswith("-") or _indent(line) >= 4:
                continue
            dashes = len(s) - len(s.lstrip("-"))
            if dashes >= marks and not s[dashes:].strip(" \t"):
                return j + 1
        return 0

    def indented_code(self, i: int, n: int) -> int:
        lines = self.lines
        last = i
        j = i + 1
        while j < n:
            line = lines[j]
            if _is_blank(line):
                j += 1
                continue
            if _indent(line) < 4:
                break
            last = j
            j += 1
        self.blocks.append(Block("code", i, last + 1))
        return last + 1

    def fence(self, i: int, n: int, marker: str) -> int:
        lines = self.lines
        ch = marker[0]
        size = len(marker)
        for j in range(i + 1, n):
            line = lines[j]
            s = line.lstrip(" \t")
            if s.startswith(marker) and _indent(line) < 4:
                rest = s.lstrip(ch)
                if len(s) - len(rest) >= size and not rest.strip(" \t"):
                    self.blocks.append(Block("code", i, j + 1))
                    return j + 1
        end = _trim_blank(lines, i, n)
        self.blocks.append(Block("code", i, end, broken=True))
        return n

    def math(self, i: int, n: int, s: str) -> int:
        """End line (exclusive) of a ``$$`` block starting at ``i``, or 0 if it is none."""
        t = s.strip()
        if len(t) > 3:
            if t.endswith("$$"):
                return i + 1
            if _MATH_LABEL_REV.match(s[::-1]):
                return i + 1
            if "$$" in s[2:]:
                return 0
        for j in range(i + 1, n):
            line = self.lines[j]
            if line.strip().endswith("$$") or _MATH_LABEL_REV.match(line[::-1]):
                return j + 1
        return 0

    def html(self, i: int, n: int, s: str, k: int) -> int:
        lines = self.lines
        end_re = _HTML_KINDS[k][1]
        if end_re is not None:
            if end_re.search(s):
                self.blocks.append(Block("html", i, i + 1))
                return i + 1
            for j in range(i + 1, n):
                if end_re.search(lines[j]):
                    self.blocks.append(Block("html", i, j + 1))
                    return j + 1
            end = _trim_blank(lines, i, n)
            self.blocks.append(Block("html", i, end))
            return n
        j = i + 1
        while j < n and not _is_blank(lines[j]):
            j += 1
        self.blocks.append(Block("html", i, j))
        return j

    def table(self, i: int, n: int) -> int:
        lines = self.lines
        j = i + 2
        while j < n:
            line = lines[j]
            if _is_blank(line) or _indent(line) >= 4 or self.ends_table(line):
                break
            j += 1
        self.blocks.append(Block("table", i, j))
        return j

    def paragraph(self, i: int, n: int) -> int:
        lines = self.lines
        first = lines[i].lstrip(" \t")
        if first[0] == "[" and "]:" in first:
            # a link reference definition is no paragraph: a list, an HTML block or
            # math may follow it directly, and no setext underline can title it
            j = i + 1
            while j < n and not _is_blank(lines[j]):
                j += 1
            return self.delegate(i, j)
        j = i + 1
        while j < n:
            line = lines[j]
            if not line:
                break
            c = line[0]
            if c == " " or c == "\t":
                if _is_blank(line):
                    break
                if _indent(line) >= 4:
                    j += 1
                    continue
                c = line.lstrip(" \t")[0]
            if c == "=" or c == "-":
                if _SETEXT.match(line.lstrip(" \t")):
                    text = " ".join(x.strip(" \t") for x in lines[i:j])
                    self.blocks.append(Block("heading", i, j + 1, 1 if c == "=" else 2, text))
                    return j + 1
            if c in _MAYBE_INTERRUPT or "|" in line:
                if self.interrupts_paragraph(j, line):
                    break
            j += 1
        self.blocks.append(Block("paragraph", i, j))
        return j

    def container(self, i: int, n: int, kind: str, marker: str | None, offset: int) -> int:
        """A list (``marker`` is its bullet or ordered delimiter) or a block quote.

        Its extent follows CommonMark's container rules; when a lazy continuation line
        makes the extent depend on what is open inside the container, the region goes to
        markdown-it, whose top-level blocks are taken as they are.
        """
        lines = self.lines
        j = i + 1
        last = i
        lazy = False
        prev_blank = False
        ordered = marker not in ("-", "*", "+")
        # an item whose marker line is empty ends at a blank line right after it
        empty_item = i if kind == "list" and self.item_empty(lines[i], ordered) else -1
        while j < n:
            line = lines[j]
            if _is_blank(line):
                if kind == "blockquote":
                    break
                if empty_item == j - 1:
                    if j + 1 < n and self.same_marker(lines[j + 1], marker, ordered) is not None:
                        prev_blank = True
                        j += 1
                        continue
                    break
                prev_blank = True
                j += 1
                continue
            ind = _indent(line)
            s = line.lstrip(" \t") if ind else line
            if kind == "blockquote":
                if ind < 4 and s[0] == ">":
                    last = j
                    j += 1
                    continue
            else:
                if ind >= offset:
                    last = j
                    prev_blank = False
                    j += 1
                    continue
                m = self.same_marker(line, marker, ordered)
                if m is not None:
                    offset = _content_offset(line, m, ordered)
                    empty_item = j if not m.group(4 if ordered else 3) else -1
                    last = j
                    prev_blank = False
                    j += 1
                    continue
                if prev_blank:
                    break
            if ind < 4 and self.interrupts_paragraph(j, line, tables=False):
                break
            lazy = True
            last = j
            j += 1
        end = last + 1
        if not lazy:
            self.blocks.append(Block(kind, i, end))
            return end
        return self.delegate(i, end)

    @staticmethod
    def same_marker(line: str, marker: str | None, ordered: bool) -> re.Match[str] | None:
        """The match of a list item of the same list type opening ``line``, if any."""
        if _indent(line) >= 4:
            return None
        s = line.lstrip(" \t")
        if _HR.match(s):
            return None
        m = _ORDERED.match(s) if ordered else _BULLET.match(s)
        if m is not None and marker == m.group(2 if ordered else 1):
            return m
        return None

    @staticmethod
    def item_empty(line: str, ordered: bool) -> bool:
        s = line.lstrip(" \t")
        m = _ORDERED.match(s) if ordered else _BULLET.match(s)
        return m is not None and not m.group(4 if ordered else 3)

    def delegate(self, i: int, end: int) -> int:
        """Blocks of lines[i:end] from markdown-it; returns the line to resume scanning at."""
        self.regions += 1
        lines = self.lines
        found = _fill_gaps(lines, markdown_it_blocks("\n".join(lines[i:end]), offset=i), i, end)
        # The first block (the container) ends within the region. A later block is taken
        # while nothing before it could run past the region: the scanner resumes, seeing
        # the rest of the document, at a block that touches the region's end (a paragraph
        # there may be a setext heading) or that opens a fence, math or an HTML block
        # (its end may lie beyond the region).
        self.blocks.append(found[0])
        resume = found[0].end
        for block in found[1:]:
            if block.end >= end:
                break
            first = lines[block.start]
            s = first.lstrip(" \t")
            if _indent(first) < 4 and s[:1] in ("`", "~", "$", "<"):
                break
            self.blocks.append(block)
            resume = block.end
        return resume


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


_MDIT: Any = None


def _markdown_it() -> Any:
    """The block parser: markdown-it-py (CommonMark) with tables, dollar math and front
    matter, inline parsing off (block structure is all that decides boundaries)."""
    global _MDIT
    if _MDIT is None:
        from markdown_it import MarkdownIt
        from mdit_py_plugins.dollarmath import dollarmath_plugin
        from mdit_py_plugins.front_matter import front_matter_plugin

        md = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin).use(front_matter_plugin)
        md.disable("inline")
        _MDIT = md
    return _MDIT


_TOKEN_KINDS = {
    "paragraph_open": "paragraph",
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "blockquote_open": "blockquote",
    "table_open": "table",
    "fence": "code",
    "code_block": "code",
    "html_block": "html",
    "math_block": "math",
    "math_block_label": "math",
    "hr": "thematic_break",
    "front_matter": "front_matter",
    "heading_open": "heading",
}


def markdown_it_blocks(text: str, offset: int = 0) -> list[Block]:
    """Top-level blocks of ``text`` as markdown-it-py parses them (line maps shifted by
    ``offset``, trailing blank lines trimmed). Link reference definitions make no block."""
    lines = text.split("\n")
    tokens = _markdown_it().parse(text)
    out: list[Block] = []
    for k, tok in enumerate(tokens):
        if tok.level != 0 or tok.nesting == -1 or tok.map is None:
            continue
        kind = _TOKEN_KINDS.get(tok.type)
        if kind is None:
            continue
        a, b = tok.map
        b = _trim_blank(lines, a, min(b, len(lines)))
        block = Block(kind, a + offset, b + offset)
        if kind == "heading":
            block.level = int(tok.tag[1])
            block.text = tokens[k + 1].content if k + 1 < len(tokens) else ""
        elif tok.type == "fence":
            last = lines[b - 1].strip(" \t")
            mark = tok.markup
            block.broken = b - a < 2 or not (
                last.startswith(mark) and not last.lstrip(mark[0]).strip(" \t")
            )
        out.append(block)
    return out


def scan_blocks(text: str) -> tuple[list[str], list[Block]]:
    """The lines of ``text`` and its top-level blocks, in order."""
    lines = text.split("\n")
    return lines, _Scanner(lines).scan()


# ---------------------------------------------------------------------------------------
# Plain text of inline Markdown
# ---------------------------------------------------------------------------------------

_INLINE_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"!\[([^\]]*)\]\([^)]*\)"), ""),
    (re.compile(r"!\[([^\]]*)\]\[[^\]]*\]"), ""),
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),
    (re.compile(r"\[([^\]]*)\]\[[^\]]*\]"), r"\1"),
    (re.compile(r"<(https?://[^>\s]+)>"), r"\1"),
    (re.compile(r"</?[A-Za-z][^>]*>"), ""),
    (re.compile(r"(`+)(.+?)\1"), r"\2"),
    (re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1"), r"\2"),
    (re.compile(r"(\*|_)(?=\S)(.+?)(?<=\S)\1"), r"\2"),
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"), r"\1"),
    (re.compile(r"\s+"), " "),
)


_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_PARK = 0xF0000  # a private-use plane
_PARKED = re.compile("[\U000F0021-\U000F007E]")


def plain_text(markdown: str) -> str:
    """Inline Markdown without its syntax: link labels kept, images dropped, code, bold
    and italic markers removed, backslash escapes resolved."""
    text = markdown
    if any(ch in text for ch in "[]!<`*_~\\\n\t"):
        escaped = "\\" in text
        if escaped:  # park escaped characters where no markup rule can see them
            text = _ESCAPE.sub(lambda m: chr(_PARK + ord(m.group(1))), text)
        for pattern, repl in _INLINE_RULES:
            text = pattern.sub(repl, text)
        if escaped:
            text = _PARKED.sub(lambda m: chr(ord(m.group(0)) - _PARK), text)
    return text.strip()


# ---------------------------------------------------------------------------------------
# Sentences
# ---------------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"[.!?…]+[\"'»”’)\]]*\s+")
_LAST_WORD = re.compile(r"(\w+)\W*$")
ABBREVIATIONS = frozenset(
    """
    dott dr prof sig sigg ing avv arch geom rag mons sen
    mr mrs ms st jr sr ph co inc ltd corp
    ecc etc es cf cfr vs viz al
    fig figg tab cap capp par art artt pag pagg pp vol voll ed eds nn nr num
    approx ca circa dept
    gen feb mar apr mag giu lug ago set ott nov dic jan jun jul aug sep oct dec
    """.split()
)


def sentence_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Sentence spans of ``text[start:end]`` (absolute offsets, whitespace between them
    left out). A boundary is end punctuation, optional closing quotes, whitespace, then an
    uppercase letter, a digit or an opening quote; not after a known abbreviation or a
    single-letter initial ("Il dott. Rossi", "J. Smith")."""
    spans = []
    a = start
    for m in _SENTENCE_END.finditer(text, start, end):
        b = m.end()
        if b >= end:
            break
        nxt = text[b]
        if not (nxt.isupper() or nxt.isdigit() or nxt in "«\"“‘'(¿¡[*_`"):
            continue
        punct = m.group(0).rstrip()
        if punct.startswith(".") and punct.rstrip("\"'»”’)]") == ".":
            w = _LAST_WORD.search(text, max(a, m.start() - 20), m.start() + 1)
            if w is not None:
                word = w.group(1).lower()
                if len(word) == 1 or word in ABBREVIATIONS:
                    continue
        stop = m.start() + len(punct)
        if stop > a:
            spans.append((a, stop))
        a = b
    if a < end:
        spans.append((a, end))
    return spans


def hard_split(text: str, start: int, end: int, budget: int) -> list[tuple[int, int]]:
    """Split ``text[start:end]`` into spans of at most ``budget`` characters, at the last
    whitespace before the limit when there is one in its second half."""
    spans = []
    a = start
    budget = max(1, budget)
    while end - a > budget:
        cut = a + budget
        ws = max(text.rfind(" ", a, cut + 1), text.rfind("\n", a, cut + 1))
        if ws > a + budget // 2:
            spans.append((a, ws))
            a = ws
            while a < end and text[a].isspace():
                a += 1
        else:
            spans.append((a, cut))
            a = cut
    if a < end:
        spans.append((a, end))
    return spans


# ---------------------------------------------------------------------------------------
# The chunker
# ---------------------------------------------------------------------------------------

DEFAULT_SKIP_HEADINGS = frozenset(
    {"indice", "sommario", "bibliografia", "ringraziamenti", "abbreviazioni"}
)
_NUMBERING = re.compile(r"^(?:(?:[0-9]+(?:\.[0-9]+)*[.)]?|[ivxlcdm]+[.)]|[a-z][.)])\s*)+")


def normalize_heading(text: str) -> str:
    """A heading as skip_headings matches it: plain, lower case, no accents, no leading
    numbering ("1.", "1.2", "IV.", "a)"), no surrounding punctuation."""
    t = unicodedata.normalize("NFKD", plain_text(text).lower())
    t = "".join(ch for ch in t if not unicodedata.combining(ch)).strip()
    t = _NUMBERING.sub("", t)
    t = re.sub(r"^[\W_]+|[\W_]+$", "", t)
    return re.sub(r"\s+", " ", t)


class MarkdownConfig(ChunkerConfig):
    """Character limits, heading context and the sections to leave out (SPEC C43)."""

    max_chars: int = Field(1200, ge=1)
    min_chars: int = Field(80, ge=0)
    target_chars: int = Field(800, ge=1)
    context_depth: int = Field(3, ge=0, le=6)
    merge_short: bool = True
    atomic_types: tuple[str, ...] = ("code", "html", "list", "math", "table")
    skip_headings: tuple[str, ...] = tuple(sorted(DEFAULT_SKIP_HEADINGS))
    skip_pre_heading: bool = False
    fail_on_broken_fence: bool = True
    fail_on_content_loss: bool = False

    @model_validator(mode="after")
    def _ordered_limits(self) -> MarkdownConfig:
        if not self.min_chars <= self.target_chars <= self.max_chars:
            raise ValueError("markdown limits need min_chars <= target_chars <= max_chars")
        return self


class _Unit:
    """A packable span: a block, or a fragment of a split paragraph."""

    __slots__ = ("a", "b", "kind", "block", "atomic")

    def __init__(self, a: int, b: int, kind: str, block: int, atomic: bool) -> None:
        self.a = a
        self.b = b
        self.kind = kind
        self.block = block
        self.atomic = atomic


class _Chunk:
    __slots__ = ("units", "path", "sparse", "overflow")

    def __init__(self, units: list[_Unit], path: tuple[tuple[int, str], ...]) -> None:
        self.units = units
        self.path = path
        self.sparse = False
        self.overflow = False

    @property
    def a(self) -> int:
        return self.units[0].a

    @property
    def b(self) -> int:
        return self.units[-1].b

    def body(self) -> list[_Unit]:
        return [u for u in self.units if u.kind != "heading"]


class ParsedMarkdown:
    """A parsed document: lines, offsets, blocks and the sections they fall into."""

    def __init__(self, text: str, config: MarkdownConfig) -> None:
        self.text = text
        self.lines, self.blocks = scan_blocks(text)
        self.line_starts = [0, *accumulate(len(x) + 1 for x in self.lines)]
        self.sections, self.skipped = _sections(self.blocks, config)

    def off(self, line: int) -> int:
        return self.line_starts[line]

    def end_off(self, end_line: int) -> int:
        """Offset just past the last character of line ``end_line - 1``."""
        return self.line_starts[end_line] - 1

    def line_of(self, offset: int) -> int:
        """0-based line holding ``offset``."""
        return bisect_right(self.line_starts, offset) - 1


def _sections(
    blocks: list[Block], config: MarkdownConfig
) -> tuple[list[tuple[tuple[tuple[int, str], ...], list[int]]], list[tuple[int, int]]]:
    """Group block indices into sections (a heading and the blocks up to the next one),
    each with its header path, and list the skipped line ranges (0-based, half-open)."""
    skip = {normalize_heading(s) for s in config.skip_headings}
    skip.discard("")
    stack: list[tuple[int, str]] = []
    sections: list[tuple[tuple[tuple[int, str], ...], list[int]]] = []
    skipped: list[tuple[int, int]] = []
    current: list[int] = []
    path: tuple[tuple[int, str], ...] = ()
    skip_level = 0  # > 0 while inside a skipped subtree
    skipping_pre = config.skip_pre_heading
    for k, block in enumerate(blocks):
        if block.kind == "heading":
            if skip_level and block.level <= skip_level:
                skip_level = 0
            if not skip_level:
                title = plain_text(block.text)
                if skip and normalize_heading(title) in skip:
                    skip_level = block.level
            skipping_pre = False
            if skip_level:
                skipped.append((block.start, block.end))
                continue
            if current:
                sections.append((path, current))
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            stack.append((block.level, plain_text(block.text)))
            path = tuple(stack)
            current = [k]
            continue
        if skip_level or skipping_pre:
            skipped.append((block.start, block.end))
            continue
        current.append(k)
    if current:
        sections.append((path, current))
    return sections, skipped


class MarkdownChunker(BaseChunker):
    id = "markdown"
    version = 1
    summary = "Markdown sections packed to character limits, tables/code/lists kept whole"
    media_types = frozenset({MARKDOWN})
    builtin = True
    Config = MarkdownConfig
    check_names = (
        "fences_closed",
        "no_heading_only_chunk",
        "sizes_within_bounds",
        "source_lines_covered",
        "chunk_ids_unique",
    )
    check_descriptions = {
        "fences_closed": "No chunk holds a code fence that is opened and never closed.",
        "no_heading_only_chunk": "No chunk holds only a heading.",
        "sizes_within_bounds": "Chunk sizes stay within the configured character bounds.",
        "source_lines_covered": "Every significant source line is in a chunk (skipped sections exempt).",
        "chunk_ids_unique": "Chunk ids are unique and run chk_000001, chk_000002, ...",
    }

    config: MarkdownConfig

    # -- chunking --------------------------------------------------------------------
    def chunk(
        self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]
    ) -> tuple[PageChunks, ...]:
        if media_type != MARKDOWN or not pages:
            return ()
        page = pages[0]
        if page.status != "read" or not page.text or not page.text.strip():
            return ()
        return (PageChunks(page=page.page, pieces=tuple(self.pieces(page.text))),)

    def pieces(self, text: str) -> list[ChunkPiece]:
        """The pieces of one Markdown text, in order."""
        layout = ParsedMarkdown(text, self.config)
        chunks = self.pack(layout)
        return self.to_pieces(layout, chunks)

    def pack(self, layout: ParsedMarkdown) -> list[_Chunk]:
        cfg = self.config
        atomic_types = frozenset(cfg.atomic_types)
        blocks = layout.blocks
        out: list[_Chunk] = []
        carried: list[_Unit] = []  # headings of empty sections, travelling to a subsection
        sections = layout.sections
        for si, (path, idxs) in enumerate(sections):
            units = carried + [
                _Unit(
                    layout.off(blocks[k].start),
                    layout.end_off(blocks[k].end),
                    blocks[k].kind,
                    k,
                    blocks[k].kind in atomic_types,
                )
                for k in idxs
            ]
            carried = []
            if si + 1 < len(sections) and all(u.kind == "heading" for u in units):
                nxt_path, nxt = sections[si + 1]
                first = blocks[nxt[0]]
                if (
                    first.kind == "heading"
                    and len(nxt_path) > len(path)
                    and nxt_path[: len(path)] == path
                    and not layout.text[units[-1].b : layout.off(first.start)].strip()
                ):
                    carried = units
                    continue
            out.extend(self._pack_section(layout, path, units))
        return out

    def _pack_section(
        self, layout: ParsedMarkdown, path: tuple[tuple[int, str], ...], units: list[_Unit]
    ) -> list[_Chunk]:
        cfg = self.config
        text = layout.text
        max_c, target = cfg.max_chars, cfg.target_chars
        chunks: list[_Chunk] = []
        cur: list[_Unit] = []
        todo = list(reversed(units))
        while todo:
            u = todo.pop()
            if u.kind == "blockquote" and u.b - u.a > max_c:
                parts = _quote_parts(text, u)
                if len(parts) > 1:
                    todo.extend(reversed(parts))
                    continue
            if not cur:
                if u.kind == "paragraph" and u.b - u.a > max_c:
                    todo.extend(reversed(self._split(text, u, max_c)))
                    continue
                cur = [u]
                continue
            a = cur[0].a
            cur_len = cur[-1].b - a
            new_len = u.b - a
            headings_only = all(x.kind == "heading" for x in cur)
            if new_len <= max_c and (cur_len < target or headings_only):
                cur.append(u)
                continue
            if headings_only:
                if u.kind == "paragraph" and u.b - u.a > 0:
                    budget = max_c - (u.a - a)
                    if budget >= max(cfg.min_chars, 1):
                        todo.extend(reversed(self._split(text, u, max_c, budget)))
                        continue
                    chunks.append(_Chunk(cur, path))
                    cur = []
                    todo.append(u)
                    continue
                cur.append(u)  # a heading travels with the oversized block it titles
                continue
            chunks.append(_Chunk(cur, path))
            cur = []
            todo.append(u)
        if cur:
            chunks.append(_Chunk(cur, path))
        self._merge_short(chunks)
        for c in chunks:
            size = c.b - c.a
            body = c.body()
            if size > max_c:
                c.overflow = True
            if size < cfg.min_chars or not body:
                c.sparse = True
        return chunks

    def _split(self, text: str, u: _Unit, budget: int, first: int | None = None) -> list[_Unit]:
        """Sentence fragments of a paragraph, each within ``budget`` (the first within
        ``first``); a sentence over the budget is split at whitespace."""
        spans = sentence_spans(text, u.a, u.b)
        out: list[_Unit] = []
        for a, b in spans:
            limit = first if (first is not None and not out) else budget
            for fa, fb in hard_split(text, a, b, limit) if b - a > limit else ((a, b),):
                out.append(_Unit(fa, fb, "fragment", u.block, False))
                limit = budget
        return out

    def _merge_short(self, chunks: list[_Chunk]) -> None:
        """A chunk under min_chars joins its previous or next neighbour in the section
        when the result stays within max_chars (never across a section)."""
        cfg = self.config
        if not cfg.merge_short:
            return
        k = 0
        while k < len(chunks):
            c = chunks[k]
            if c.b - c.a >= cfg.min_chars or len(chunks) == 1:
                k += 1
                continue
            if k > 0 and c.b - chunks[k - 1].a <= cfg.max_chars:
                chunks[k - 1].units.extend(c.units)
                del chunks[k]
                continue
            if k + 1 < len(chunks) and chunks[k + 1].b - c.a <= cfg.max_chars:
                c.units.extend(chunks[k + 1].units)
                del chunks[k + 1]
                continue
            k += 1

    # -- pieces ----------------------------------------------------------------------
    def to_pieces(self, layout: ParsedMarkdown, chunks: list[_Chunk]) -> list[ChunkPiece]:
        cfg = self.config
        text = layout.text
        blocks = layout.blocks
        atomic_types = frozenset(cfg.atomic_types)
        depth = cfg.context_depth
        total = len(chunks)
        pieces = []
        for n, c in enumerate(chunks, start=1):
            a, b = c.a, c.b
            body = text[a:b]
            kinds = {blocks[u.block].kind for u in c.units}
            body_units = c.body()
            body_blocks = {u.block for u in body_units}
            single = len(body_blocks) == 1 and all(u.kind != "fragment" for u in body_units)
            if c.overflow:
                ctype = "overflow"
            elif single and body_units[0].kind in atomic_types:
                ctype = "atomic_block"
            else:
                ctype = "section_fragment"
            titles = tuple(t for _, t in c.path)
            shown = [t for t in titles[-depth:] if t] if depth else []
            prefix = " > ".join(shown)
            block_ids = []
            for u in c.units:
                bid = f"blk_{u.block + 1:04d}"
                if not block_ids or block_ids[-1] != bid:
                    block_ids.append(bid)
            meta = {
                "chunk_id": f"chk_{n:06d}",
                "chunk_index": n,
                "start_line": layout.line_of(a) + 1,
                "end_line": layout.line_of(b - 1) + 1,
                "start_char": a,
                "end_char": b,
                "chars": b - a,
                "header_levels": [lvl for lvl, _ in c.path],
                "header_path": [{"level": lvl, "text": t} for lvl, t in c.path],
                "block_ids": block_ids,
                "block_kinds": sorted(kinds),
                "flags": {
                    "has_code": "code" in kinds,
                    "has_table": "table" in kinds,
                    "has_math": "math" in kinds,
                    "is_overflow": c.overflow,
                    "is_sparse": c.sparse,
                },
                "neighbors": {
                    "previous_chunk_id": f"chk_{n - 1:06d}" if n > 1 else None,
                    "next_chunk_id": f"chk_{n + 1:06d}" if n < total else None,
                },
                "assets": [],
            }
            pieces.append(
                ChunkPiece(
                    text=body,
                    bbox_reason="no_geometry",
                    header_path=titles,
                    content_type=ctype,
                    embed_text=f"{prefix}\n\n{body}" if prefix else body,
                    meta=meta,
                )
            )
        return pieces

    # -- validation ------------------------------------------------------------------
    def check(
        self,
        content: bytes,
        media_type: str,
        pages: tuple[PageOutput, ...],
        answer: tuple[PageChunks, ...],
    ) -> tuple[CheckOutcome, ...]:
        """The validator of SPEC C56–C60 on this chunker's answer for one document."""
        if media_type != MARKDOWN or not answer:
            return tuple(
                CheckOutcome(name=name, passed=True, description="markdown@1 did not claim this document")
                for name in self.check_names
            )
        pieces = [p for pc in answer for p in pc.pieces]
        text = pages[0].text if pages and pages[0].text else ""
        return validate(text, pieces, self.config)

    def metrics(self, answer: tuple[PageChunks, ...]) -> dict[str, Any]:
        """SPEC C61: totals, averages, overflow/sparse/atomic counts and size compliance."""
        pieces = [p for pc in answer for p in pc.pieces]
        return chunk_metrics(pieces, self.config)


def _quote_parts(text: str, u: _Unit) -> list[_Unit]:
    """A block quote cut at its own blank (``>``-only) lines outside fences, into parts
    that are block quotes themselves; kind ``quote_part`` so they are not cut again."""
    parts: list[_Unit] = []
    start = pos = u.a
    fence = ""
    for line in text[u.a : u.b].split("\n"):
        inner = line.lstrip(" \t")
        while inner.startswith(">"):
            inner = inner[1:].lstrip(" \t")
        if fence:
            if inner.startswith(fence) and not inner.lstrip(fence[0]).strip(" \t"):
                fence = ""
        elif not inner.strip(" \t"):
            if pos > start and text[start:pos].strip(" \t\n>"):
                parts.append(_Unit(start, pos - 1, "quote_part", u.block, False))
            start = pos + len(line) + 1
        else:
            m = _FENCE.match(inner)
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence = m.group(1)
        pos += len(line) + 1
    if start < u.b and text[start : u.b].strip(" \t\n>"):
        parts.append(_Unit(start, u.b, "quote_part", u.block, False))
    return parts


# ---------------------------------------------------------------------------------------
# Validator and metrics
# ---------------------------------------------------------------------------------------


def validate(
    text: str, pieces: Sequence[ChunkPiece], config: MarkdownConfig
) -> tuple[CheckOutcome, ...]:
    """SPEC C56–C60: fences closed, no heading-only chunk, sizes, coverage, unique ids.

    Each chunk's Markdown is scanned on its own, so a chunk that cuts a fence or holds
    only a heading is found from its text, not from what the chunker says about it."""
    cfg = config
    broken: list[str] = []
    heading_only: list[str] = []
    sparse_heading_only: list[str] = []
    too_big: list[str] = []
    too_small: list[str] = []
    bad_overflow: list[str] = []
    ids: list[str] = []
    for p in pieces:
        m = p.meta
        cid = str(m.get("chunk_id"))
        ids.append(cid)
        flags = m.get("flags") or {}
        body = p.text or ""
        lines, blocks = scan_blocks(body)
        for b in blocks:
            if b.kind == "code" and b.broken:
                broken.append(f"{cid}: {lines[b.start].strip()[:40]!r} is never closed")
        content = [b for b in blocks if b.kind != "heading"]
        if blocks and not content:
            (sparse_heading_only if flags.get("is_sparse") else heading_only).append(cid)
        size = len(body)
        if size > cfg.max_chars:
            if not flags.get("is_overflow"):
                too_big.append(cid)
            elif len(content) != 1:
                bad_overflow.append(cid)
        if size < cfg.min_chars and not flags.get("is_sparse"):
            too_small.append(cid)

    missing, mismatched = coverage_gaps(text, pieces, cfg)
    dupes = sorted({i for i in ids if ids.count(i) > 1}) if len(set(ids)) != len(ids) else []
    sequential = ids == [f"chk_{k:06d}" for k in range(1, len(ids) + 1)]
    return (
        CheckOutcome(
            name="fences_closed",
            passed=not broken,
            severity="error" if cfg.fail_on_broken_fence else "warn",
            description="no chunk holds a code fence that is opened and never closed",
            metadata={"broken": broken[:20], "count": len(broken)},
        ),
        CheckOutcome(
            name="no_heading_only_chunk",
            passed=not heading_only and not sparse_heading_only,
            severity="error" if heading_only else "warn",
            description="no chunk holds only a heading (one flagged is_sparse is a warning)",
            metadata={"unflagged": heading_only[:20], "flagged_sparse": sparse_heading_only[:20]},
        ),
        CheckOutcome(
            name="sizes_within_bounds",
            passed=not too_big and not bad_overflow and not too_small,
            severity="error" if (too_big or bad_overflow) else "warn",
            description=(
                f"every chunk within {cfg.max_chars} characters unless it is one block "
                f"flagged is_overflow; chunks under {cfg.min_chars} are flagged is_sparse"
            ),
            metadata={
                "over_max_unflagged": too_big[:20],
                "overflow_not_single_block": bad_overflow[:20],
                "under_min_unflagged": too_small[:20],
            },
        ),
        CheckOutcome(
            name="source_lines_covered",
            passed=not missing and not mismatched,
            severity="error" if (cfg.fail_on_content_loss or mismatched) else "warn",
            description="every significant source line is in a chunk (skipped sections exempt)",
            metadata={
                "missing_lines": missing[:50],
                "missing_count": len(missing),
                "chunks_not_matching_source": mismatched[:20],
            },
        ),
        CheckOutcome(
            name="chunk_ids_unique",
            passed=not dupes and sequential,
            description="chunk ids are unique and run chk_000001, chk_000002, ...",
            metadata={"duplicates": dupes[:20], "sequential": sequential},
        ),
    )


def coverage_gaps(
    text: str, pieces: Sequence[ChunkPiece], config: MarkdownConfig
) -> tuple[list[int], list[str]]:
    """(1-based source lines with content that no chunk covers and no skip explains,
    chunks whose text is not the source at their stated offsets). A line is content when
    it holds more than whitespace and block-quote markers; all its non-blank characters
    must lie in some chunk."""
    layout = ParsedMarkdown(text, config)
    spans = []
    mismatched = []
    for p in pieces:
        m = p.meta
        a, b = m.get("start_char"), m.get("end_char")
        if not isinstance(a, int) or not isinstance(b, int) or text[a:b] != p.text:
            mismatched.append(str(m.get("chunk_id")))
            continue
        spans.append((a, b))
    for s, e in layout.skipped:
        spans.append((layout.off(s), layout.end_off(e)))
    spans.sort()
    merged: list[list[int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            if b > merged[-1][1]:
                merged[-1][1] = b
        else:
            merged.append([a, b])
    missing = []
    starts = [m[0] for m in merged]
    for k, line in enumerate(layout.lines):
        if not line.strip(" \t>"):  # blank, or only block-quote markers
            continue
        base = layout.off(k)
        pos = base
        end = base + len(line)
        # every non-whitespace character of the line lies in some span
        while pos < end:
            if text[pos].isspace():
                pos += 1
                continue
            j = bisect_right(starts, pos) - 1
            if j < 0 or merged[j][1] <= pos:
                missing.append(k + 1)
                break
            pos = merged[j][1]
    return missing, mismatched


def chunk_metrics(pieces: Sequence[ChunkPiece], config: MarkdownConfig) -> dict[str, Any]:
    sizes = [len(p.text or "") for p in pieces]
    flags = [(p.meta.get("flags") or {}) for p in pieces]
    total = len(pieces)
    within = sum(1 for s in sizes if config.min_chars <= s <= config.max_chars)
    return {
        "total_chunks": total,
        "total_chars": sum(sizes),
        "avg_chars": round(sum(sizes) / total, 1) if total else 0.0,
        "min_chars_actual": min(sizes) if sizes else 0,
        "max_chars_actual": max(sizes) if sizes else 0,
        "overflow_count": sum(1 for f in flags if f.get("is_overflow")),
        "sparse_count": sum(1 for f in flags if f.get("is_sparse")),
        "atomic_count": sum(1 for p in pieces if p.content_type == "atomic_block"),
        "size_compliance": round(100.0 * within / total, 2) if total else 100.0,
    }
