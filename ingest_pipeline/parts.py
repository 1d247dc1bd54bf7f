"""The parts of one storage root a plain caller works with (the CLI, evaluation, the
sensor's tick, the tests): settings, store (and its lake), LanceDB index, chunker registry
and embedder, each taken from its resource (``resources``) on first use. Built from a set
of resources, never cached globally: the assets and the CLI use the very same resources.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingest_pipeline.registry import ChunkerRegistry
    from ingest_pipeline.settings import Settings
    from ingest_pipeline.storage.lake import Lake
    from ingest_pipeline.storage.store import Store
    from ingest_pipeline.storage.vector_index import VectorIndex


class Parts:
    """What a set of resources (key -> resource) gives; a part whose resource is not in the
    set is never asked for (the sensor binds only settings, store and index)."""

    def __init__(self, resources: Mapping[str, Any]) -> None:
        self.resources = dict(resources)

    @property
    def settings(self) -> Settings:
        return self.resources["ingest"].settings()

    @property
    def store(self) -> Store:
        return self.resources["store"].store()

    @property
    def lake(self) -> Lake:
        return self.store.lake

    @property
    def index(self) -> VectorIndex:
        return self.resources["index"].index()

    @property
    def registry(self) -> ChunkerRegistry:
        return self.resources["chunkers"].registry()

    @property
    def embedder(self) -> Any:  # resources.EmbedderResource
        return self.resources["embedder"]
