"""The ``embeddings/<profile>`` stage: a vector per text chunk of many documents at once,
through the embedding cache keyed by (model id, sha256 of the text)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ingest_pipeline.embedding.port import Embedder
from ingest_pipeline.identity import canonical_json, sha256_text
from ingest_pipeline.runtime.faults import crash_point
from ingest_pipeline.settings import Profile
from ingest_pipeline.stages.common import (
    STAGE_VERSIONS,
    UNCHANGED,
    Outcome,
    clear_error,
    fingerprint_of,
    record_error,
    skipped,
)
from ingest_pipeline.storage import tables
from ingest_pipeline.storage.stage_names import StageName
from ingest_pipeline.storage.store import Store


class Picture(bytes):
    """An image chunk's bytes on their way to an embedder that accepts images; its cache
    key is not a text's (``key_of``)."""


def key_of(item: str | bytes) -> str:
    """The embedding cache's key of a text (the sha256 of its UTF-8) or a picture."""
    if isinstance(item, Picture):
        return "image-" + hashlib.sha256(bytes(item)).hexdigest()
    return sha256_text(item)


def embed_items(embedder: Embedder, items: Sequence[str | bytes]) -> np.ndarray:
    """Vectors for texts and pictures in order: texts through ``embed``, pictures through
    the embedder's ``embed_images``."""
    out: list[np.ndarray | None] = [None] * len(items)
    for kind, call in ((str, embedder.embed), (Picture, getattr(embedder, "embed_images", None))):
        at = [i for i, item in enumerate(items) if isinstance(item, kind)]
        if at:
            for i, vector in zip(at, call([items[i] for i in at]), strict=True):
                out[i] = vector
    return np.stack(out) if items else np.zeros((0, embedder.dim), dtype=np.float32)


class EmbeddingCache:
    """Vectors keyed by (model id, sha256 of the text), as append-only shards in the store.
    ``embed_missing`` is the one way texts reach the model through it: deduplicated, and
    only those it does not hold yet."""

    def __init__(self, store: Store, model_id: str) -> None:
        self.store = store
        self.model_id = model_id

    def get(self, shas: Iterable[str], skip: str | None = None) -> dict[str, np.ndarray]:
        return self.store.cached_vectors(self.model_id, shas, skip=skip)

    def put(self, vectors: dict[str, np.ndarray], shard: str) -> None:
        self.store.add_cached_vectors(self.model_id, shard, vectors)

    def embed_missing(
        self, embedder: Embedder, texts: Mapping[str, str], known: Mapping[str, np.ndarray], run: str
    ) -> dict[str, np.ndarray]:
        """Embed the texts (sha256 -> text) whose hash is not in ``known``, each once, and
        add their vectors to the cache as one shard named for ``run``; returns them."""
        missing = [sha for sha in texts if sha not in known]
        if not missing:
            return {}
        fresh = embed_items(embedder, [texts[sha] for sha in missing])
        new = {sha: fresh[i] for i, sha in enumerate(missing)}
        self.put(new, shard=f"{run}-{sha256_text(canonical_json(sorted(missing)))[:12]}")
        return new

    def vectors(self, embedder: Embedder, texts: Sequence[str], run: str) -> np.ndarray:
        """A vector per text, in order: from the cache, the missing ones embedded once."""
        shas = [sha256_text(t) for t in texts]
        found = self.get(set(shas))
        found.update(self.embed_missing(embedder, dict(zip(shas, texts)), found, run))
        return np.stack([found[s] for s in shas]) if shas else np.zeros((0, embedder.dim), dtype=np.float32)


# New texts gathered before the model runs and the cache and the documents' files are
# written: enough to sort by length across documents, few enough that documents finish steadily
# (the model itself takes them in batches of its own, ``embed_batch``).
FLUSH_TEXTS = 64


# What the step reads of a chunk map: a batch holds every pending document's until its
# vectors are written, and the rest (boxes, layout, a table's cells) is the larger part.
EMBEDDED_COLUMNS = ["chunk_id", "text", "embed_text", "image"]


