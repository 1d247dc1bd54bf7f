"""pdf@4: passages for retrieval, packed from the page layout the other PDF versions find.

A passage is a run of consecutive regions of one page in reading order — pdf@2's
paragraphs and headings, pdf@3's ruled tables, lines@2's groups of OCR-read lines — sized
in the embedder's own tokens. It never crosses a page or a heading; a table is a passage
of its own, split between rows (header repeated) when too large. Running headers,
footers and page numbers are left out (named in the first passage's ``meta``), and the
title the first page sets largest is named in its first passage's ``meta``
(``document_title``), for the chunk map's document context.

The embedding text is the nearest heading (``embed_headings``) and the passage's text
without its standalone numbers (``embed_numbers``): on both question sets the model finds
passages better without them, and reads fewer tokens (``bench/results/eval_*_numbers.json``,
``docs/benchmarks.md``). The text, the heading path and keyword search keep everything.

This module finds a page's regions and runs the version; ``packing`` packs the regions
into passages and writes what the model reads.
"""

from __future__ import annotations

import copy
import logging
import re
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import replace

from pydantic import Field, model_validator

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.base import ChunkerConfig, outside_media_types
from ingest_pipeline.chunkers.pdf.packing import MODEL_LIMIT, HeadingPath, Packing, Region, pack_page
from ingest_pipeline.chunkers.pdf.page_layer import PageLayer, PdfChunker
from ingest_pipeline.chunkers.pdf.tables import PdfTablesChunker
from ingest_pipeline.contract import ChunkPiece, PageChunks, PageOutput
from ingest_pipeline.embedding.sizing import TokenSizing, minilm_sizing

log = logging.getLogger(__name__)

_RUNNING = ("page_header", "page_footer")
_LETTER = re.compile(r"[^\W\d_]")
_NUMBER = re.compile(r"\d[\d,.]*")
_TITLE_CHARS = 120  # a title line's length at most, however few its spaces
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # a font without a usable text map
_MOST_TOKENS = 8192


class PassageConfig(ChunkerConfig):
    target_tokens: int = Field(
        default=160,
        ge=16,
        description="close a passage once it holds this many tokens (left unset, it scales "
        "with the embedder's limit: 160 of MiniLM's 256)",
    )
    max_tokens: int = Field(
        default=224,
        ge=32,
        le=_MOST_TOKENS,
        description="hard maximum of a passage's embedding text, specials included, at most "
        "the embedder's limit; left unset, the limit less 32 tokens kept for the document "
        "title (224 of MiniLM's 256)",
    )
    heading_size: float = Field(default=1.15, gt=1.0, description="a heading's font size over the body's")
    max_heading_words: int = Field(default=16, ge=1)
    title_size: float = Field(
        default=1.3,
        ge=0.0,
        description="the document's title: the largest short lines of its first page, when "
        "their font is this many times the page's body size (0: never)",
    )
    max_title_words: int = Field(default=10, ge=1)
    embed_headings: int = Field(
        default=1,
        ge=0,
        le=3,
        description="how many of the nearest headings of the path (it keeps three) lead the "
        "embedding text; the chunk's header_path keeps them all",
    )
    page_numbers: bool = Field(
        default=False,
        description="keep a lone page number (7, F-36, Page 7 of 90, iv) that is a page's "
        "lowest or highest line wherever it sits; by default it is left out like a "
        "running footer when three pages print numbers of one series at "
        "one offset from their page number",
    )
    side_running_lines: bool = Field(
        default=True,
        description="leave out, as running lines, the lines in a side margin (a print stamp "
        "or filing code run up the edge, upright or turned) whose text recurs there on most "
        "pages, three at least",
    )
    embed_numbers: bool = Field(
        default=False,
        description="keep standalone numbers and the signs around them ($ 1,234 (5.6) %) in "
        "the embedding text; years are kept either way, and the chunk's text "
        "and keyword search keep every number",
    )

    @model_validator(mode="after")
    def _target_below_max(self):
        if self.target_tokens > self.max_tokens:
            raise ValueError("target_tokens must not exceed max_tokens")
        return self


def cover_title(lines, config: PassageConfig) -> str:
    """The name a document's first page gives it: its lines set in the largest font (at
    most two, within 1% of the largest, in reading order) among those of few words with a
    letter, when that font is ``title_size`` times the page's middle size or more; "" when
    nothing stands out. A 10-Q's cover names its company this way ("Apple Inc."), where the
    file name may say only a ticker."""
    sized = [ln for ln in lines if ln.size > 0]
    if not sized or not config.title_size:
        return ""
    body = statistics.median_high(ln.size for ln in sized)
    short = [
        ln
        for ln in sized
        if len(ln.text.split()) <= config.max_title_words
        and len(ln.text) <= _TITLE_CHARS
        and _LETTER.search(ln.text)
        and not _CONTROL.search(ln.text)
    ]
    if not short:
        return ""
    top = max(ln.size for ln in short)
    if top < config.title_size * body:
        return ""
    return " ".join([" ".join(ln.text.split()) for ln in short if ln.size >= 0.99 * top][:2])


