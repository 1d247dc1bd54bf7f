"""Headings to sections: each heading and the blocks up to the next, with its header path."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable
from itertools import accumulate

from ingest_pipeline.chunkers.markdown.blocks import Block
from ingest_pipeline.chunkers.markdown.scanner import scan_blocks
from ingest_pipeline.chunkers.markdown.text import plain_text

DEFAULT_SKIP_HEADINGS = frozenset({"indice", "sommario", "bibliografia", "ringraziamenti", "abbreviazioni"})
_NUMBERING = re.compile(r"^(?:(?:[0-9]+(?:\.[0-9]+)*[.)]?|[ivxlcdm]+[.)]|[a-z][.)])\s*)+")


def normalize_heading(text: str) -> str:
    """A heading as skip_headings matches it: plain, lower case, no accents, no leading
    numbering ("1.", "1.2", "IV.", "a)"), no surrounding punctuation."""
    t = unicodedata.normalize("NFKD", plain_text(text).lower())
    t = "".join(ch for ch in t if not unicodedata.combining(ch)).strip()
    t = _NUMBERING.sub("", t)
    t = re.sub(r"^[\W_]+|[\W_]+$", "", t)
    return re.sub(r"\s+", " ", t)


# a section: its header path as (level, title) pairs, and the indices of its blocks
Section = tuple[tuple[tuple[int, str], ...], list[int]]


class ParsedMarkdown:
    """A parsed document: lines, offsets, blocks and the sections they fall into."""

    def __init__(self, text: str, skip_headings: Iterable[str] = (), skip_pre_heading: bool = False) -> None:
        self.text = text
        self.lines, self.blocks = scan_blocks(text)
        self.line_starts = [0, *accumulate(len(x) + 1 for x in self.lines)]
        self.sections, self.skipped = build_sections(self.blocks, skip_headings, skip_pre_heading)

    def off(self, line: int) -> int:
        return self.line_starts[line]

    def end_off(self, end_line: int) -> int:
        """Offset just past the last character of line ``end_line - 1``."""
        return self.line_starts[end_line] - 1

    def line_of(self, offset: int) -> int:
        """0-based line holding ``offset``."""
        return bisect_right(self.line_starts, offset) - 1


def build_sections(
    blocks: list[Block], skip_headings: Iterable[str] = (), skip_pre_heading: bool = False
) -> tuple[list[Section], list[tuple[int, int]]]:
    """Group block indices into sections (a heading and the blocks up to the next one),
    each with its header path as (level, title) pairs, and list the skipped line ranges
    (0-based, half-open): sections under a heading in ``skip_headings`` (as
    normalize_heading matches it) and, with ``skip_pre_heading``, what precedes the first
    heading."""
    skip = {normalize_heading(s) for s in skip_headings}
    skip.discard("")
    stack: list[tuple[int, str]] = []
    sections: list[Section] = []
    skipped: list[tuple[int, int]] = []
    current: list[int] = []
    path: tuple[tuple[int, str], ...] = ()
    skip_level = 0  # > 0 while inside a skipped subtree
    skipping_pre = skip_pre_heading
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
