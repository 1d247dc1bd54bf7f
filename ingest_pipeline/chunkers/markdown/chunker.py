"""markdown@1's packing: sections into chunks within character limits, chunks into pieces."""

from __future__ import annotations

from typing import Any

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.base import BaseChunker, outside_media_types
from ingest_pipeline.chunkers.markdown.blocks import _FENCE
from ingest_pipeline.chunkers.markdown.config import MarkdownConfig
from ingest_pipeline.chunkers.markdown.sections import ParsedMarkdown
from ingest_pipeline.chunkers.markdown.text import hard_split, sentence_spans
from ingest_pipeline.chunkers.markdown.validation import chunk_metrics, validate
from ingest_pipeline.contract import CheckOutcome, ChunkPiece, PageChunks, PageOutput

MARKDOWN = mt.MARKDOWN


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
    __slots__ = ("units", "path", "sparse", "overflow", "joined")

    def __init__(self, units: list[_Unit], path: tuple[tuple[int, str], ...]) -> None:
        self.units = units
        self.path = path
        self.sparse = False
        self.overflow = False
        self.joined: list[_Unit] = []  # headings with no body that joined it across skipped text

    @property
    def a(self) -> int:
        return self.units[0].a

    @property
    def b(self) -> int:
        return self.units[-1].b

    def body(self) -> list[_Unit]:
        return [u for u in self.units if u.kind != "heading"]


class MarkdownChunker(BaseChunker):
    id = "markdown"
    version = 1
    summary = "Markdown sections packed to character limits, tables/code/lists kept whole"
    media_types = frozenset({MARKDOWN})
    disclaims = outside_media_types  # its own fast answer: nothing outside media_types
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
    def chunk(self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]) -> tuple[PageChunks, ...]:
        if media_type != MARKDOWN or not pages:
            return ()
        page = pages[0]
        if page.status != "read" or not page.text or not page.text.strip():
            return ()
        pieces = tuple(self.pieces(page.text))
        # text whose every section is skipped on purpose (skip_headings, skip_pre_heading)
        said = () if pieces else ("every section is skipped (skip_headings, skip_pre_heading)",)
        return (PageChunks(page=page.page, pieces=pieces, left_out=said),)

    def pieces(self, text: str) -> list[ChunkPiece]:
        """The pieces of one Markdown text, in order."""
        layout = ParsedMarkdown(text, self.config.skip_headings, self.config.skip_pre_heading)
        chunks = self.pack(layout)
        return self.to_pieces(layout, chunks)

    def pack(self, layout: ParsedMarkdown) -> list[_Chunk]:
        cfg = self.config
        atomic_types = frozenset(cfg.atomic_types)
        blocks = layout.blocks
        out: list[_Chunk] = []
        carried: list[_Unit] = []  # headings of empty sections, travelling to a subsection
        joined: list[_Unit] = []  # headings of empty sections joining the next chunk across a skip
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
                how = self._heading_only(layout, path, units, sections[si + 1])
                if how == "carry":
                    carried = units
                    continue
                if how == "join":
                    joined += units
                    continue
            made = self._pack_section(layout, path, units)
            if joined and made:
                made[0].joined, joined = joined, []
            out.extend(made)
        return out

    def _heading_only(self, layout: ParsedMarkdown, path, units: list[_Unit], following) -> str | None:
        """What becomes of a section holding only headings: ``carry`` them into the next
        section's first chunk (a subsection that follows with nothing between), ``join``
        that chunk across skipped text (a later version), or None: a chunk of their own,
        flagged sparse."""
        nxt_path, nxt = following
        first = layout.blocks[nxt[0]]
        if (
            first.kind == "heading"
            and len(nxt_path) > len(path)
            and nxt_path[: len(path)] == path
            and not layout.text[units[-1].b : layout.off(first.start)].strip()
        ):
            return "carry"
        return None

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
            if not headings_only and self._fills(text, u, a, cur_len, todo):
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

    def _fills(self, text: str, u: _Unit, a: int, cur_len: int, todo: list[_Unit]) -> bool:
        """Whether ``u``, which does not fit the chunk starting at ``a``, was split to fill
        it (its parts pushed on ``todo``); markdown@1 moves it whole to the next chunk."""
        return False

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