def documents_to_embed(
    store: Store,
    embedder: Embedder,
    profile: Profile,
    documents: Sequence[str],
    force: bool,
    finish: Callable[[str, Outcome | Exception], None],
) -> list[tuple[str, pa.Table, str]]:
    """The documents whose embeddings are out of date (or all, forced), with their chunk
    maps and the fingerprint their new file takes; the others go to ``finish`` (an outcome,
    or the exception that stopped the look)."""
    pending: list[tuple[str, pa.Table, str]] = []
    for document in documents:
        try:
            table = store.chunk_map(profile.name, document, columns=EMBEDDED_COLUMNS)
            if table is None:
                finish(document, skipped(store, document, "no chunk map"))
                continue
            chunks_fp = (store.chunk_map_meta(profile.name, document) or {}).get("fingerprint")
            fingerprint = fingerprint_of(STAGE_VERSIONS["embeddings"], chunks_fp, embedder.model_id)
            previous = store.embeddings_meta(profile.name, document)
            if previous and previous.get("fingerprint") == fingerprint and not force:
                # Nothing embedded or looked up in this run: every vector is reused as it is.
                vectors_kept = int((previous.get("summary") or {}).get("vectors", 0) or 0)
                finish(
                    document,
                    Outcome(
                        document,
                        "unchanged",
                        {"vectors": vectors_kept, "embedded": 0, "cached": vectors_kept, **UNCHANGED},
                    ),
                )
                continue
            pending.append((document, table, fingerprint))
        except Exception as exc:
            finish(document, exc)
    return pending


def texts_of(table: pa.Table, pictures: bool = False, words: bool = True) -> list[tuple[str, str]]:
    """(chunk id, the text the model embeds) of a chunk map's text chunks (unless ``words``
    is False: an embedder of images only), and with ``pictures`` (an embedder that accepts
    images) its image chunks' bytes as ``Picture``. What an embedder does not take stays
    without a vector: a filter finds it, vector search does not."""
    found = []
    for chunk_id, text, embed_text, image in zip(
        table.column("chunk_id").to_pylist(),
        table.column("text").to_pylist(),
        table.column("embed_text").to_pylist(),
        table.column("image").to_pylist(),
    ):
        if image is None and text and words:
            found.append((chunk_id, embed_text or text))
        elif image is not None and pictures:
            found.append((chunk_id, Picture(image)))
    return found


def sees_words(embedder: Embedder) -> bool:
    """Whether the embedder takes texts (every one that states no ``modalities`` does)."""
    return "text" in tuple(getattr(embedder, "modalities", ("text",)) or ("text",))


def sees_images(embedder: Embedder) -> bool:
    """Whether the embedder puts pictures in its space (``modalities`` holds ``image``)."""
    return "image" in tuple(getattr(embedder, "modalities", ()) or ()) and hasattr(embedder, "embed_images")


def embed_documents(
    store: Store,
    embedder: Embedder,
    profile: Profile,
    documents: Sequence[str],
    run_id: str,
    on_done: Callable[[Outcome], None] | None = None,
    force: bool = False,
    prefetched: Mapping[str, np.ndarray] | None = None,
) -> list[Outcome]:
    """Vectors for the text chunks of many documents at once: texts are deduplicated
    across the batch, looked up in the cache, and only the missing ones are embedded.
    ``prefetched`` are vectors this run embedded ahead (``EmbeddingPrefetch``): they count
    as embedded here, not as cached.

    Documents are finished in order, a model batch of missing texts at a time, so
    ``on_done`` hears of each document soon after its vectors exist (and a killed run
    keeps the vectors it computed in the cache)."""
    outcomes: list[Outcome] = []

    def finish(outcome: Outcome) -> None:
        outcomes.append(outcome)
        if on_done:
            on_done(outcome)

    def found(document: str, outcome: Outcome | Exception) -> None:
        if isinstance(outcome, Exception):
            row = record_error(store, StageName("embeddings", profile.name).stage, document, outcome, run_id)
            outcome = Outcome(document, "failed", {"reason": row["reason"]})
        finish(outcome)

    pending = documents_to_embed(store, embedder, profile, documents, force, found)
    pictures = sees_images(embedder)
    texts = {document: texts_of(table, pictures, sees_words(embedder)) for document, table, _ in pending}
    cache = EmbeddingCache(store, embedder.model_id)
    wanted = {key_of(t) for doc_texts in texts.values() for _, t in doc_texts}
    ahead = {sha: vector for sha, vector in (prefetched or {}).items() if sha in wanted}
    vectors = cache.get(wanted - set(ahead))
    known = set(vectors)  # vectors from before this run; ``ahead`` ones count as embedded here
    vectors.update(ahead)
    batch = _ModelBatch(store, embedder, profile, cache, texts, vectors, run_id, finish, found)
    for document, table, fingerprint in pending:
        first_here = set()
        for _, text in texts[document]:
            sha = key_of(text)
            if sha not in known:
                known.add(sha)
                first_here.add(sha)
                batch.queue[sha] = text
        batch.waiting.append((document, table, fingerprint, first_here))
        if len(batch.queue) >= FLUSH_TEXTS:
            batch.flush()
    batch.flush()
    return outcomes


