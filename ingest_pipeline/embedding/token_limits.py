"""Keeping chunks within the embedder's token limit: split at token-aware boundaries.

A piece whose embedding text is over the limit is cut into parts that each fit, at the
last line break, sentence end or space inside the token window. Tables keep their
structure whatever chunker cut them: a grid table (one line per row, as the grid
chunkers, pptx and pdf@3 write them) is cut between rows, every part repeats the header
rows, and each part's layout holds exactly the cells of its own lines, renumbered so its
rows read as the part's lines; a Markdown pipe table inside a text is cut between rows
and every part that starts inside it repeats its header and separator lines. Parts keep
the page, box, reason and heading path of the piece, say which part they are in
``meta["token_split"]``, and Markdown parts carry their own character and line offsets
(``relink`` then gives a document's Markdown chunks unique sequential ids and true
neighbours).

Tokenizing is windowed: no call sees more than a window of text (a few thousand
characters, at most ``MAX_WINDOW`` for text without spaces), so a 20 MB page costs
memory for one window, not for twenty million characters of token offsets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ingest_pipeline.contract import ChunkPiece, Layout, TableCell, TableLayout
from ingest_pipeline.embedding.token_counts import (
    MAX_WINDOW,
    Counter,
    Offsets,
    count_tokens,
    line_counts,
    over_limit,
    window_end,
)
from ingest_pipeline.runtime.budget import check as budget_check

_BREAKS = (re.compile(r"\n\s*\n"), re.compile(r"\n"), re.compile(r"[.!?;:](?=\s)"), re.compile(r"\s"))
_PIPE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_CHK = re.compile(r"^chk_\d+$")


def _spans_from(
    offsets: Offsets, text: str, start: int, end: int, need: int, per_token: float = 6.0
) -> list[tuple[int, int]]:
    """At least ``need`` + 1 token spans of text[start:end] from ``start`` (absolute
    positions), or all of them when there are fewer, tokenizing a growing window of about
    ``per_token`` characters a token (prose has about five; text of one-character tokens,
    nested quote markers, far fewer, and a window sized for prose would tokenize several
    times what is needed)."""
    size = max(256, int(need * per_token))  # grows when short
    spans: list[tuple[int, int]] = []
    pos = start
    while pos < end:
        stop = window_end(text, pos, min(end, pos + size)) if pos + size < end else end
        spans.extend((pos + a, pos + b) for a, b in offsets(text[pos:stop]))
        pos = stop
        if len(spans) > need:
            break
        size = min(size * 2, MAX_WINDOW)
    return spans


# ---------------------------------------------------------------- prose


def _best_break(text: str, start: int, end: int) -> int:
    """The last natural break in the second half of [start, end), else ``end``."""
    floor = start + (end - start) // 2
    window = text[floor:end]
    for pattern in _BREAKS:
        found = [m.end() for m in pattern.finditer(window)]
        if found:
            return floor + found[-1]
    return end


def _strip(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def _prose_ranges(text: str, start: int, end: int, offsets: Offsets, budget: int) -> list[tuple[int, int]]:
    """Ranges of text[start:end], stripped, each of at most ``budget`` tokens, cut at the
    best break inside each token window."""
    out: list[tuple[int, int]] = []
    pos, end = _strip(text, start, end)
    per_token = 6.0
    while pos < end:
        budget_check()
        spans = _spans_from(offsets, text, pos, end, budget, per_token)
        if len(spans) <= budget:
            out.append((pos, end))
            break
        window_end = spans[budget - 1][1]
        # the characters a token of the window just read took, with room: the next window's size
        per_token = min(6.0, max(1.5, 1.25 * (window_end - pos) / budget))
        cut = _best_break(text, spans[0][0], window_end)
        if cut <= pos:
            cut = window_end
        a, b = _strip(text, pos, cut)
        inside_word = cut < end and not text[cut - 1].isspace() and not text[cut].isspace()
        while inside_word and b > a:  # a cut word retokenizes
            own = offsets(text[a:b])
            if len(own) <= budget:
                break
            b = a + own[budget - 1][1]
        if b > a:
            out.append((a, b))
        pos, _ = _strip(text, max(cut, b), end)
    return out


def split_text(text: str, offsets: Offsets, budget: int) -> list[str]:
    """``text`` cut into stripped parts of at most ``budget`` tokens each, at natural breaks
    (windowed: memory bounded by the budget, not by the text)."""
    return [text[a:b] for a, b in _prose_ranges(text, 0, len(text), offsets, budget)]


# ---------------------------------------------------------------- table structure


@dataclass(frozen=True)
class _Line:
    start: int
    end: int  # without the newline


def _lines(text: str) -> list[_Line]:
    out, pos = [], 0
    for k, ch in enumerate(text):
        if ch == "\n":
            out.append(_Line(pos, k))
            pos = k + 1
    out.append(_Line(pos, len(text)))
    return out


def _grid_header_rows(piece: ChunkPiece, lines: list[_Line]) -> int | None:
    """Header rows when the piece is a grid table (one text line per row), else None."""
    table = piece.layout.table if piece.layout is not None else None
    if table is not None:
        return table.header_rows if table.rows == len(lines) else None
    role = piece.layout.role if piece.layout is not None else None
    if role == "table" or piece.content_type == "table":
        return 1 if len(lines) > 1 else 0  # a table without cells (pptx@1): its first row heads it
    return None


@dataclass
class _Atom:
    """A run of the piece text that stays whole in a part: a table row, a prose range."""

    start: int
    end: int
    tokens: int
    table: int | None = None  # which pipe table (or the grid) it belongs to
    header: bool = False
    row: int | None = None  # grid row (line) number


@dataclass
class _Part:
    atoms: list[_Atom]
    header_of: int | None = None  # the table whose header this part repeats


def _pipe_tables(text: str, lines: list[_Line]) -> list[tuple[int, int]]:
    """(first line, end line) of every Markdown pipe table: a header line, a separator
    line, then the rows up to the first line without a pipe."""
    found, k = [], 0
    while k + 1 < len(lines):
        head = text[lines[k].start : lines[k].end]
        sep = text[lines[k + 1].start : lines[k + 1].end]
        if "|" in head and "|" in sep and _PIPE_SEPARATOR.match(sep):
            end = k + 2
            while (
                end < len(lines)
                and "|" in text[lines[end].start : lines[end].end]
                and text[lines[end].start : lines[end].end].strip()
            ):
                end += 1
            found.append((k, end))
            k = end
        else:
            k += 1
    return found


def _atoms(
    piece: ChunkPiece, offsets: Offsets, budget: int, count: Counter | None = None
) -> tuple[list[_Atom], dict[int, tuple[int, int, int]], int | None]:
    """The piece text as atoms; per table its header (start, end, tokens); and the grid's
    header row count when the piece is a grid table."""
    text = piece.text
    lines = _lines(text)
    headers: dict[int, tuple[int, int, int]] = {}
    atoms: list[_Atom] = []
    grid_header = _grid_header_rows(piece, lines)
    if grid_header is not None:
        texts = [text[line.start : line.end] for line in lines]
        if grid_header:
            a, b = lines[0].start, lines[grid_header - 1].end
            texts.append(text[a:b])
        counted = line_counts(offsets, texts, count)
        if grid_header:
            headers[0] = (a, b, counted.pop())
        for number, (line, tokens) in enumerate(zip(lines, counted)):
            atoms.append(_Atom(line.start, line.end, tokens, 0, number < grid_header, number))
        return atoms, headers, grid_header
    tables = _pipe_tables(text, lines)
    pos = 0
    for index, (first, end) in enumerate(tables):
        if lines[first].start > pos:
            atoms += [_Atom(a, b, budget + 1 if b - a > 0 else 0) for a, b in [(pos, lines[first].start)]]
        a, b = lines[first].start, lines[first + 1].end
        headers[index] = (a, b, count_tokens(offsets, text[a:b]))
        atoms.append(_Atom(a, b, headers[index][2], index, True))
        for line in lines[first + 2 : end]:
            atoms.append(
                _Atom(line.start, line.end, count_tokens(offsets, text[line.start : line.end]), index)
            )
        pos = lines[end - 1].end
    if pos < len(text):
        atoms.append(_Atom(pos, len(text), budget + 1))
    # prose runs are cut to the budget here (their token count was a placeholder)
    out: list[_Atom] = []
    for atom in atoms:
        if atom.table is None:
            ranges = _prose_ranges(text, atom.start, atom.end, offsets, budget)
            counted = line_counts(offsets, [text[a:b] for a, b in ranges], count)
            out.extend(_Atom(a, b, tokens) for (a, b), tokens in zip(ranges, counted))
        else:
            out.append(atom)
    return out, headers, None


def _pack(
    atoms: list[_Atom], headers: dict[int, tuple[int, int, int]], budget: int, text: str, offsets: Offsets
) -> list[_Part]:
    """Greedy parts of consecutive atoms within the budget; a part that starts inside a
    table's body repeats that table's header (unless the header is half the budget)."""
    parts: list[_Part] = []
    current: _Part | None = None
    used = 0
    for atom in atoms:
        body_of = atom.table if atom.table is not None and not atom.header else None
        repeat = body_of is not None and body_of in headers and headers[body_of][2] < budget // 2
        if atom.tokens > budget - (headers[body_of][2] if repeat else 0):
            # one row alone is too long: its text is cut as prose, under the header when it fits
            if current is not None:
                parts.append(current)
                current, used = None, 0
            room = budget - (headers[body_of][2] if repeat else 0)
            for a, b in _prose_ranges(text, atom.start, atom.end, offsets, room if room >= 16 else budget):
                parts.append(_Part([_Atom(a, b, 0, None)], body_of if repeat and room >= 16 else None))
            continue
        if current is not None and used + atom.tokens <= budget:
            current.atoms.append(atom)
            used += atom.tokens
            continue
        if current is not None:
            parts.append(current)
        current = _Part([atom], body_of if repeat else None)
        used = atom.tokens + (headers[body_of][2] if repeat else 0)
    if current is not None:
        parts.append(current)
    return parts


# ---------------------------------------------------------------- parts


def _prefix(piece: ChunkPiece) -> str:
    if piece.embed_text and piece.text and piece.embed_text.endswith(piece.text):
        return piece.embed_text[: len(piece.embed_text) - len(piece.text)]
    return ""


def split_to_limit(
    piece: ChunkPiece, offsets: Offsets, max_tokens: int, count: Counter | None = None
) -> list[ChunkPiece]:
    """The piece itself when it fits, else parts that each fit (images pass through).
    ``count`` is the embedder's batch counter (specials included), for a grid's rows."""
    budget_check()
    if piece.is_image or not piece.text:
        return [piece]
    prefix = _prefix(piece)
    budget = max_tokens - 2 - (line_counts(offsets, [prefix], count)[0] if prefix else 0)  # [CLS] and [SEP]
    if budget < 16:
        budget = max_tokens - 2
        prefix = ""
    if count is None:
        fits = not over_limit(offsets, piece.text, budget)  # offsets window by window, stops once over
    else:
        fits = line_counts(offsets, [piece.text], count)[0] <= budget
    if fits:
        return [piece]
    text = piece.text
    atoms, headers, grid_header = _atoms(piece, offsets, budget, count)
    parts = _pack(atoms, headers, budget, text, offsets)
    out = []
    lines = _LineCursor(text)
    for number, part in enumerate(parts, start=1):
        a, b = part.atoms[0].start, part.atoms[-1].end
        body = text[a:b]
        head = headers.get(part.header_of) if part.header_of is not None else None
        part_text = (text[head[0] : head[1]] + "\n" + body) if head else body
        if not part_text.strip():
            continue
        split: dict[str, Any] = {"part": number, "of": len(parts)}
        if head:
            split["repeated_header"] = True
        layout = piece.layout
        if grid_header is not None:
            rows = [x.row for x in part.atoms if x.row is not None]
            if head:
                rows = list(range(grid_header)) + rows
            if len(part.atoms) == 1 and part.atoms[0].row is None:  # a fragment of one long row
                layout = Layout(role=piece.layout.role) if piece.layout is not None else None
                split["row_fragment"] = True
            else:
                layout = _grid_part_layout(piece.layout, rows, grid_header)
                split["rows"] = [rows[0], rows[-1]]
        meta = {**piece.meta, "token_split": split}
        meta.update(_offsets_meta(piece, a, b, head, len(part_text), lines))
        out.append(
            replace(
                piece,
                text=part_text,
                embed_text=(prefix + part_text) if prefix else None,
                layout=layout,
                meta=meta,
            )
        )
    for number, part in enumerate(out, start=1):
        part.meta["token_split"]["part"], part.meta["token_split"]["of"] = number, len(out)
    return out


def _grid_part_layout(layout: Layout | None, rows: list[int], header_rows: int) -> Layout | None:
    """The part's layout: only the cells of its rows, renumbered to the part's lines, a
    span that crosses the part's end cut there, ``rows`` the part's line count."""
    if layout is None or layout.table is None:
        return layout
    index = {r: i for i, r in enumerate(rows)}
    cells = []
    for cell in layout.table.cells:
        if cell.row not in index:
            continue
        span = 1
        while (
            span < cell.row_span
            and cell.row + span in index
            and index[cell.row + span] == index[cell.row] + span
        ):
            span += 1
        cells.append(
            TableCell(
                row=index[cell.row],
                col=cell.col,
                text=cell.text,
                row_span=span,
                col_span=cell.col_span,
                bbox=cell.bbox,
                header=cell.header or cell.row < header_rows,
            )
        )
    kept_header = sum(1 for r in rows if r < header_rows)
    return Layout(
        role=layout.role,
        table=TableLayout(
            rows=len(rows), cols=layout.table.cols, cells=tuple(cells), header_rows=kept_header
        ),
    )


class _LineCursor:
    """Line numbers of positions in a text asked in about increasing order: each answer
    counts the newlines from the last position asked, not from the start (a document cut
    into many parts would otherwise be counted again for each of them)."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.line = text, 0, 0

    def __call__(self, pos: int) -> int:
        if pos >= self.pos:
            self.line += self.text.count("\n", self.pos, pos)
        else:
            self.line -= self.text.count("\n", pos, self.pos)
        self.pos = pos
        return self.line


