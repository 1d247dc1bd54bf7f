"""The text the model sees of each chunk: the document's title in front (when the profile asks for
it), a piece over the model's token limit split into parts that fit, and the token counts the
chunk map stores, counted once per text."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ingest_pipeline.contract import ChunkPiece
from ingest_pipeline.embedding.port import Embedder
from ingest_pipeline.embedding.token_counts import bounded_counts
from ingest_pipeline.embedding.token_limits import split_to_limit
from ingest_pipeline.runtime.budget import check as budget_check
from ingest_pipeline.runtime.memo import BoundedMemo
from ingest_pipeline.settings import Profile


def document_title(path: str) -> str:
    """A document's title for embedding context: its file name without the extension."""
    name = path.rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return " ".join(stem.replace("_", " ").split())


def named_title(metas: Iterable[Mapping[str, Any]]) -> str:
    """The first title a chunker read in the document itself (``meta["document_title"]``;
    pdf@4 takes it from the first page), or ""."""
    return next((m["document_title"] for m in metas if m.get("document_title")), "")


def titled(title: str, named: str) -> str:
    """The file name's title, followed by the title the document gave itself unless the
    file name already says it: "2022 Q3 AAPL (Apple Inc.)"."""
    if not named or named.casefold() in title.casefold():
        return title
    return f"{title} ({named})"


def with_named_title(title: str, pieces: Sequence[ChunkPiece]) -> str:
    """``titled`` with the title the pieces' chunker read in the document."""
    return titled(title, named_title(p.meta for p in pieces))


def texts_ahead(profile: Profile, embedder: Embedder, path: str, pieces: Sequence[ChunkPiece]) -> list[str]:
    """The embedding texts the profile's chunk map will make of a document's pieces when
    their chunker wins every page they are on (as the version that leads a profile for the
    document's format does): the pieces through the chunk map's own ``Expander``, blank
    parts left out as the merge leaves them out."""
    kept = [p for p in pieces if not p.is_image]
    if not kept:
        return []
    return [
        p.embed_text or p.text
        for parts in Expander(profile, embedder, path)(kept)
        for p in parts
        if p.text and p.text.strip()
    ]


class _Counted(BoundedMemo):
    """Token counts of the texts this process's chunk maps counted lately, by model: a
    batch's profiles share most of their texts (pdf@3's paragraphs are pdf@2's, and many
    are pdf@1's lines), so a profile's chunk map counts only what the ones before it did
    not. Keyed by a 16-byte digest of model and text (the texts themselves are not kept);
    about 300,000 counts, the least recently used forgotten first."""

    ENTRY = 100  # bytes a kept count holds: its digest, its slot, its number
    LIMIT = 300_000 * ENTRY

    def _cost(self, key: bytes, value: int) -> int:
        return self.ENTRY

    @staticmethod
    def _key(model: str, text: str) -> bytes:
        return hashlib.blake2b(f"{model}\0{text}".encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def counts(self, model: str, texts: Sequence[str]) -> dict[str, int]:
        found = ((t, self.get(self._key(model, t))) for t in texts)
        return {t: n for t, n in found if n is not None}

    def keep(self, model: str, counts: dict[str, int]) -> None:
        for text, n in counts.items():
            self.put(self._key(model, text), n)


_COUNTED = _Counted()


class Expander:
    """A profile's chunk pieces as the embedder will see them: the document title put in
    front of each embedding text (when the profile asks for it), and a piece over the
    model's limit split into parts that fit (or flagged, when the profile keeps it whole).

    Every embedding text is tokenized once, the whole document in one batch: a piece that
    fits passes as it is, without another call; only the few over the limit are cut, and
    ``counts`` then gives the chunk map's token counts from the same numbers."""

    def __init__(self, profile: Profile, embedder: Embedder, path: str) -> None:
        self.profile = profile
        self.embedder = embedder
        self.title = document_title(path) if profile.document_context else ""
        self.known: dict[str, int] = {}  # embedding text -> tokens, [CLS] and [SEP] included

    def counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text with [CLS] and [SEP] (long texts counted window by window)."""
        new = list(dict.fromkeys(t for t in texts if t not in self.known))
        if new:
            counted = _COUNTED.counts(self.embedder.model_id, new)
            unseen = [t for t in new if t not in counted]
            if unseen:
                fresh = dict(
                    zip(
                        unseen,
                        bounded_counts(self.embedder.token_offsets, unseen, self.embedder.count_tokens),
                    )
                )
                _COUNTED.keep(self.embedder.model_id, fresh)
                counted.update(fresh)
            self.known.update(counted)
        return [self.known[t] for t in texts]

    def plan(
        self, texts: Sequence[str | None], embeds: Sequence[str | None], named: str = ""
    ) -> tuple[list[str | None], list[bool]]:
        """For pieces given by their texts and embedding texts: each one's embedding text as
        the model will see it (the title in front, when the profile asks for it; ``named``
        is the title the document itself gave), and whether it passes as it is. One that
        does not pass goes through ``fit``. Counts every text it needs in one batch."""
        if self.title:
            title = titled(self.title, named)
            embeds = [f"{title}\n{e or t}" for t, e in zip(texts, embeds)]
        limit = self.embedder.max_tokens
        seen = [e or t for t, e in zip(texts, embeds)]
        apart = [_prefix_apart(t, e) for t, e in zip(texts, embeds)]
        # an embedding text that is not a prefix and the text (pdf@4 leaves numbers out):
        # split_to_limit sizes the text alone, so its count joins the same batch
        self.counts([s for s in seen if s] + [t for t, a in zip(texts, apart) if not a and t])
        known, passes = self.known, []
        for text, whole_text, whole in zip(texts, seen, apart):
            tokens = known[whole_text] if whole_text else None
            if not self.profile.split_oversized:
                passes.append(tokens is None or tokens <= limit)
            else:  # fits: what split_to_limit would answer, without tokenizing again
                passes.append(
                    tokens is not None and tokens <= limit and (whole or not text or known[text] <= limit)
                )
        return list(embeds), passes

    def fit(self, piece: ChunkPiece) -> list[ChunkPiece]:
        """A piece that did not pass (its embedding text is over the model's limit): cut
        into parts that fit, or flagged when the profile keeps it whole."""
        if not self.profile.split_oversized:
            return [replace(piece, meta={**piece.meta, "token_overflow": True})]
        return split_to_limit(
            piece, self.embedder.token_offsets, self.embedder.max_tokens, self.embedder.count_tokens
        )

    def __call__(self, pieces: Sequence[ChunkPiece]) -> list[list[ChunkPiece]]:
        embeds, passes = self.plan(
            [p.text for p in pieces], [p.embed_text for p in pieces], named_title(p.meta for p in pieces)
        )
        if self.title:
            pieces = [replace(p, embed_text=e) for p, e in zip(pieces, embeds)]
        out = []
        for piece, ok in zip(pieces, passes):
            budget_check()
            out.append([piece] if ok else self.fit(piece))
        return out


def _prefix_apart(text: str | None, embed: str | None) -> bool:
    """A piece's embedding text is its text, or its text after a prefix that ends in
    whitespace, so the text's tokens are the embedding text's last ones."""
    if not embed or embed == text:
        return True
    head = len(embed) - len(text or "")
    return bool(text) and head > 0 and embed.endswith(text) and embed[head - 1].isspace()
