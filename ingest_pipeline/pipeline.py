"""The parts a run works with, built once per process from the settings. The parse worker is
not one of them: it lives as long as the step that uses it (``resources.ParseWorkerResource``)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ingest_pipeline.embedding import Embedder, default_embedder
from ingest_pipeline.lake import Lake
from ingest_pipeline.readers import reader_ids
from ingest_pipeline.registry import ChunkerRegistry
from ingest_pipeline.settings import Settings, load_settings
from ingest_pipeline.store import Store
from ingest_pipeline.vector_index import VectorIndex


@dataclass
class Pipeline:
    settings: Settings
    store: Store
    registry: ChunkerRegistry
    embedder: Embedder
    index: VectorIndex

    @property
    def lake(self) -> Lake:
        return self.store.lake


def build_pipeline(settings: Settings, embedder: Embedder | None = None) -> Pipeline:
    embedder = embedder or default_embedder()
    registry = ChunkerRegistry.discover(settings.chunker_configs, reserved_ids=reader_ids())
    for profile in settings.profiles:
        registry.order_for(profile.chunkers)  # a profile naming an unknown version fails here
    return Pipeline(
        settings=settings,
        store=Store(Lake(settings.lake_root)),
        registry=registry,
        embedder=embedder,
        index=VectorIndex(settings.lancedb_uri, embedder.dim),
    )


@functools.lru_cache(maxsize=8)
def pipeline_for(data: str) -> Pipeline:
    """One Pipeline per storage root and process (the model loads once)."""
    return build_pipeline(load_settings(data))
