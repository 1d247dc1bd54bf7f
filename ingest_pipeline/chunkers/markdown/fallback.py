"""markdown-it-py's top-level blocks, for the regions the line scanner cannot settle alone.

markdown-it-py is imported on first use, so loading the chunker does not load it."""

from __future__ import annotations

from typing import Any

from ingest_pipeline.chunkers.markdown.blocks import Block, _trim_blank

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
            block.broken = b - a < 2 or not (last.startswith(mark) and not last.lstrip(mark[0]).strip(" \t"))
        out.append(block)
    return out
