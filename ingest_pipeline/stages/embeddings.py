"""The ``embeddings/<profile>`` stage: a vector per text chunk of many documents at once,
through the embedding cache keyed by (model id, sha256 of the text)."""

from __future__ import annotations

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
)
from ingest_pipeline.storage import tables
from ingest_pipeline.storage.stage_names import StageName
from ingest_pipeline.storage.store import Store


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
        fresh = embedder.embed([texts[sha] for sha in missing])
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
            table = store.chunk_map(profile.name, document)
            if table is None:
                finish(document, Outcome(document, "skipped", {"reason": "no chunk map"}))
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


def texts_of(table: pa.Table) -> list[tuple[str, str]]:
    """(chunk id, the text the model embeds) of a chunk map's text chunks."""
    found = []
    for chunk_id, text, embed_text, image in zip(
        table.column("chunk_id").to_pylist(),
        table.column("text").to_pylist(),
        table.column("embed_text").to_pylist(),
        table.column("image").to_pylist(),
    ):
        if image is None and text:
            found.append((chunk_id, embed_text or text))
    return found


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
    texts = {document: texts_of(table) for document, table, _ in pending}
    cache = EmbeddingCache(store, embedder.model_id)
    wanted = {sha256_text(t) for doc_texts in texts.values() for _, t in doc_texts}
    ahead = {sha: vector for sha, vector in (prefetched or {}).items() if sha in wanted}
    vectors = cache.get(wanted - set(ahead))
    known = set(vectors)  # vectors from before this run; ``ahead`` ones count as embedded here
    vectors.update(ahead)
    queue: dict[str, str] = {}  # sha -> text, waiting for the model
    waiting: list[tuple[str, pa.Table, str, set[str]]] = []
    step = FLUSH_TEXTS
    down: list[Exception] = []  # the model failed: the rest of the batch is not sent to it

    def flush() -> None:
        try:
            if down:
                raise down[0]
            vectors.update(cache.embed_missing(embedder, queue, vectors, run_id))
        except Exception as exc:  # noqa: BLE001 - a document lacking a vector gets the error, no write
            down[:] = [exc]
            queue.clear()
            lacking = [w for w in waiting if any(sha256_text(t) not in vectors for _, t in texts[w[0]])]
            for document, *_ in lacking:
                found(document, exc)
            waiting[:] = [w for w in waiting if w not in lacking]
        queue.clear()
        for document, table, fingerprint, first_here in waiting:
            finish(
                _write_embeddings(
                    store,
                    embedder,
                    profile,
                    document,
                    table,
                    fingerprint,
                    texts[document],
                    vectors,
                    first_here,
                    run_id,
                )
            )
        waiting.clear()

    for document, table, fingerprint in pending:
        first_here = set()
        for _, text in texts[document]:
            sha = sha256_text(text)
            if sha not in known:
                known.add(sha)
                first_here.add(sha)
                queue[sha] = text
        waiting.append((document, table, fingerprint, first_here))
        if len(queue) >= step:
            flush()
    flush()
    return outcomes


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
        sha = sha256_text(text)
        statuses.append("embedded" if sha in first_here else "cached")
        first_here.discard(sha)  # a text repeated in the document is embedded once
        shas.append(sha)
    n = len(shas)
    embedded = statuses.count("embedded")
    summary = {
        "vectors": n,
        "embedded": embedded,
        "cached": n - embedded,
        "images_without_vector": table.num_rows - table.column("image").null_count,
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
