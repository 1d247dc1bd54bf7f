"""headings@1 (opt-in): one chunk per Markdown section, whole, with its ancestor headings.

The sections come from markdown@1's block scanner and section builder, so ATX and setext
headings count and heading syntax inside code blocks, lists and block quotes does not.
"""

from __future__ import annotations

from bisect import bisect_right

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.base import BaseChunker, outside_media_types
from ingest_pipeline.chunkers.markdown.sections import ParsedMarkdown
from ingest_pipeline.contract import ChunkPiece, PageChunks, PageOutput


class HeadingsChunker(BaseChunker):
    id = "headings"
    version = 1
    summary = "one chunk per Markdown section, no size limit, ancestor headings embedded"
    media_types = frozenset({mt.MARKDOWN})
    disclaims = outside_media_types  # its own fast answer: nothing outside media_types
    builtin = True
    opt_in = True

    def chunk(self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]) -> tuple[PageChunks, ...]:
        if media_type != mt.MARKDOWN or not pages:
            return ()
        page = pages[0]
        if page.status != "read" or not page.text or not page.text.strip():
            return ()
        return (PageChunks(page=page.page, pieces=tuple(self.pieces(page.text))),)

    def pieces(self, text: str) -> list[ChunkPiece]:
        parsed = ParsedMarkdown(text)  # nothing skipped: every section is a chunk
        blocks = parsed.blocks
        starts = parsed.line_starts
        # (path, first line, end line, whether it holds more than its heading)
        sections = [
            (
                path,
                blocks[idxs[0]].start,
                blocks[idxs[-1]].end,
                any(blocks[k].kind != "heading" for k in idxs),
            )
            for path, idxs in parsed.sections
        ]

        pieces = []
        carried_from: int | None = None
        for k, (path, a, b, has_body) in enumerate(sections):
            start = a if carried_from is None else carried_from
            if not has_body and k + 1 < len(sections) and path:
                nxt_path = sections[k + 1][0]
                if len(nxt_path) > len(path) and nxt_path[: len(path)] == path:
                    carried_from = start  # a heading with only subheadings travels with them
                    continue
            carried_from = None
            a_off, b_off = starts[start], starts[b] - 1
            body = text[a_off:b_off]
            titles = [t for _, t in path]
            prefix = " > ".join(t for t in titles if t)
            pieces.append(
                ChunkPiece(
                    text=body,
                    bbox_reason="no_geometry",
                    header_path=tuple(titles),
                    content_type="section",
                    embed_text=f"{prefix}\n\n{body}" if prefix else body,
                    meta={
                        "headings": titles,
                        "header_levels": [lvl for lvl, _ in path],
                        "start_line": bisect_right(starts, a_off),
                        "end_line": bisect_right(starts, b_off - 1),
                        "start_char": a_off,
                        "end_char": b_off,
                        "chars": b_off - a_off,
                    },
                )
            )
        return pieces
