"""The ``embeddings/<profile>`` stage: a vector per text chunk of many documents at once,
through the embedding cache keyed by (model id, sha256 of the text)."""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ingest_pipeline.embedding import Embedder
from ingest_pipeline.faults import crash_point
from ingest_pipeline.identity import canonical_json, sha256_text
from ingest_pipeline.settings import Profile
from ingest_pipeline.stages.common import STAGE_VERSIONS, UNCHANGED, Outcome, clear_error, fingerprint_of, record_error
from ingest_pipeline.store import Store


class EmbeddingCache:
    """Vectors keyed by (model id, sha256 of the text), as append-only shards in the store.
    ``embed_missing`` is the one way texts reach the model through it: deduplicated, and
    only those it does not hold yet."""

    def __init__(self, store: Store, model_id: str) -> None:
        self.store = store
        self.model_id = model_id

    def get(self, shas: Iterable[str]) -> dict[str, np.ndarray]:
        return self.store.cached_vectors(self.model_id, shas)

    def put(self, vectors: dict[str, np.ndarray], shard: str) -> None:
        self.store.add_cached_vectors(self.model_id, shard, vectors)

    def embed_missing(self, embedder: Embedder, texts: Mapping[str, str], known: Mapping[str, np.ndarray],
                      run: str) -> dict[str, np.ndarray]:
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


def _to_embed(store: Store, embedder: Embedder, profile: Profile, documents: Sequence[str], force: bool,
              finish: Callable[[str, Outcome | Exception], None]) -> list[tuple[str, pa.Table, str]]:
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
                finish(document, Outcome(document, "unchanged", {"vectors": vectors_kept, "embedded": 0,
                                                                 "cached": vectors_kept, **UNCHANGED}))
                continue
            pending.append((document, table, fingerprint))
        except Exception as exc:
            finish(document, exc)
    return pending


def _texts_of(table: pa.Table) -> list[tuple[str, str]]:
    """(chunk id, the text the model embeds) of a chunk map's text chunks."""
    found = []
    for chunk_id, text, embed_text, image in zip(
        table.column("chunk_id").to_pylist(), table.column("text").to_pylist(),
        table.column("embed_text").to_pylist(), table.column("image").to_pylist(),
    ):
        if image is None and text:
            found.append((chunk_id, embed_text or text))
    return found


