"""Keeping chunks within the embedder's token limit: split at token-aware boundaries.

A piece whose embedding text is over the limit is cut into parts that each fit, at the
last line break, sentence end or space inside the token window; table pieces are cut
between rows and every part repeats the header rows. Parts keep the page, box, reason
and heading path of the piece, and say which part they are in ``meta``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from ingest_pipeline.contract import ChunkPiece, Layout, TableLayout

_BREAKS = (re.compile(r"\n\s*\n"), re.compile(r"\n"), re.compile(r"[.!?;:](?=\s)"), re.compile(r"\s"))

Offsets = Callable[[str], list[tuple[int, int]]]


def _prefix(piece: ChunkPiece) -> str:
    if piece.embed_text and piece.text and piece.embed_text.endswith(piece.text):
        return piece.embed_text[: len(piece.embed_text) - len(piece.text)]
    return ""


def split_to_limit(piece: ChunkPiece, offsets: Offsets, max_tokens: int) -> list[ChunkPiece]:
    """The piece itself when it fits, else parts that each fit (images pass through)."""
    if piece.is_image or not piece.text:
        return [piece]
    prefix = _prefix(piece)
    budget = max_tokens - 2 - (len(offsets(prefix)) if prefix else 0)  # [CLS] and [SEP]
    if budget < 16:
        budget = max_tokens - 2
        prefix = ""
    spans = offsets(piece.text)
    if len(spans) <= budget:
        return [piece]
    if piece.layout is not None and piece.layout.table is not None and piece.layout.role == "table":
        texts = _split_table_text(piece, offsets, budget)
    else:
        texts = _split_text(piece.text, spans, budget)
    parts = []
    for number, (text, rows) in enumerate(texts, start=1):
        layout = _table_part(piece.layout, rows) if rows is not None else piece.layout
        meta = {**piece.meta, "token_split": {"part": number, "of": len(texts)}}
        parts.append(replace(piece, text=text, embed_text=(prefix + text) if prefix else None,
                             layout=layout, meta=meta))
    return parts


def _split_text(text: str, spans: list[tuple[int, int]], budget: int) -> list[tuple[str, None]]:
    parts = []
    start_token = 0
    while start_token < len(spans):
        end_token = min(start_token + budget, len(spans))
        start_char = spans[start_token][0]
        end_char = spans[end_token - 1][1]
        if end_token < len(spans):
            end_char = _best_break(text, start_char, end_char)
        piece_text = text[start_char:end_char].strip()
        if piece_text:
            parts.append((piece_text, None))
        next_token = end_token
        while next_token > start_token + 1 and spans[next_token - 1][0] >= end_char:
            next_token -= 1
        start_token = max(next_token, start_token + 1)
    return parts


def _best_break(text: str, start: int, end: int) -> int:
    """The last natural break in the second half of [start, end), else ``end``."""
    floor = start + (end - start) // 2
    window = text[floor:end]
    for pattern in _BREAKS:
        found = [m.end() for m in pattern.finditer(window)]
        if found:
            return floor + found[-1]
    return end


def _split_table_text(piece: ChunkPiece, offsets: Offsets, budget: int) -> list[tuple[str, list[int] | None]]:
    lines = piece.text.split("\n")
    header_rows = max(piece.layout.table.header_rows, 1) if piece.layout.table.rows == len(lines) else 1
    header = lines[:header_rows]
    header_tokens = len(offsets("\n".join(header)))
    if header_tokens >= budget // 2:  # a header too large to repeat: cut the text as prose
        return [(t, None) for t, _ in _split_text(piece.text, offsets(piece.text), budget)]
    parts: list[tuple[str, list[int] | None]] = []
    rows: list[int] = []
    used = header_tokens
    for index in range(header_rows, len(lines)):
        cost = len(offsets(lines[index])) + 1
        if rows and used + cost > budget:
            parts.append(("\n".join(header + [lines[i] for i in rows]), list(range(header_rows)) + rows))
            rows, used = [], header_tokens
        if header_tokens + cost > budget:  # one row alone is too long: cut it as prose
            for text, _ in _split_text(lines[index], offsets(lines[index]), budget - header_tokens):
                parts.append(("\n".join(header + [text]), None))
            continue
        rows.append(index)
        used += cost
    if rows:
        parts.append(("\n".join(header + [lines[i] for i in rows]), list(range(header_rows)) + rows))
    return parts


def _table_part(layout: Layout | None, rows: list[int]) -> Layout | None:
    if layout is None or layout.table is None:
        return layout
    keep = set(rows)
    cells = tuple(c for c in layout.table.cells if c.row in keep)
    return Layout(role=layout.role, table=TableLayout(rows=layout.table.rows, cols=layout.table.cols,
                                                       cells=cells, header_rows=layout.table.header_rows))
