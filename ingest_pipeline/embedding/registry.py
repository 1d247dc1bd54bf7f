"""The embedder registry: factories found through the entry-point group
``ingest_pipeline.embedders`` (the built-ins are declared there too), and the embedders a
process has made, each made once.

A factory is any callable with a ``ref`` (``id@version``) and a ``summary``, called as
``factory(settings, runtime)`` with the profile's embedder settings (a mapping) and the
``Runtime`` of the machine (batching, threads, where models may be written). It returns
an ``Embedder`` (``embedding.port``). A third-party package adds one the way it adds a
chunker: an entry point in its own ``pyproject.toml``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from ingest_pipeline.embedding.port import Embedder, parse_ref
from ingest_pipeline.identity import canonical_json

ENTRY_POINT_GROUP = "ingest_pipeline.embedders"


@dataclass(frozen=True)
class Runtime:
    """How local models run on this machine, and where a model made here is written."""

    batch_size: int = 8
    threads: int | None = 1
    workers: int = 1
    models_dir: str = ""  # a local folder for models built from bundled weights


class EmbedderRegistry:
    """The installed embedder factories, by ``id@version``."""

    def __init__(self) -> None:
        self._factories: dict[str, Any] = {}
        self._sources: dict[str, str] = {}

    def register(self, factory: Any, source: str = "direct") -> None:
        ref = getattr(factory, "ref", None)
        if not isinstance(ref, str):
            raise TypeError(f"embedder factory {factory!r} has no ref (id@version)")
        parse_ref(ref)
        if ref in self._factories and self._factories[ref] is not factory:
            raise ValueError(f"embedder {ref} is installed twice ({self._sources[ref]} and {source})")
        self._factories[ref] = factory
        self._sources[ref] = source

    @classmethod
    def discover(cls) -> EmbedderRegistry:
        registry = cls()
        for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
            registry.register(point.load(), source=f"entry point {point.name} ({point.value})")
        return registry

    def refs(self) -> list[str]:
        return sorted(self._factories)

    def describe(self) -> list[dict[str, str]]:
        return [
            {"ref": ref, "summary": str(getattr(f, "summary", "")), "source": self._sources[ref]}
            for ref, f in sorted(self._factories.items())
        ]

    def factory(self, ref: str) -> Any:
        if ref not in self._factories:
            raise KeyError(
                f"no embedder {ref!r} is installed (installed: {', '.join(self.refs()) or 'none'})"
            )
        return self._factories[ref]

    def make(self, ref: str, settings: Mapping[str, Any], runtime: Runtime) -> Embedder:
        """The process's embedder for ``ref`` with these settings and runtime, made once."""
        key = (ref, canonical_json(dict(settings)), runtime)
        with _MAKING:
            made = _MADE.get(key)
            if made is None:
                made = self.factory(ref)(dict(settings), runtime)
                for name in ("ref", "model_id", "max_tokens"):
                    if getattr(made, name, None) is None:
                        raise TypeError(f"embedder {ref} made an object without {name!r}")
                _MADE[key] = made
            return made


# The embedders this process made, by (ref, settings, runtime): a model loads once per
# process however many runs, resources and profiles ask for it.
_MADE: dict[tuple[str, str, Runtime], Embedder] = {}
_MAKING = threading.Lock()


def made() -> list[Embedder]:
    """The embedders this process has made so far (the benchmarks read their usage)."""
    with _MAKING:
        return list(_MADE.values())


_DISCOVERED: dict[tuple[tuple[str, str], ...], EmbedderRegistry] = {}


def installed() -> EmbedderRegistry:
    """The registry of the installed entry points, discovered again only when they change
    (a package installed while a daemon runs is found on its next run)."""
    points = tuple(sorted((p.name, p.value) for p in entry_points(group=ENTRY_POINT_GROUP)))
    with _MAKING:
        if points not in _DISCOVERED:
            _DISCOVERED.clear()
            _DISCOVERED[points] = EmbedderRegistry.discover()
        return _DISCOVERED[points]
