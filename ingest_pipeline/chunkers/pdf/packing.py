"""pdf@4's packing: a page's regions in reading order (paragraphs, headings, tables) packed
into passages sized in the embedder's own tokens, with their heading paths and the text
the model reads for each (``pack_page``). The regions come from ``passages``."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ingest_pipeline.contract import BBox, ChunkPiece, Layout, LayoutRegion, validate_bbox
from ingest_pipeline.embedding.sizing import TokenSizing, minilm_sizing

MODEL_LIMIT = 256  # tokens the bundled MiniLM reads, [CLS] and [SEP] included
_FIGURE = re.compile(r"[$()\d,.\-\u2013\u2014%*\u2020]+")  # a word of digits and the signs around amounts
_YEAR = re.compile(r"\(?(?:19|20)\d\d\)?")


@dataclass(frozen=True)
class Packing:
    """What the packer reads: pdf@4's token targets for one embedder, how headings and
    numbers lead the embedding text (``passages.PassageConfig``), and how that embedder's
    tokens are counted. Counts of a WordPiece model add up over whitespace-joined texts
    (``WordCounter`` counts them so, word by word); for another tokenizer they nearly do,
    and the chunk map's token split catches a passage the sum misjudged."""

    target_tokens: int
    max_tokens: int
    embed_headings: int
    embed_numbers: bool
    sizing: TokenSizing = field(default_factory=minilm_sizing)

    def count(self, texts: Sequence[str]) -> list[int]:
        return self.sizing.count(texts)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return self.sizing.offsets(text)


def model_tokenizer():
    """The bundled MiniLM's tokenizer (no truncation), without loading the model."""
    from ingest_pipeline.embedding.word_counts import counter_for

    return counter_for(minilm_sizing().tokenizer).tokenizer


@dataclass
class Region:
    """A unit the packer places: text with its normalized box and role. ``parts`` are its
    lines (text, box) for a paragraph that may need cutting; ``piece`` a ready table."""

    text: str
    bbox: BBox | None
    role: str
    heading_level: float = 0.0  # > 0 for a heading: larger is higher in the outline
    parts: list[tuple[str, BBox | None]] = field(default_factory=list)
    piece: ChunkPiece | None = None
    tokens: int = 0

    @property
    def heading(self) -> bool:
        return self.heading_level > 0


def _union(boxes: Sequence[BBox | None]) -> BBox | None:
    real = [b for b in boxes if b is not None]
    if not real:
        return None
    return validate_bbox(
        (min(b[0] for b in real), min(b[1] for b in real), max(b[2] for b in real), max(b[3] for b in real))
    )


class HeadingPath:
    """The outline above the current point of a document: a stack of (level, text)."""

    def __init__(self) -> None:
        self.stack: list[tuple[float, str]] = []

    def enter(self, level: float, text: str) -> None:
        while self.stack and self.stack[-1][0] <= level:
            self.stack.pop()
        self.stack.append((level, " ".join(text.split())[:120]))

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(t for _, t in self.stack[-3:])


@functools.lru_cache(maxsize=4096)
def _prefix_tokens(sizing: TokenSizing, prefix: tuple[str, ...]) -> int:
    return sizing.count(["\n".join(prefix)])[0] if prefix else 0


