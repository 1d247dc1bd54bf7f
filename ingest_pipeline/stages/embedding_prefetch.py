"""Embedding ahead: a profile's new texts embedded on a thread of the run's process while the
run's other steps parse and merge, instead of after them.

Its whole life is here. A chunker version that leads an indexed profile ``feed``s each
document's texts as its claims are written; the profile's chunk map ``start``s (closes) the
hand-over with the texts it really holds; the profile's embeddings step ``take``s the
vectors. A run that ends without its embeddings step is stopped by ``stop_run`` (the
``ingest`` command calls it after each run), and a process that exits stops every one
between model calls (the ``atexit`` hook below)."""

from __future__ import annotations

import atexit
import logging
import secrets
import threading
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ingest_pipeline.embedding.port import Embedder
from ingest_pipeline.identity import sha256_text
from ingest_pipeline.settings import Profile
from ingest_pipeline.stages.embeddings import EmbeddingCache, documents_to_embed, sees_words, texts_of
from ingest_pipeline.storage.store import Store
from ingest_pipeline.storage.vector_index import load_client_ahead

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
        texts = {sha256_text(t): t for t in texts} if sees_words(embedder) else {}
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
        pending = documents_to_embed(store, embedder, profile, documents, force, lambda *_: None)
        words = sees_words(embedder)
        texts = {sha256_text(t): t for _, table, _ in pending for _, t in texts_of(table, words=words)}
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