# ---------------------------------------------------------------- regions from PDF layout


def _is_heading_text(text: str, words: int) -> bool:
    """Text that can be a heading: short, mostly letters, few numbers, starting with a
    capital or a digit, not ending like a clause or a sentence of some length."""
    letters = len(_LETTER.findall(text))
    solid = len("".join(text.split()))
    n = len(text.split())
    stripped = text.strip()
    return bool(
        0 < n <= words
        and solid
        and letters >= 0.6 * solid
        and len(_NUMBER.findall(text)) <= 2
        and (stripped[0].isupper() or stripped[0].isdigit())
        and not stripped.endswith((",", ";", ":"))
        and not (n > 6 and stripped.endswith("."))
    )


class _Rows:
    """A page's lines by their tops, so the lines that can share a row with a given line
    are found by bisection instead of a walk over the whole page: with no line taller
    than ``tallest``, a line overlapping ``mine`` vertically starts within ``tallest``
    above it (a point more, against rounding). Pages with a line of negative (or no)
    height keep the whole walk."""

    def __init__(self, lines) -> None:
        self.lines = sorted(lines, key=lambda ln: ln.y0)
        self.tops = [ln.y0 for ln in self.lines]
        heights = [ln.y1 - ln.y0 for ln in self.lines]
        self.tallest = max(heights, default=0.0)
        self.whole = any(not h >= 0 for h in heights)

    def near(self, mine):
        if self.whole:
            return self.lines
        return self.lines[
            bisect_left(self.tops, mine.y0 - self.tallest - 1.0) : bisect_right(self.tops, mine.y1)
        ]


def _alone_in_row(par, rows: _Rows) -> bool:
    """No other line shares a row with the paragraph's lines (a table's column labels do)."""
    own = {id(ln) for ln in par.lines}
    for mine in par.lines:
        height = mine.y1 - mine.y0
        for ln in rows.near(mine):
            if id(ln) not in own and min(ln.y1, mine.y1) - max(ln.y0, mine.y0) > 0.5 * min(
                height, ln.y1 - ln.y0
            ):
                return False
    return True


def pdf_regions(
    lines, frame, running: set[int], grids, weights: Sequence[int], config: PassageConfig, tables_chunker
) -> tuple[list[Region], list[dict]]:
    """A text-layer page's regions in reading order, and the running lines left out.
    Headings are short paragraphs set larger than the page's body text, or bold where
    the body is not."""
    from ingest_pipeline.layout.paragraphs import paragraphs

    def inside(ln, g) -> bool:
        x0, y0, x1, y1 = g.box
        return x0 <= ln.cx <= x1 and y0 <= ln.cy <= y1

    keep = [i for i, ln in enumerate(lines) if not any(inside(ln, g) for g in grids)]
    remap = {old: new for new, old in enumerate(keep)}
    kept = [lines[i] for i in keep]
    weight_of = {id(lines[i]): weights[i] for i in keep}
    pars = paragraphs(kept, frame.height, {remap[i] for i in running if i in remap})
    body = [ln for p in pars if p.role not in _RUNNING for ln in p.lines if ln.direction == 0]
    body_size = statistics.median([ln.size for ln in body]) if body else 0.0
    # the body's weight: the weight most of the text is set in (by characters)
    by_weight: dict[int, int] = {}
    for ln in body:
        by_weight[weight_of[id(ln)]] = by_weight.get(weight_of[id(ln)], 0) + len(ln.text)
    body_bold = bool(by_weight) and max(by_weight, key=by_weight.get) >= 600
    regions: list[Region] = []
    left_out = []
    rows = _Rows(kept)
    for par in pars:
        box = frame.normalize(par.box)
        if par.role in _RUNNING:
            left_out.append({"role": par.role, "text": par.text, "bbox": list(box) if box else None})
            continue
        first = par.lines[0]
        size = max(ln.size for ln in par.lines)
        bold = all(weight_of[id(ln)] >= 600 for ln in par.lines)
        larger = body_size > 0 and size >= config.heading_size * body_size
        level = 0.0
        if (
            len(par.lines) <= 3
            and first.direction == 0
            and _is_heading_text(par.text, config.max_heading_words)
            and _alone_in_row(par, rows)
        ):
            if larger or (bold and not body_bold and size >= 0.97 * body_size):  # not a small bold label
                level = size / (body_size or size) + (0.05 if bold else 0.0)
        role = "heading" if level else "paragraph"
        regions.append(
            Region(
                par.text,
                box,
                role,
                heading_level=level,
                parts=[(ln.text, frame.normalize(ln.box)) for ln in par.lines],
            )
        )
    placed = []
    body_pars = [p for p in pars if p.role not in _RUNNING]  # aligned with ``regions``
    for g in grids:
        pieces = tables_chunker._table_pieces(g, frame)
        if pieces:
            at = tables_chunker._table_position(body_pars, g.box)
            placed.append((at, g.box[1], Region(pieces[0].text, pieces[0].bbox, "table", piece=pieces[0])))
    for at, _top, region in sorted(placed, key=lambda t: (-t[0], -t[1])):  # from the back: positions hold
        regions.insert(at, region)
    return regions, left_out