def embed_documents(
    store: Store, embedder: Embedder, profile: Profile, documents: Sequence[str], run_id: str,
    on_done: Callable[[Outcome], None] | None = None, force: bool = False,
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
            row = record_error(store, f"embeddings/{profile.name}", document, outcome, run_id)
            outcome = Outcome(document, "failed", {"reason": row["reason"]})
        finish(outcome)

    pending = _to_embed(store, embedder, profile, documents, force, found)
    texts = {document: _texts_of(table) for document, table, _ in pending}
    cache = EmbeddingCache(store, embedder.model_id)
    wanted = {sha256_text(t) for doc_texts in texts.values() for _, t in doc_texts}
    ahead = {sha: vector for sha, vector in (prefetched or {}).items() if sha in wanted}
    vectors = cache.get(wanted - set(ahead))
    known = set(vectors)  # vectors from before this run; ``ahead`` ones count as embedded here
    vectors.update(ahead)
    queue: dict[str, str] = {}  # sha -> text, waiting for the model
    waiting: list[tuple[str, pa.Table, str, set[str]]] = []
    step = FLUSH_TEXTS

    def flush() -> None:
        vectors.update(cache.embed_missing(embedder, queue, vectors, run_id))
        queue.clear()
        for document, table, fingerprint, first_here in waiting:
            finish(_write_embeddings(store, embedder, profile, document, table, fingerprint, texts[document],
                                     vectors, first_here, run_id))
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


def _write_embeddings(store: Store, embedder: Embedder, profile: Profile, document: str, table: pa.Table,
                      fingerprint: str, texts: list[tuple[str, str]], vectors: dict[str, np.ndarray],
                      first_here: set[str], run_id: str) -> Outcome:
    """One document's embeddings file; a text the model embedded for it in this run is
    ``embedded``, one whose vector was already known is ``cached``."""
    rows = []
    first_here = set(first_here)
    for chunk_id, text in texts:
        sha = sha256_text(text)
        status = "embedded" if sha in first_here else "cached"
        first_here.discard(sha)  # a text repeated in the document is embedded once
        rows.append({"chunk_id": chunk_id, "profile": profile.name, "document_id": document,
                     "model": embedder.model_id, "text_sha256": sha, "vector": vectors[sha].tolist(),
                     "cache": status, "run_id": run_id})
    embedded = sum(1 for r in rows if r["cache"] == "embedded")
    summary = {"vectors": len(rows), "embedded": embedded, "cached": len(rows) - embedded,
               "images_without_vector": sum(1 for i in table.column("image").to_pylist() if i is not None)}
    store.write_embeddings(profile.name, document, rows, meta={"fingerprint": fingerprint, "summary": summary})
    clear_error(store, f"embeddings/{profile.name}", document)
    crash_point("embedding")
    return Outcome(document, "new", summary)


# The cache shards a prefetch writes are named ``<run id>-ahead-...``.
AHEAD = "ahead"
# Texts per cache shard the prefetch writes: what a killed run keeps, and how often it
# looks whether it was asked to stop.
PREFETCH_TEXTS = 256

_LOG = logging.getLogger(__name__)


class EmbeddingPrefetch:
    """A profile's new texts embedded on a thread of the run's process, from the moment
    its chunk map is written: the model works while the run's other steps (the other
    chunker versions and profiles) parse and merge on the main thread, instead of after
    them. It writes the vectors to the cache as it goes; the profile's embeddings step then
    takes them as embedded in this run (``take``) and embeds only what is left.

    Only the process that runs the embeddings step may start one (``start`` is told so by
    the caller); ``take`` waits for it, and a process that exits first stops it between
    model calls."""

    _running: dict[tuple[str, str], EmbeddingPrefetch] = {}
    _lock = threading.Lock()

    def __init__(self, store: Store, embedder: Embedder, texts: Mapping[str, str], run_id: str) -> None:
        self.vectors: dict[str, np.ndarray] = {}
        self.texts = dict(texts)
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._cache = EmbeddingCache(store, embedder.model_id)
        self._embedder = embedder
        self._run_id = run_id
        self._thread = threading.Thread(target=self._work, name=f"prefetch-{run_id[:8]}", daemon=True)

    @classmethod
    def start(cls, store: Store, embedder: Embedder, profile: Profile, documents: Sequence[str], run_id: str,
              force: bool = False) -> EmbeddingPrefetch | None:
        """Begin embedding the texts the profile's embeddings step will need for these
        documents and the cache lacks; None when there are none."""
        pending = _to_embed(store, embedder, profile, documents, force, lambda *_: None)
        texts = {sha256_text(t): t for _, table, _ in pending for _, t in _texts_of(table)}
        held = EmbeddingCache(store, embedder.model_id).get(set(texts))
        # Shortest first across all the documents: each shard's batches then pad little, as
        # one length-sorted call over every text would.
        missing = {sha: t for sha, t in sorted(texts.items(), key=lambda kv: len(kv[1])) if sha not in held}
        if not missing:
            return None
        prefetch = cls(store, embedder, missing, run_id)
        with cls._lock:
            old = cls._running.pop((run_id, profile.name), None)
            cls._running[(run_id, profile.name)] = prefetch
        if old:
            old.stop()
        prefetch._thread.start()
        return prefetch

    @classmethod
    def take(cls, run_id: str, profile: str) -> dict[str, np.ndarray]:
        """The vectors this run's prefetch for the profile embedded, once it has finished
        (empty when there was none); a failed prefetch gives what it made before failing."""
        with cls._lock:
            prefetch = cls._running.pop((run_id, profile), None)
        if prefetch is None:
            return {}
        prefetch._thread.join()
        if prefetch.error is not None:
            _LOG.warning("embedding ahead stopped (%s); the embeddings step embeds the rest", prefetch.error)
        return prefetch.vectors

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _work(self) -> None:
        shas = list(self.texts)
        try:
            for start in range(0, len(shas), PREFETCH_TEXTS):
                if self._stop.is_set():
                    return
                part = {sha: self.texts[sha] for sha in shas[start:start + PREFETCH_TEXTS]}
                self.vectors.update(self._cache.embed_missing(self._embedder, part, self.vectors,
                                                              f"{self._run_id}-{AHEAD}"))
        except BaseException as exc:  # the step embeds what is missing; the error is logged there
            self.error = exc

    @classmethod
    def stop_all(cls) -> None:
        with cls._lock:
            running = list(cls._running.values())
            cls._running.clear()
        for prefetch in running:
            prefetch.stop()


atexit.register(EmbeddingPrefetch.stop_all)
