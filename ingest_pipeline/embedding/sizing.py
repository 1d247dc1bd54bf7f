"""How a chunker sizes its passages in an embedder's own tokens, without the model.

A ``TokenSizing`` is what a token-sized chunker (pdf@4) needs of a profile's embedder: the
limit the model reads (special tokens included) and how its tokens are counted, either a
``tokenizer.json`` (named by path, identified by its sha256) or a character budget. It is
small and picklable, so the chunker takes it into its parse worker, and its ``stated()``
form joins the chunker's stated configuration, so sizing for another model is another
config hash (and chunk ids), readable back like any setting.

An embedder factory states the sizing of its settings with ``factory(..., sizing=fn)``
without loading anything; a factory that states none leaves its profiles' chunkers sized
for the bundled MiniLM (the chunk map still splits whatever passes its embedder's limit).

Each profile's passages follow its own embedder, and only its own: a chunker version cut for
the bundled MiniLM keeps its name (``pdf@4``); cut for another sizing it is registered as a
variant named by that sizing (``pdf_512_3fa9c1@4``: the limit and a digest of how tokens are
counted) that takes the version's place in that profile's order. Adding, removing or changing
another profile therefore never changes a profile's chunks, and two profiles on the same model
share one claim.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TokenSizing:
    """An embedder's token limit and counter: a tokenizer file, or ``chars_per_token``
    characters per token when there is none."""

    limit: int
    tokenizer: str = ""  # absolute path of a tokenizer.json; "" for a character budget
    tokenizer_sha256: str = ""
    chars_per_token: int = 0

    def __post_init__(self):
        if self.limit < 8:
            raise ValueError(f"an embedder's token limit must be 8 or more, not {self.limit}")
        if not self.tokenizer and self.chars_per_token < 1:
            raise ValueError("a sizing without a tokenizer needs chars_per_token of 1 or more")

    def stated(self) -> dict[str, Any]:
        """What identifies this sizing in a configuration (never the tokenizer's path: the
        same file elsewhere counts the same)."""
        counted = (
            {"tokenizer_sha256": self.tokenizer_sha256}
            if self.tokenizer
            else {"chars_per_token": self.chars_per_token}
        )
        return {"limit": self.limit, **counted}

    def same_as(self, other: TokenSizing) -> bool:
        return self.stated() == other.stated()

    def variant_id(self, chunker_id: str) -> str:
        """The id a chunker version cut for this sizing is registered under: the version's id,
        the limit and the first six hex digits of the stated sizing's sha256."""
        stated = json.dumps(self.stated(), sort_keys=True).encode()
        return f"{chunker_id}_{self.limit}_{hashlib.sha256(stated).hexdigest()[:6]}"

    @property
    def specials(self) -> int:
        """Tokens the model adds around every text ([CLS] and [SEP] for BERT)."""
        if not self.tokenizer:
            return 0
        return _counter(self.tokenizer).tokenizer.num_special_tokens_to_add(False)

    def count(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text, special tokens left out."""
        if not texts:
            return []
        if self.tokenizer:
            return _counter(self.tokenizer).counts(texts)
        return [math.ceil(len(t) / self.chars_per_token) for t in texts]

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character spans of a text's tokens, special tokens left out."""
        if self.tokenizer:
            encoding = _counter(self.tokenizer).tokenizer.encode(text, add_special_tokens=False)
            return list(encoding.offsets)
        step = self.chars_per_token
        return [(start, min(start + step, len(text))) for start in range(0, len(text), step)]


def _counter(path: str):
    from ingest_pipeline.embedding.word_counts import counter_for

    return counter_for(path)


def tokenizer_sizing(tokenizer: str, limit: int) -> TokenSizing:
    from ingest_pipeline.embedding.bundled_files import weights_sha256

    path = os.path.abspath(os.path.expanduser(tokenizer))
    return TokenSizing(int(limit), path, weights_sha256(path))


@functools.cache
def minilm_sizing() -> TokenSizing:
    """The bundled MiniLM's: its tokenizer, 256 tokens (the int8 build shares both)."""
    from ingest_pipeline.embedding import bundled_files

    return tokenizer_sizing(bundled_files.tokenizer_path(), bundled_files.MAX_TOKENS)


def sizing_of(ref: str, settings: dict[str, Any]) -> TokenSizing | None:
    """The sizing the installed factory of ``ref`` states for these settings, None when it
    states none."""
    from ingest_pipeline.embedding.registry import installed

    stated = getattr(installed().factory(ref), "sizing", None)
    return stated(settings) if callable(stated) else None


def profile_sizing(settings, profile) -> TokenSizing | None:
    """The sizing of a profile's embedder; None for the bundled MiniLM's (either build), or
    when its factory states none or it cannot be read (logged; the embedder then fails where
    it is made, with its own message)."""
    ref, options = settings.embedder_of(profile)
    try:
        sizing = sizing_of(ref, options)
    except Exception as exc:  # noqa: BLE001 - reported where the embedder is made
        log.warning("profile %s: cannot read how embedder %s counts tokens: %s", profile.name, ref, exc)
        return None
    return None if sizing is None or sizing.same_as(minilm_sizing()) else sizing


def chunker_sizings(settings, registry) -> dict[str, dict[str, TokenSizing | None]]:
    """For each profile, the sizing (``profile_sizing``) of every token-sized chunker version
    (one with ``sized_for``) it cuts with: its own order and, for the served profile, the
    orders of the profiles routes serve documents as."""
    from ingest_pipeline.stages.routes import served_as

    sizings: dict[str, dict[str, TokenSizing | None]] = {}
    for profile in settings.profiles:
        cut_as = served_as(settings) if profile.name == settings.default_profile else []
        sizing = profile_sizing(settings, profile)
        sizings[profile.name] = {
            f"{c.id}@{c.version}": sizing
            for p in (profile, *cut_as)
            for c in registry.order_for(p.chunkers)
            if callable(getattr(c, "sized_for", None))
        }
    return sizings