def ocr_regions(
    pieces: Sequence[ChunkPiece], heading_size: float, words: int
) -> tuple[list[Region], list[dict]]:
    """An OCR-read page's regions from lines@2's paragraphs (its role says heading by size)."""
    regions, left_out = [], []
    for piece in pieces:
        role = piece.layout.role if piece.layout else "paragraph"
        if role in _RUNNING:
            left_out.append(
                {"role": role, "text": piece.text, "bbox": list(piece.bbox) if piece.bbox else None}
            )
            continue
        heading = role == "heading" and _is_heading_text(piece.text, words)
        regions.append(
            Region(
                piece.text,
                piece.bbox,
                "heading" if heading else "paragraph",
                heading_level=heading_size if heading else 0.0,
            )
        )
    return regions, left_out


def _page_layout(layer: PageLayer, pdf, index: int, tables: PdfTablesChunker):
    """(lines, frame, chars, grids, weights) of one page (lock held), through the walk
    pdf@1-3 share: what ``layer`` kept of the page (lines, ruled tables, the lines'
    weights), else the page loaded and laid out now. Weights evicted from the memo (or a
    document the layer does not key) cost one more load."""
    lines, frame, n, _unit, grids = layer.page_lines(pdf, index, tables._grids)
    if n <= 0:
        return [], frame, 0, [], []
    return lines, frame, n, grids, layer.line_weights(pdf, index, lines)


def _running_by_page(laid_out, config: PassageConfig) -> dict[int, set[int]]:
    """Per page with a text layer, the indexes of its running lines (headers, footers, with
    ``side_running_lines`` side-margin stamps, and unless ``page_numbers``, page numbers of
    one series), found over the whole document."""
    from ingest_pipeline.layout.paragraphs import page_number_lines, running_lines

    text_pages = [x for x in laid_out if x[1] is not None]
    marks = running_lines(
        [x[1] for x in text_pages],
        [x[2].height for x in text_pages],
        [x[2].width for x in text_pages] if config.side_running_lines else None,
    )
    if not config.page_numbers:
        marks |= page_number_lines([x[1] for x in text_pages], [x[0].page for x in text_pages])
    running: dict[int, set[int]] = {}
    for p, i in marks:
        running.setdefault(text_pages[p][0].page, set()).add(i)
    return running