class _ModelBatch:
    """The texts waiting for the model and the documents waiting for them: ``flush`` embeds
    the texts and writes each waiting document. When the model fails (an endpoint down, a
    model that cannot load), each document still lacking a vector gets the error and
    nothing is written for it; the rest of the step does not ask the model again."""

    def __init__(self, store, embedder, profile, cache, texts, vectors, run_id, finish, failed) -> None:
        self.store, self.embedder, self.profile, self.cache = store, embedder, profile, cache
        self.texts, self.vectors, self.run_id = texts, vectors, run_id
        self.finish, self.failed = finish, failed
        self.queue: dict[str, str] = {}  # sha -> text, waiting for the model
        self.waiting: list[tuple[str, pa.Table, str, set[str]]] = []
        self.down: Exception | None = None

    def flush(self) -> None:
        try:
            if self.down is not None:
                raise self.down
            self.vectors.update(
                self.cache.embed_missing(self.embedder, self.queue, self.vectors, self.run_id)
            )
        except Exception as exc:  # noqa: BLE001 - a document lacking a vector gets the error, no write
            self.down = exc
            lacking = [
                w for w in self.waiting if any(key_of(t) not in self.vectors for _, t in self.texts[w[0]])
            ]
            for document, *_ in lacking:
                self.failed(document, exc)
            self.waiting = [w for w in self.waiting if w not in lacking]
        self.queue.clear()
        for document, table, fingerprint, first_here in self.waiting:
            self.finish(
                _write_embeddings(
                    self.store,
                    self.embedder,
                    self.profile,
                    document,
                    table,
                    fingerprint,
                    self.texts[document],
                    self.vectors,
                    first_here,
                    self.run_id,
                )  # fmt: skip
            )
        self.waiting.clear()


def _write_embeddings(
    store: Store,
    embedder: Embedder,
    profile: Profile,
    document: str,
    table: pa.Table,
    fingerprint: str,
    texts: list[tuple[str, str]],
    vectors: dict[str, np.ndarray],
    first_here: set[str],
    run_id: str,
) -> Outcome:
    """One document's embeddings file; a text the model embedded for it in this run is
    ``embedded``, one whose vector was already known is ``cached``."""
    shas, statuses = [], []
    first_here = set(first_here)
    for _, text in texts:
        sha = key_of(text)
        statuses.append("embedded" if sha in first_here else "cached")
        first_here.discard(sha)  # a text repeated in the document is embedded once
        shas.append(sha)
    n = len(shas)
    embedded = statuses.count("embedded")
    summary = {
        "vectors": n,
        "embedded": embedded,
        "cached": n - embedded,
        "images_without_vector": (table.num_rows - table.column("image").null_count)
        - sum(isinstance(t, Picture) for _, t in texts),
    }
    # the vectors go to Arrow as one block of floats, not as a Python list per row
    block = (np.stack([vectors[sha] for sha in shas]) if n else np.zeros((0, embedder.dim))).astype(
        np.float32
    )
    width = block.shape[1]
    column = pa.ListArray.from_arrays(
        pa.array(np.arange(0, (n + 1) * width, width, dtype=np.int32)), pa.array(block.reshape(-1))
    )
    data = pa.table(
        {
            "chunk_id": [c for c, _ in texts],
            "profile": [profile.name] * n,
            "document_id": [document] * n,
            "model": [embedder.model_id] * n,
            "text_sha256": shas,
            "vector": column,
            "cache": statuses,
            "run_id": [run_id] * n,
        },
        schema=tables.EMBEDDINGS,
    )
    store.write_embeddings(
        profile.name, document, data, meta={"fingerprint": fingerprint, "summary": summary}
    )
    clear_error(store, StageName("embeddings", profile.name).stage, document)
    crash_point("embedding")
    return Outcome(document, "new", summary)
