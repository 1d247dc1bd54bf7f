"""The ``embeddings/<profile>`` stage: a vector per text chunk of many documents at once,
through the embedding cache keyed by (model id, sha256 of the text)."""

from __future__ import annotations

import atexit
import logging
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ingest_pipeline.embedding.minilm import Embedder
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
from ingest_pipeline.storage.vector_index import load_client_ahead


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


def _to_embed(
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


def _texts_of(table: pa.Table) -> list[tuple[str, str]]:
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


# The cache shards a prefetch writes are named ``<run id>-ahead-<prefetch>-...``.
AHEAD = "ahead"
# Texts per cache shard the prefetch writes: what a killed run keeps, and how often it
# looks whether it was asked to stop.
PREFETCH_TEXTS = 256

_LOG = logging.getLogger(__name__)


class EmbeddingPrefetch:
    """A profile's new texts embedded on a thread of the run's process while the run's
    other steps parse and merge on the main thread, instead of after them. It writes the
    vectors to the cache as it goes; the profile's embeddings step then takes them as
    embedded in this run (``take``) and embeds only what is left.

    Texts arrive twice. As each document's claims of a version that leads the profile for
    its format are written, the texts the chunk map will make of them are handed over
    (``feed``: the model starts while the served version still parses the next
    documents). When the chunk map is written, ``start`` hands over the texts it really
    holds and the cache lacks: what was fed and is not among them is dropped unembedded,
    and nothing more arrives. Each time, the thread takes the shortest waiting texts first.

    Only the process that runs the embeddings step may feed or start one (the caller
    knows); ``take`` waits for it, and a process that exits first stops it between model
    calls (as does ``stop_run``, for a run that ended without its embeddings step)."""

    _running: dict[tuple[str, str], EmbeddingPrefetch] = {}
    _lock = threading.Lock()

    def __init__(self, store: Store, embedder: Embedder, run_id: str) -> None:
        self.vectors: dict[str, np.ndarray] = {}
        self.texts: dict[str, str] = {}  # every text handed over and kept (sha256 -> text)
        self.error: BaseException | None = None
        self._waiting: dict[str, str] = {}
        self._closed = False
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._cache = EmbeddingCache(store, embedder.model_id)
        self._embedder = embedder
        self._run_id = run_id
        self._shard = f"{run_id}-{AHEAD}-{secrets.token_hex(3)}"  # this thread's shards start so
        self._thread = threading.Thread(target=self._work, name=f"prefetch-{run_id[:8]}", daemon=True)

    @classmethod
    def _for(cls, store: Store, embedder: Embedder, profile: str, run_id: str) -> EmbeddingPrefetch:
        with cls._lock:
            prefetch = cls._running.get((run_id, profile))
            if prefetch is None or prefetch._closed:
                old = prefetch
                prefetch = cls._running[(run_id, profile)] = cls(store, embedder, run_id)
                prefetch._thread.start()
                load_client_ahead()  # the run writes LanceDB rows once the model is done
            else:
                old = None
        if old:
            old.stop()
        return prefetch

    @classmethod
    def feed(cls, store: Store, embedder: Embedder, profile: str, texts: Iterable[str], run_id: str) -> int:
        """Hand over texts the profile's chunk map will hold (from a served version's
        claims, before the chunk map exists); returns how many were new to the thread."""
        texts = {sha256_text(t): t for t in texts}
        if not texts:
            return 0
        return cls._for(store, embedder, profile, run_id)._add(texts, final=False)

    @classmethod
    def start(
        cls,
        store: Store,
        embedder: Embedder,
        profile: Profile,
        documents: Sequence[str],
        run_id: str,
        force: bool = False,
    ) -> EmbeddingPrefetch | None:
        """Hand over the texts the profile's embeddings step will need for these documents
        and the cache lacks, and close the hand-over (texts fed earlier and not among them
        are dropped); None when nothing is left to embed ahead."""
        pending = _to_embed(store, embedder, profile, documents, force, lambda *_: None)
        texts = {sha256_text(t): t for _, table, _ in pending for _, t in _texts_of(table)}
        with cls._lock:
            running = cls._running.get((run_id, profile.name))
        done = running.embedded() if running else set()
        held = EmbeddingCache(store, embedder.model_id).get(set(texts) - done)
        missing = {sha: t for sha, t in texts.items() if sha not in held and sha not in done}
        if not missing and running is None:
            return None
        return cls.settle(store, embedder, profile.name, missing, run_id)

    @classmethod
    def settle(
        cls, store: Store, embedder: Embedder, profile: str, texts: Mapping[str, str], run_id: str
    ) -> EmbeddingPrefetch | None:
        """Close the hand-over with the texts (sha256 -> text) the chunk map holds and the
        cache lacked: a text fed earlier and not among them is dropped unless the model
        already embedded it; None when none of them is embedded here."""
        prefetch = cls._for(store, embedder, profile, run_id)
        prefetch._add(texts, final=True)
        return prefetch if prefetch.texts else None

    def embedded(self) -> set[str]:
        """The hashes of the texts embedded so far."""
        with self._changed:
            return set(self.vectors)

    def _add(self, texts: Mapping[str, str], final: bool) -> int:
        with self._changed:
            if final:
                # the chunk map's own texts: a fed text it does not hold is not embedded
                self._waiting = {sha: t for sha, t in self._waiting.items() if sha in texts}
                self.texts = {sha: t for sha, t in self.texts.items() if sha in texts or sha in self.vectors}
            new = {sha: t for sha, t in texts.items() if sha not in self.texts}
            self.texts.update(new)
            self._waiting.update(new)
            self._closed = self._closed or final
            self._changed.notify_all()
        return len(new)

    @classmethod
    def take(cls, run_id: str, profile: str) -> dict[str, np.ndarray]:
        """The vectors this run's prefetch for the profile embedded, once it has finished
        (empty when there was none); a failed prefetch gives what it made before failing."""
        with cls._lock:
            prefetch = cls._running.pop((run_id, profile), None)
        if prefetch is None:
            return {}
        prefetch._close()
        prefetch._thread.join()
        if prefetch.error is not None:
            _LOG.warning("embedding ahead stopped (%s); the embeddings step embeds the rest", prefetch.error)
        return prefetch.vectors

    def _close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def stop(self) -> None:
        self._stop.set()
        self._close()
        self._thread.join()

    def _next_part(self) -> dict[str, str] | None:
        """The shortest waiting texts, at most PREFETCH_TEXTS; None once closed and empty,
        or stopped."""
        with self._changed:
            while not self._waiting and not self._closed and not self._stop.is_set():
                self._changed.wait()
            if self._stop.is_set() or not self._waiting:
                return None
            shas = sorted(self._waiting, key=lambda sha: len(self._waiting[sha]))[:PREFETCH_TEXTS]
            return {sha: self._waiting.pop(sha) for sha in shas}

    def _work(self) -> None:
        try:
            while (part := self._next_part()) is not None:
                # fed texts are not looked up before: an earlier run's vectors are found
                # here. The shards this thread wrote are not read again (a text is handed
                # over once, and what it embedded is in ``vectors``), so a part's look-up
                # does not grow with the run.
                held = self._cache.get(set(part), skip=f"{self._shard}-")
                fresh = self._cache.embed_missing(self._embedder, part, held, self._shard)
                with self._changed:
                    self.vectors.update(fresh)
        except BaseException as exc:  # the step embeds what is missing; the error is logged there
            self.error = exc

    @classmethod
    def stop_run(cls, run_id: str) -> None:
        """Stop the prefetches of a run that has ended (its embeddings step did not take them)."""
        with cls._lock:
            ended = [key for key in cls._running if key[0] == run_id]
            running = [cls._running.pop(key) for key in ended]
        for prefetch in running:
            prefetch.stop()

    @classmethod
    def stop_all(cls) -> None:
        with cls._lock:
            running = list(cls._running.values())
            cls._running.clear()
        for prefetch in running:
            prefetch.stop()


atexit.register(EmbeddingPrefetch.stop_all)
