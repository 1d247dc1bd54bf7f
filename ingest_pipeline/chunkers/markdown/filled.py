"""markdown@2: markdown@1 with the seed's two packing rules it left out (SPEC C48, C50).

- A paragraph that would pass ``max_chars`` while the chunk is still under
  ``target_chars`` is split at its last sentence boundary that fits, when both parts keep
  ``min_chars``: the first fills the chunk, the rest starts the next. markdown@1 moves the
  paragraph whole, which leaves the chunk short of its target.
- A heading with no body joins the next chunk. Where the two are adjacent this is
  markdown@1's carry (the heading becomes the top of that chunk's text); where a skipped
  section lies between (``# Title``, a skipped ``## Indice``, ``## Capitolo 1``), the chunk
  text stays one contiguous slice of the source, so the heading joins as the chunk's
  ``meta.joined_heading`` (its offsets and text) and ``meta.left_out``, and the heading
  path, which already holds it, leads the embedding text. markdown@1 serves it as a
  chunk of its own, flagged sparse.

- Each chunk lists the blocks it holds as records (SPEC C40): id ``blk_NNNN``, kind, the
  block's original Markdown (``content``) and its ``plain_text``, whether its kind is
  atomic, its 1-based ``start_line``/``end_line``, the section's ``header_path`` and its
  ``chars``. markdown@1 lists their ids and kinds only.

A separate version because its boundaries differ from markdown@1's on the same file: the
goldens pin both, and a profile moves to it by naming it.
"""

from __future__ import annotations

from ingest_pipeline.chunkers.markdown.chunker import MarkdownChunker, _Chunk, _Unit
from ingest_pipeline.chunkers.markdown.sections import ParsedMarkdown
from ingest_pipeline.chunkers.markdown.text import plain_text, sentence_spans
from ingest_pipeline.contract import ChunkPiece


class MarkdownFilledChunker(MarkdownChunker):
    id = "markdown"
    version = 2
    summary = (
        "as markdown@1, and an overflowing paragraph fills the chunk to a sentence boundary; "
        "a heading with no body joins the next chunk"
    )
    opt_in = True

    def _fills(self, text: str, u: _Unit, a: int, cur_len: int, todo: list[_Unit]) -> bool:
        cfg = self.config
        if u.kind != "paragraph" or cur_len >= cfg.target_chars:
            return False
        budget = cfg.max_chars - (u.a - a)
        spans = sentence_spans(text, u.a, u.b)
        fit = [k for k, (_, end) in enumerate(spans[:-1]) if end - u.a <= budget]
        if not fit:
            return False
        cut, rest = spans[fit[-1]][1], spans[fit[-1] + 1][0]
        if cut - u.a < cfg.min_chars or u.b - rest < cfg.min_chars:
            return False
        todo.append(_Unit(rest, u.b, "paragraph", u.block, False))  # may fill the next chunk
        todo.append(_Unit(u.a, cut, "fragment", u.block, False))
        return True

    def _heading_only(self, layout: ParsedMarkdown, path, units: list[_Unit], following) -> str | None:
        carry = super()._heading_only(layout, path, units, following)
        if carry:
            return carry
        nxt_path, nxt = following
        first = layout.blocks[nxt[0]]
        between = (units[-1].b, layout.off(first.start))
        if (
            len(nxt_path) > len(path)
            and nxt_path[: len(path)] == path  # the heading path of what follows holds it
            and _only_skipped(layout, *between)
        ):
            return "join"
        return None

    def to_pieces(self, layout: ParsedMarkdown, chunks: list[_Chunk]) -> list[ChunkPiece]:
        pieces = super().to_pieces(layout, chunks)
        atomic = frozenset(self.config.atomic_types)
        for chunk, piece in zip(chunks, pieces):
            held = dict.fromkeys(u.block for u in chunk.units)  # in order, each once
            piece.meta["blocks"] = [_block_record(layout, i, chunk.path, atomic) for i in held]
            if chunk.joined:
                a, b = chunk.joined[0].a, chunk.joined[-1].b
                piece.meta["joined_heading"] = {"start_char": a, "end_char": b, "text": layout.text[a:b]}
                piece.meta["left_out"] = [
                    {"role": "heading", "text": layout.text[u.a : u.b]} for u in chunk.joined
                ]
        return pieces


def _block_record(layout: ParsedMarkdown, index: int, path, atomic: frozenset[str]) -> dict:
    """One block as the chunk that holds it lists it."""
    block = layout.blocks[index]
    content = layout.text[layout.off(block.start) : layout.end_off(block.end)]
    return {
        "id": f"blk_{index + 1:04d}",
        "kind": block.kind,
        "content": content,
        "plain_text": _plain(block, content),
        "atomic": block.kind in atomic,
        "start_line": block.start + 1,
        "end_line": block.end,
        "header_path": [{"level": level, "text": text} for level, text in path],
        "chars": len(content),
    }


def _plain(block, content: str) -> str:
    """A block's text without its Markdown: a heading's words, code without its fences,
    prose line by line without inline syntax; tables, math and HTML as written."""
    if block.kind == "heading":
        return plain_text(block.text)
    if block.kind == "code":
        lines = content.splitlines()
        fenced = lines and lines[0].lstrip().startswith(("```", "~~~"))
        return "\n".join(lines[1:-1] if fenced and len(lines) > 1 else lines)
    if block.kind in ("table", "math", "html"):
        return content
    return "\n".join(plain_text(line) for line in content.splitlines())


def _only_skipped(layout: ParsedMarkdown, a: int, b: int) -> bool:
    """Whether every character of ``text[a:b]`` that is not whitespace lies in a skipped
    section."""
    pos = a
    for start, end in sorted((layout.off(s), layout.end_off(e)) for s, e in layout.skipped):
        if end <= pos:
            continue
        if start >= b:
            break
        if layout.text[pos : min(start, b)].strip():
            return False
        pos = end
        if pos >= b:
            return True
    return not layout.text[pos:b].strip()
