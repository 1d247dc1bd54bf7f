"""The embedder port: what the pipeline asks of an embedding model, whoever provides it.

An embedder is ``id@version`` plus its settings. Its ``identity`` is everything that makes
its vectors what they are (the weights' sha256 for a local model; the endpoint's model
name and the settings for a remote one; never a secret), and ``model_id`` is the short
key made of it: the embedding cache, the chunk map's token sizing and every vector's
lineage are keyed by it, so two embedders never share a vector and changing one
re-embeds exactly the profiles that use it.

Passages and queries are embedded apart, since many models take a prefix or an
instruction for each. The token counter and offsets size chunks in the model's own
tokens; ``max_tokens`` is what it reads of a text. ``modalities`` says what it accepts
(``text``, and ``image`` for a model that also embeds pictures into the same space: such
an embedder has ``embed_images(images)`` too, and a profile using it embeds its image
chunks; otherwise they are indexed without a vector).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ingest_pipeline.identity import canonical_json, sha256_text


@runtime_checkable
class Embedder(Protocol):
    """What the pipeline needs of an embedding backend."""

    ref: str  # id@version
    model_id: str  # the identity's key: cache, fingerprints and lineage
    dim: int
    max_tokens: int
    modalities: tuple[str, ...]

    def identity(self) -> dict[str, Any]: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Passages, as the index stores them (one L2-normalised row per text)."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...

    def token_offsets(self, text: str) -> list[tuple[int, int]]: ...


def identity_key(ref: str, identity: Mapping[str, Any]) -> str:
    """The short, stable key of an embedder's identity, safe as a folder name:
    ``<id>_v<version>_<hash of the rest>``."""
    name, version = parse_ref(ref)
    return f"{name}_v{version}_{sha256_text(canonical_json(dict(identity)))[:16]}"


def parse_ref(ref: str) -> tuple[str, int]:
    """``id@version`` -> (id, version)."""
    name, at, version = ref.partition("@")
    if not at or not name or not version.isdigit():
        raise ValueError(f"an embedder is named id@version, not {ref!r}")
    return name, int(version)


def normalised(rows: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero)."""
    rows = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.clip(norms, 1e-12, None)


def factory(ref: str, summary: str, sizing=None):
    """Mark a function ``(settings, runtime) -> Embedder`` as the factory of ``ref``.
    ``sizing``, a function ``(settings) -> TokenSizing`` (``embedding.sizing``), states how
    the model's tokens are counted and its limit without loading it, so a profile's
    token-sized chunkers cut passages for it."""
    parse_ref(ref)

    def mark(fn):
        fn.ref, fn.summary = ref, summary
        if sizing is not None:
            fn.sizing = sizing
        return fn

    return mark


def refuse_unknown(ref: str, settings: Mapping[str, Any], known: Sequence[str]) -> None:
    """A clear error for a setting the embedder does not take (a typo is never ignored)."""
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise ValueError(f"embedder {ref} has no setting {', '.join(unknown)} (it takes: {', '.join(known)})")
