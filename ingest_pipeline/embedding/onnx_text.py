"""A text embedding model as an ONNX graph and a Hugging Face ``tokenizer.json``, run with
onnxruntime: the shape of every sentence-transformers model exported to ONNX (MiniLM, bge,
e5, gte...). Pooling (mean over the attention mask, or the first token), normalisation and
the query and passage prefixes are settings, as are the execution providers (CUDA where
``onnxruntime-gpu`` is installed)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ingest_pipeline.embedding.port import identity_key, normalised
from ingest_pipeline.embedding.word_counts import counter_for

POOLINGS = ("mean", "cls")


class OnnxTextEmbedder:
    """An ONNX text model. Texts are sorted by length and batched so padding stays small.

    ``workers`` sessions run batches side by side, each on its own thread with ``threads``
    intra-op threads (None: onnxruntime's own count): one-thread sessions side by side beat
    one session on every core, whose threads wait for each other at every operator
    (``bench/embed_threads_bench.py``)."""

    modalities = ("text",)

    def __init__(
        self,
        model_path: str,
        tokenizer_path: str,
        *,
        ref: str,
        dim: int,
        max_tokens: int,
        identity: dict[str, Any],
        model_id: str | None = None,
        pooling: str = "mean",
        normalize: bool = True,
        query_prefix: str = "",
        passage_prefix: str = "",
        providers: Sequence[str] = ("CPUExecutionProvider",),
        batch_size: int = 8,
        threads: int | None = None,
        workers: int = 1,
    ) -> None:
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, not {pooling!r}")
        self._model_path, self._tokenizer_path = model_path, tokenizer_path
        self.ref, self.dim, self.max_tokens = ref, dim, max_tokens
        self._identity = dict(identity)
        self.model_id = model_id or identity_key(ref, self._identity)
        self.pooling, self.normalize = pooling, normalize
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        self.providers = tuple(providers)
        self.batch_size = batch_size
        self.threads = threads
        self.workers = max(1, workers)
        self._lock = threading.Lock()
        self._sessions: list = []
        self._tokenizer = None
        self._counter = None
        self._used = {"calls": 0, "texts": 0, "tokens": 0, "padded_tokens": 0, "thread_cpu_seconds": 0.0}
        self._used_lock = threading.Lock()

    def identity(self) -> dict[str, Any]:
        return {"ref": self.ref, **self._identity}

    def model_path(self) -> str:
        return self._model_path

    def tokenizer_path(self) -> str:
        return self._tokenizer_path

    def usage(self) -> dict[str, float]:
        """What the model did so far in this process: model calls, texts, their tokens (with
        the special tokens), the tokens it ran with padding, and the CPU time of the threads
        that called it (all of the model's work when each session runs on one thread, as
        the ingest's do; with onnxruntime's own thread pool, only the calling thread's)."""
        with self._used_lock:
            return dict(self._used)

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
                available = set(ort.get_available_providers())
                providers = [p for p in self.providers if p in available] or ["CPUExecutionProvider"]
                sessions = [
                    ort.InferenceSession(self.model_path(), sess_options=options, providers=providers)
                    for _ in range(self.workers)
                ]
                self._inputs = {i.name for i in sessions[0].get_inputs()}
                self._tokenizer = tokenizer
                self._counter = counter
                self._sessions = sessions

    def probe_width(self) -> int:
        """The width of the model's vectors, from one call."""
        self._load()
        return int(self._run(self._sessions[0], self._tokenizer.encode_batch(["width"]), [0]).shape[1])

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts without truncation (including the special tokens)."""
        self._load()
        extra = self._counter.tokenizer.num_special_tokens_to_add(False)
        return [n + extra for n in self._counter.counts(texts)]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the text's tokens (special tokens left out), untruncated."""
        self._load()
        encoding = self._counter.tokenizer.encode(text)
        return [span for span, special in zip(encoding.offsets, encoding.special_tokens_mask) if not special]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Passages, with the passage prefix."""
        if self.passage_prefix:
            texts = [self.passage_prefix + t for t in texts]
        return self._embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Questions, with the query prefix."""
        if self.query_prefix:
            texts = [self.query_prefix + t for t in texts]
        return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
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

        with ThreadPoolExecutor(len(self._sessions), thread_name_prefix="onnx-embed") as pool:
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
        if hidden.ndim == 2:  # the graph pools itself (a sentence embedding output)
            pooled = hidden
        elif self.pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        spent = time.thread_time() - started
        with self._used_lock:
            used = self._used
            used["calls"] += 1
            used["texts"] += len(batch)
            used["tokens"] += int(mask.sum())
            used["padded_tokens"] += mask.size
            used["thread_cpu_seconds"] += spent
        return normalised(pooled) if self.normalize else pooled.astype(np.float32)
