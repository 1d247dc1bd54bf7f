"""The Dagster resources the assets type-hint, each an interface with one real
implementation, passed through ``resources=``:

- ``ingest`` (``IngestResource``): the storage root's settings and the ``force`` switch;
- ``store`` (``StoreResource``): the lake's tables (``store.Store``);
- ``embedder`` (``EmbedderResource``): each profile's embedding model;
- ``index`` (``IndexResource``): the LanceDB tables, one per profile;
- ``chunkers`` (``ChunkersResource``): the installed chunker versions, discovered once;
- ``parse`` (``ParseWorkerResource``): the sandboxed parse worker, stopped when a step ends.

``resources_for(settings)`` builds them all; the code location, the CLI, the sensor, the
schedules and the tests bind the same ones. ``parts_for(data)`` gives plain callers (the
CLI, evaluation, the sensor's tick) a ``parts.Parts`` over such a set, never cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from ingest_pipeline.embedding.port import Embedder
from ingest_pipeline.embedding.registry import Runtime, installed
from ingest_pipeline.parts import Parts
from ingest_pipeline.registry import ChunkerRegistry
from ingest_pipeline.runtime.isolation import ParseWorker, kept
from ingest_pipeline.settings import Settings, load_settings
from ingest_pipeline.storage.store import Store
from ingest_pipeline.storage.vector_index import VectorIndex


class IngestResource(ConfigurableResource):
    """The storage root (``data/`` by default) and its settings (``ingest_pipeline.toml``).

    ``force`` (in the launchpad, run config ``resources: {ingest: {config: {data: <root>,
    force: true}}}``; run config for a resource replaces all its fields, so ``data`` is given
    too) makes every stage of the run recompute whatever its fingerprint says, like the run
    tag ``ingest/force=true``. The other resources are bound to the code location's root."""

    data: str
    force: bool = False

    _settings: Settings | None = PrivateAttr(default=None)

    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.data)
        return self._settings

    def setup_for_execution(self, context: InitResourceContext) -> None:
        """Every run makes the LanceDB writers' pool before a step claims it (``instance.pools``)."""
        if context.instance is not None:
            from ingest_pipeline.instance.pools import ensure_pool

            ensure_pool(context.instance)


class StoreResource(ConfigurableResource):
    """The Parquet lake under ``root`` (a folder or an object-store URI), as a ``Store``."""

    root: str

    _store: Store | None = PrivateAttr(default=None)

    def store(self) -> Store:
        if self._store is None:
            self._store = Store.at(self.root)
        return self._store


class EmbedderResource(ConfigurableResource):
    """The embedders of the storage root's profiles (``[embedder]`` and each profile's
    ``embedder``), made through the installed ``ingest_pipeline.embedders`` entry points
    and loaded once per process; batching, threads and sessions from the settings.

    ``for_profile(name)`` is a profile's embedder; the ``Embedder`` methods on the
    resource itself are the served profile's."""

    data: str
    batch_size: int = 4  # settings.embed_batch
    threads: int = 1  # settings.embed_threads (0: onnxruntime's default)
    workers: int = 1  # settings.embed_workers: sessions side by side

    _settings: Settings | None = PrivateAttr(default=None)

    def for_profile(self, profile: str) -> Embedder:
        if self._settings is None:
            self._settings = load_settings(self.data)
        ref, options = self._settings.embedder_of(profile)
        runtime = Runtime(
            self.batch_size, self.threads or None, self.workers, models_dir=self._settings.models_dir
        )
        return installed().make(ref, options, runtime)

    def model_ids(self) -> set[str]:
        """The model ids of the indexed profiles' embedders."""
        if self._settings is None:
            self._settings = load_settings(self.data)
        return {self.for_profile(p.name).model_id for p in self._settings.indexed_profiles}

    def served(self) -> Embedder:
        if self._settings is None:
            self._settings = load_settings(self.data)
        return self.for_profile(self._settings.default_profile)

    @property
    def model_id(self) -> str:
        return self.served().model_id

    @property
    def dim(self) -> int:
        return self.served().dim

    @property
    def max_tokens(self) -> int:
        return self.served().max_tokens

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.served().embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.served().embed_queries(texts)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.served().count_tokens(texts)

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        return self.served().token_offsets(text)


