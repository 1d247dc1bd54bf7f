"""The line scanner: one pass over a document's lines, producing its top-level blocks."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ingest_pipeline.chunkers.markdown.blocks import (
    _ATX,
    _BULLET,
    _FENCE,
    _HR,
    _HTML_KINDS,
    _MATH_LABEL_REV,
    _MAYBE_INTERRUPT,
    _ORDERED,
    _SETEXT,
    Block,
    _atx_text,
    _content_offset,
    _fill_gaps,
    _html_kind,
    _indent,
    _is_blank,
    _table_columns,
    _trim_blank,
)
from ingest_pipeline.chunkers.markdown.fallback import markdown_it_blocks


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


def scan_blocks(text: str) -> tuple[list[str], list[Block]]:
    """The lines of ``text`` and its top-level blocks, in order."""
    lines = text.split("\n")
    return lines, _Scanner(lines).scan()