def pack_page(regions: Sequence[Region], outline: HeadingPath, config: Packing) -> list[ChunkPiece]:
    """Passages of one page from its regions in reading order (``outline`` carries the
    heading path over from the previous pages and is advanced here by its headings).

    Regions join the open passage while its embedding text (heading path, text, specials)
    stays within ``max_tokens``; it closes at ``target_tokens``, before a heading that
    follows text, and around a table. A region too long alone is packed line by line,
    and a line too long alone is cut at a sentence or word boundary."""
    passages: list[ChunkPiece] = []
    current: list[tuple[str, BBox | None, str]] = []  # (text, box, role)
    own: set[str] = set()  # the open passage's headings, as the outline holds them
    used = 0
    led = -1  # tokens of the prefix; -1 once the outline or ``own`` changed
    specials = config.sizing.specials

    def prefix() -> tuple[str, ...]:
        # headings the passage itself starts with are in its text, not in its prefix
        return _nearest(tuple(p for p in outline.path if p not in own), config)

    def room() -> int:
        nonlocal led
        if led < 0:
            led = _prefix_tokens(config.sizing, prefix())
        return config.max_tokens - specials - led - used

    def add(text: str, box: BBox | None, role: str, tokens: int) -> None:
        nonlocal used, led
        current.append((text, box, role))
        if role == "heading":
            own.add(" ".join(text.split())[:120])
            led = -1
        used += tokens

    def flush() -> None:
        nonlocal used, led
        if current:
            passages.append(_passage(current, outline.path, prefix(), config))
        current.clear()
        own.clear()
        used, led = 0, -1

    for region in regions:
        if region.piece is not None:  # a table: a passage of its own, split between rows to fit
            flush()
            passages.extend(_table_passages(region, outline.path, config))
            continue
        if region.heading:
            if any(role != "heading" for _, _, role in current):
                flush()
            outline.enter(region.heading_level, region.text)  # headings in a row stay together
            led = -1
        if current and region.tokens > room():
            flush()
        if region.tokens > room():  # too long alone: pack its lines; cut a line too long alone
            for text, box in region.parts or [(region.text, region.bbox)]:
                n = config.count([text])[0]
                if current and n > room():
                    flush()
                if n > room():
                    for part in _cut(text, room(), config):
                        add(part, box, region.role, 0)
                        flush()
                    continue
                add(text, box, region.role, n)
            continue
        add(region.text, region.bbox, region.role, region.tokens)
        if config.max_tokens - room() >= config.target_tokens:
            flush()
    flush()
    return passages


def _cut(text: str, budget: int, config: Packing) -> list[str]:
    from ingest_pipeline.embedding.token_limits import split_text

    return split_text(text, config.offsets, budget)


def _nearest(path: tuple[str, ...], config: Packing) -> tuple[str, ...]:
    """The headings that lead a passage's embedding text: the last ``embed_headings`` of its path."""
    return path[len(path) - config.embed_headings :] if config.embed_headings else ()


def model_words(text: str) -> str:
    """A text as the model is given it when numbers are left out: each line without its
    words made only of digits and the signs around amounts ("$", "1,234", "(5.6)", "%"),
    years kept, the words of a line joined by one space, lines left empty dropped; the text
    itself when nothing would be left. A dense embedding of "745 1,330 1,698" says nothing a
    question can match; keyword search still reads every number (see
    ``vector_index.search_text``)."""
    lines = []
    for line in text.split("\n"):
        words = [w for w in line.split() if not _FIGURE.fullmatch(w) or _YEAR.fullmatch(w)]
        if words:
            lines.append(" ".join(words))
    return "\n".join(lines) or text


def _embedding_text(text: str, prefix: tuple[str, ...], config: Packing) -> str | None:
    """What the model reads for a passage: its leading headings, then its text (its numbers
    left out unless ``embed_numbers``); None when that is the text itself."""
    body = text if config.embed_numbers else model_words(text)
    embed = "\n".join((*prefix, body))
    return None if embed == text else embed


def _passage(
    packed: Sequence[tuple[str, BBox | None, str]],
    path: tuple[str, ...],
    prefix: tuple[str, ...],
    config: Packing,
) -> ChunkPiece:
    text = "\n".join(t for t, _, _ in packed)
    bbox = _union([b for _, b, _ in packed])
    regions = tuple(LayoutRegion(role, b) for _, b, role in packed if b is not None)
    embed = _embedding_text(text, prefix, config)
    return ChunkPiece(
        text=text,
        bbox=bbox,
        bbox_reason=None if bbox else "unresolved",
        layout=Layout(role="passage", regions=regions),
        header_path=path,
        content_type="passage",
        embed_text=embed,
        meta={"regions": len(packed)},
    )


def _table_passages(region: Region, path: tuple[str, ...], config: Packing) -> list[ChunkPiece]:
    from ingest_pipeline.embedding.token_limits import split_to_limit

    piece = region.piece
    prefix = _nearest(path, config)
    embed = "\n".join((*prefix, piece.text)) if prefix else None
    whole = replace(piece, header_path=path, embed_text=embed)
    out = []
    for part in split_to_limit(whole, config.offsets, config.max_tokens):  # sized with every number
        layout = part.layout
        box = part.bbox
        out.append(
            replace(
                part,
                layout=Layout(
                    role="table",
                    table=layout.table if layout else None,
                    regions=(LayoutRegion("table", box),) if box else (),
                ),
                embed_text=_embedding_text(part.text, prefix, config),
            )
        )
    return out