class IndexResource(ConfigurableResource):
    """The LanceDB tables under ``uri`` (one per profile); ``dim``: the width of a table
    made without an embedder named (each profile's table records its own)."""

    uri: str
    dim: int = 384

    _index: VectorIndex | None = PrivateAttr(default=None)

    def index(self) -> VectorIndex:
        if self._index is None:
            self._index = VectorIndex(self.uri, self.dim)
        return self._index


class ChunkersResource(ConfigurableResource):
    """The chunker versions installed under the ``ingest_pipeline.chunkers`` entry points,
    configured by the storage root's settings; discovered once per resource, and every
    profile's order checked then (a profile naming an unknown version fails here)."""

    data: str

    _registry: ChunkerRegistry | None = PrivateAttr(default=None)

    def registry(self) -> ChunkerRegistry:
        if self._registry is None:
            from ingest_pipeline.embedding.sizing import chunker_sizings
            from ingest_pipeline.readers import reader_ids

            settings = load_settings(self.data)
            registry = ChunkerRegistry.discover(settings.chunker_configs, reserved_ids=reader_ids())
            for profile in settings.profiles:
                registry.order_for(profile.chunkers)
            self._registry = registry.sized(chunker_sizings(settings, registry))
        return self._registry


class ParseWorkerResource(ConfigurableResource):
    """Readers and chunkers run in a spawned worker with a time and memory limit. The worker
    starts on the first document a step parses and is stopped when the step ends, so a step
    process exits as soon as its work is done (``timeout`` 0 parses in the step's process)."""

    timeout: float = 300.0
    memory_mib: int = 6144

    _worker: ParseWorker | None = PrivateAttr(default=None)
    _borrowed: bool = PrivateAttr(default=False)
    _more: list[ParseWorker] = PrivateAttr(default_factory=list)

    def worker(self) -> ParseWorker:
        """This step's worker: the process's kept one when its runs share one
        (``isolation.kept_worker``, the CLI), else its own."""
        if self._worker is None:
            shared = kept(self.timeout, self.memory_bytes())
            self._worker = shared or ParseWorker(self.timeout, self.memory_bytes())
            self._borrowed = shared is not None
        return self._worker

    def workers(self, count: int) -> list[ParseWorker]:
        """This step's worker and ``count - 1`` more of its own, with the same limits, for a
        step whose documents parse independently (the pages step); they stop with the step.
        One when parsing runs in process."""
        first = self.worker()
        if first.timeout <= 0:
            return [first]
        while len(self._more) < count - 1:
            self._more.append(ParseWorker(self.timeout, self.memory_bytes()))
        return [first, *self._more[: max(0, count - 1)]]

    def memory_bytes(self) -> int | None:
        return self.memory_mib * 2**20 if self.memory_mib else None

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        for worker in self._more:
            worker.close()
        if self._worker is not None and not self._borrowed:  # a kept worker stops with its block
            self._worker.close()
        self._worker, self._borrowed, self._more = None, False, []


def parse_worker_for(settings: Settings) -> ParseWorkerResource:
    """The parse worker resource configured from a storage root's settings."""
    memory = settings.parse_memory_bytes or 0
    return ParseWorkerResource(timeout=settings.parse_timeout, memory_mib=memory // 2**20)


def resources_for(settings: Settings, embedder: EmbedderResource | None = None) -> dict[str, Any]:
    """The resources every job of a storage root binds (the CLI and the tests use the same)."""
    embedder = embedder or EmbedderResource(
        data=settings.data,
        batch_size=settings.embed_batch,
        threads=settings.embed_threads,
        workers=settings.embed_workers,
    )
    return {
        "ingest": IngestResource(data=settings.data),
        "store": StoreResource(root=settings.lake_root),
        "embedder": embedder,
        "index": IndexResource(uri=settings.lancedb_uri),
        "chunkers": ChunkersResource(data=settings.data),
        "parse": parse_worker_for(settings),
    }


def parts_for(data: str) -> Parts:
    """The parts of a storage root, from the same resources its code location binds."""
    return Parts(resources_for(load_settings(data)))