class PdfPassagesChunker(PdfChunker):
    """pdf@4: layout regions packed into token-sized passages with heading paths. It lays
    out pages through its layer with pdf@3's table finder: the lines, ruled tables and font
    weights versions holding the same layer found are not found again."""

    id = "pdf"
    version = 4
    summary = (
        "a passage: consecutive paragraphs of one PDF page under one heading (or one table, split "
        "between rows), sized in the embedder's tokens; its box, its regions' boxes and heading path; "
        "the model reads it after its nearest heading, without its standalone numbers"
    )
    media_types = frozenset({mt.PDF})
    disclaims = outside_media_types  # its own fast answer: nothing outside media_types
    builtin = True
    opt_in = True
    Config = PassageConfig
    # The embedder its passages are sized for (``sized_for``); None: the bundled MiniLM.
    sizing: TokenSizing | None = None

    def sized_for(self, sizing: TokenSizing | None) -> PdfPassagesChunker:
        """This version sizing its passages in another embedder's tokens, to its limit (the
        registry applies the sizing of the profiles using it, ``embedding.sizing``). The
        bundled MiniLM's sizing, or None, states nothing, so its config hash stays."""
        sized = copy.copy(self)
        sized.sizing = None if sizing is None or sizing.same_as(minilm_sizing()) else sizing
        sized.packing()  # a stated max_tokens over the embedder's limit is refused here
        return sized

    @property
    def token_sizing(self) -> TokenSizing:
        """The sizing its passages are counted in: ``sizing``, or the bundled MiniLM's."""
        return self.sizing or minilm_sizing()

    def packing(self) -> Packing:
        """The token targets for this version's sizing: those the configuration states; a
        target and maximum left unset scale with the embedder's limit (the maximum keeps
        MiniLM's 32 tokens for the title), which for MiniLM's 256 are the defaults."""
        config = self.config
        sizing = self.token_sizing
        given = config.model_fields_set
        most = config.max_tokens
        if "max_tokens" not in given:
            most = max(32, sizing.limit - (MODEL_LIMIT - most))
        target = config.target_tokens
        if "target_tokens" not in given:
            target = min(most, max(16, round(target * sizing.limit / MODEL_LIMIT)))
        if most > sizing.limit:
            raise ValueError(
                f"{self.id}@{self.version}: max_tokens {most} passes the embedder's limit of "
                f"{sizing.limit} tokens"
            )
        if target > most:
            raise ValueError(f"{self.id}@{self.version}: target_tokens {target} passes max_tokens {most}")
        return Packing(target, most, config.embed_headings, config.embed_numbers, sizing)

    def environment(self) -> dict:
        """The sizing of an embedder other than the bundled MiniLM, with the targets it
        gives, so its passages have a config hash (and chunk ids) of their own."""
        if self.sizing is None:
            return {}
        packing = self.packing()
        return {
            "sizing": {
                **self.sizing.stated(),
                "target_tokens": packing.target_tokens,
                "max_tokens": packing.max_tokens,
            }
        }

    def chunk(self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]) -> tuple[PageChunks, ...]:
        from ingest_pipeline.chunkers.lines import LineParagraphsChunker

        if not pages:
            return ()
        packing = self.packing()
        # one piece per table (split here by tokens), read through this version's layer
        tables = PdfTablesChunker({"max_table_chars": 10**9}, layer=self.layer)
        laid_out = self._laid_out(content, pages, tables)
        if laid_out is None:
            return ()
        running = _running_by_page(laid_out, self.config)
        ocr_pages = tuple(x[0] for x in laid_out if x[1] is None)
        ocr = {pc.page: pc.pieces for pc in LineParagraphsChunker().chunk(content, media_type, ocr_pages)}
        outline = HeadingPath()
        out = []
        for po, lines, frame, grids, weights in laid_out:
            if lines is None:
                if po.page not in ocr:
                    continue
                regions, left_out = ocr_regions(
                    ocr[po.page], self.config.heading_size, self.config.max_heading_words
                )
            else:
                regions, left_out = pdf_regions(
                    lines, frame, running.get(po.page, set()), grids, weights, self.config, tables
                )
            passages = self._page_passages(po.page, regions, left_out, outline, packing)
            if passages and po.page == 1 and lines is not None:
                title = cover_title(
                    [ln for i, ln in enumerate(lines) if i not in running.get(1, set())], self.config
                )
                if title:
                    passages[0] = replace(passages[0], meta={**passages[0].meta, "document_title": title})
            said = tuple(d["text"] for d in left_out) if not passages else ()  # running lines only
            out.append(PageChunks(page=po.page, pieces=tuple(passages), left_out=said))
        return tuple(out)

    def _laid_out(self, content: bytes, pages: tuple[PageOutput, ...], tables: PdfTablesChunker):
        """(page output, lines, frame, grids, weights) per read page with a text layer, and
        (page output, None, None, None, None) per OCR-read one (lines@2 groups its lines);
        None when the bytes will not open."""
        laid_out = []
        with self.layer.opened(content) as pdf:
            if pdf is None:
                return None
            count = len(pdf)
            for po in pages:
                if po.status != "read" or not 1 <= po.page <= count:
                    continue
                try:
                    lines, frame, n, grids, weights = _page_layout(self.layer, pdf, po.page - 1, tables)
                except Exception:  # noqa: BLE001 - one broken page costs only itself
                    log.warning("pdf@4 could not lay out page %d", po.page, exc_info=True)
                    continue
                if n:
                    laid_out.append((po, lines, frame, grids, weights))
                elif po.lines:
                    laid_out.append((po, None, None, None, None))
        return laid_out

    def _page_passages(
        self, page: int, regions: list[Region], left_out: list[dict], outline: HeadingPath, packing: Packing
    ):
        """A page's passages from its regions (``outline`` carried over from the pages
        before), the running lines left out named in the first one's ``meta``."""
        for region, n in zip(regions, packing.count([r.text for r in regions])):
            region.tokens = n
        passages = pack_page(regions, outline, packing)
        if passages and left_out:
            passages[0] = replace(passages[0], meta={**passages[0].meta, "left_out": left_out})
        return passages

    def metrics(self, answer: tuple[PageChunks, ...]) -> dict:
        pieces = [p for pc in answer for p in pc.pieces]
        sizing = self.token_sizing
        tokens = sizing.count([p.embed_text or p.text for p in pieces])
        return {
            "passages": len(pieces),
            "tables": sum(1 for p in pieces if p.content_type == "table"),
            "mean_tokens": round(statistics.mean(tokens), 1) if tokens else 0.0,
            "max_tokens": max(tokens) + sizing.specials if tokens else 0,
        }