def _offsets_meta(piece: ChunkPiece, a: int, b: int, head, chars: int, lines: _LineCursor) -> dict[str, Any]:
    """True offsets for a part of a piece that states where it sits in its document
    (Markdown: ``start_char``/``end_char``, ``start_line``/``end_line``): the part's own
    source range, and where its repeated header came from."""
    meta = piece.meta
    start, end = meta.get("start_char"), meta.get("end_char")
    if not isinstance(start, int) or not isinstance(end, int) or end - start != len(piece.text):
        return {}
    out: dict[str, Any] = {"start_char": start + a, "end_char": start + b, "chars": chars}
    first_line = meta.get("start_line")
    if isinstance(first_line, int):
        out["start_line"] = first_line + lines(a)
        out["end_line"] = first_line + lines(max(a, b - 1))
    if head:
        out["repeated_header_chars"] = [start + head[0], start + head[1]]
    return out


def relink(pieces: list[ChunkPiece]) -> list[ChunkPiece]:
    """After a split: the document's Markdown chunks (``chk_`` ids) numbered anew in
    order, so ids stay unique and sequential and neighbours point at the true next and
    previous chunk. Pieces are returned unchanged when nothing was split."""
    out = list(pieces)
    for i, meta in relinked_metas([p.meta for p in pieces]).items():
        out[i] = replace(pieces[i], meta=meta)
    return out


def relinked_metas(metas: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """``relink`` over a document's chunk metas in order: the new meta of each Markdown
    chunk, by position (none when nothing was split)."""
    marked = [
        i for i, m in enumerate(metas) if isinstance(m.get("chunk_id"), str) and _CHK.match(m["chunk_id"])
    ]
    if not any("token_split" in metas[i] for i in marked):
        return {}
    width = max(6, len(str(len(marked))))
    ids = [f"chk_{n:0{width}d}" for n in range(1, len(marked) + 1)]
    out = {}
    for k, i in enumerate(marked):
        meta = dict(metas[i])
        meta["chunk_id"] = ids[k]
        if "chunk_index" in meta:
            meta["chunk_index"] = k + 1
        if isinstance(meta.get("neighbors"), dict):
            meta["neighbors"] = {
                "previous_chunk_id": ids[k - 1] if k else None,
                "next_chunk_id": ids[k + 1] if k + 1 < len(ids) else None,
            }
        out[i] = meta
    return out
