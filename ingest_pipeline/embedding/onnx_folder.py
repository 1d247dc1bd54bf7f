"""``onnx@1``: any sentence-transformers-style model exported to ONNX, from a local folder.

The folder holds the graph (``model.onnx``, or ``onnx/model.onnx`` as Optimum writes it)
and ``tokenizer.json``. Pooling, normalisation, the query and passage prefixes (e5 wants
``"query: "`` and ``"passage: "``, bge an instruction for queries), the token limit and the
execution providers are settings; the width is read from the graph's output, or from a
first call when the graph leaves it open. The identity is the weights' and tokenizer's
sha256 with the settings that change vectors, never the folder's path: the same files
moved elsewhere keep their vectors."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ingest_pipeline.embedding.bundled_files import weights_sha256
from ingest_pipeline.embedding.onnx_text import OnnxTextEmbedder
from ingest_pipeline.embedding.port import factory, refuse_unknown

REF = "onnx@1"
SETTINGS = (
    "path",
    "model_file",
    "tokenizer_file",
    "pooling",
    "normalize",
    "query_prefix",
    "passage_prefix",
    "max_tokens",
    "dim",
    "providers",
)


def _graph_file(folder: str, named: str | None) -> str:
    candidates = [named] if named else ["model.onnx", os.path.join("onnx", "model.onnx")]
    for name in candidates:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"embedder {REF}: no {' or '.join(candidates)} in {folder}")


def _max_tokens(tokenizer_path: str, stated: Any) -> int:
    """The limit the settings state, else the tokenizer's own truncation, else 512."""
    if stated:
        return int(stated)
    from tokenizers import Tokenizer

    truncation = Tokenizer.from_file(tokenizer_path).truncation
    return int(truncation["max_length"]) if truncation else 512


def _width(model_path: str) -> int | None:
    """The graph's output width when it states one."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model_path, sess_options=options, providers=["CPUExecutionProvider"])
    last = session.get_outputs()[0].shape[-1]
    return last if isinstance(last, int) else None


def _folder(settings: Mapping[str, Any]) -> str:
    refuse_unknown(REF, settings, SETTINGS)
    if not settings.get("path"):
        raise ValueError(f"embedder {REF} needs a path: the folder holding model.onnx and tokenizer.json")
    return os.path.abspath(os.path.expanduser(str(settings["path"])))


def _tokenizer_file(folder: str, settings: Mapping[str, Any]) -> str:
    tokenizer_path = os.path.join(folder, str(settings.get("tokenizer_file") or "tokenizer.json"))
    if not os.path.isfile(tokenizer_path):
        raise FileNotFoundError(f"embedder {REF}: no {os.path.basename(tokenizer_path)} in {folder}")
    return tokenizer_path


def folder_sizing(settings: Mapping[str, Any]):
    """The folder's tokenizer and the model's limit, read without loading the graph."""
    from ingest_pipeline.embedding.sizing import tokenizer_sizing

    tokenizer_path = _tokenizer_file(_folder(settings), settings)
    return tokenizer_sizing(tokenizer_path, _max_tokens(tokenizer_path, settings.get("max_tokens")))


@factory(
    REF,
    "a sentence-transformers model exported to ONNX, from a local folder (settings: path, ...)",
    sizing=folder_sizing,
)
def make_onnx_folder(settings: Mapping[str, Any], runtime) -> OnnxTextEmbedder:
    folder = _folder(settings)
    model_path = _graph_file(folder, settings.get("model_file"))
    tokenizer_path = _tokenizer_file(folder, settings)
    options = {
        "pooling": str(settings.get("pooling", "mean")),
        "normalize": bool(settings.get("normalize", True)),
        "query_prefix": str(settings.get("query_prefix", "")),
        "passage_prefix": str(settings.get("passage_prefix", "")),
    }
    max_tokens = _max_tokens(tokenizer_path, settings.get("max_tokens"))
    dim = int(settings.get("dim") or 0) or _width(model_path)
    identity = {
        "weights_sha256": weights_sha256(model_path),
        "tokenizer_sha256": weights_sha256(tokenizer_path),
        "max_tokens": max_tokens,
        **options,
    }
    embedder = OnnxTextEmbedder(
        model_path,
        tokenizer_path,
        ref=REF,
        dim=dim or 0,
        max_tokens=max_tokens,
        identity=identity,
        providers=tuple(settings.get("providers") or ("CPUExecutionProvider",)),
        batch_size=runtime.batch_size,
        threads=runtime.threads or None,
        workers=runtime.workers,
        **options,
    )
    if not dim:  # the graph leaves its width open: one call says it
        embedder.dim = embedder.probe_width()
    return embedder
