"""The chunk map: claims of chunkers merged per page, first in order wins."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ingest_pipeline.contract import ChunkPiece, PageChunks, PageOutput
from ingest_pipeline.identity import chunk_id

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Claim:
    """One chunker version's answer for a document, or the error it raised."""

    chunker: str  # id@version
    config_hash: str
    pages: tuple[PageChunks, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class MappedChunk:
    """A piece that made it into the chunk map, with its id and readable label."""

    chunk_id: str
    page: int
    index: int
    piece: ChunkPiece
    chunker: str
    config_hash: str

    @property
    def label(self) -> str:
        return f"page:{self.page}/chunk:{self.index}"


@dataclass(frozen=True)
class ChunkMap:
    chunks: tuple[MappedChunk, ...]
    page_owner: dict[int, str]  # page -> id@version that won it
    dropped: dict[str, int]  # why pieces were dropped -> count


def merge_claims(
    document: str,
    pages: Sequence[PageOutput],
    claims: Sequence[Claim],
    expand: Callable[[Sequence[ChunkPiece]], Sequence[Sequence[ChunkPiece]]] | None = None,
) -> ChunkMap:
    """Merge claims in order: the first chunker to claim a page wins it whole (an answer of
    zero pieces that says nothing was left out on purpose claims nothing, B36).

    Text pieces on failed or unreadable pages are dropped (images kept), whitespace
    pieces are dropped before numbering, and a chunker that raised is skipped.
    ``expand`` may replace each kept text piece by several (to fit the embedder) before
    numbering: it is called once with every kept text piece of the document, in order,
    and answers a list of replacements per piece (so it can tokenize them in one batch).
    """
    status = {p.page: p.status for p in pages}
    owner: dict[int, Claim] = {}
    answers: dict[int, PageChunks] = {}
    dropped = {"failed_page_text": 0, "whitespace": 0, "unknown_page": 0}
    for claim in claims:
        if claim.error is not None:
            log.warning("chunker %s raised on %s and was skipped: %s", claim.chunker, document, claim.error)
            continue
        for answer in claim.pages:
            if answer.page not in status:
                dropped["unknown_page"] += len(answer.pieces)
                continue
            if answer.page in owner or not answer.claims:  # zero pieces, nothing said: no claim (B36)
                continue
            owner[answer.page] = claim
            answers[answer.page] = answer

    kept: list[tuple[int, ChunkPiece]] = []
    for page in sorted(answers):
        for claimed in answers[page].pieces:
            if not claimed.is_image and status[page] in ("failed", "unreadable"):
                dropped["failed_page_text"] += 1
                continue
            kept.append((page, claimed))
    expanded: list[Sequence[ChunkPiece]] = [(piece,) for _, piece in kept]
    if expand:
        texts = [i for i, (_, piece) in enumerate(kept) if not piece.is_image]
        for i, parts in zip(texts, expand([kept[i][1] for i in texts]), strict=True):
            expanded[i] = parts

    chunks: list[MappedChunk] = []
    index, last_page = 0, None
    for (page, _), parts in zip(kept, expanded):
        claim = owner[page]
        if page != last_page:
            index, last_page = 0, page
        for piece in parts:
            if not piece.is_image and (not piece.text or not piece.text.strip()):
                dropped["whitespace"] += 1
                continue
            content = piece.image if piece.is_image else piece.text
            chunks.append(
                MappedChunk(
                    chunk_id=chunk_id(document, claim.chunker, claim.config_hash, page, index, content),
                    page=page,
                    index=index,
                    piece=piece,
                    chunker=claim.chunker,
                    config_hash=claim.config_hash,
                )
            )
            index += 1
    return ChunkMap(
        chunks=tuple(chunks),
        page_owner={p: c.chunker for p, c in owner.items()},
        dropped={k: v for k, v in dropped.items() if v},
    )
