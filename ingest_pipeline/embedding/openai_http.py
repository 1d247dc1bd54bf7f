"""``openai@1``: an embedding endpoint that speaks OpenAI's ``POST /v1/embeddings`` (OpenAI
itself, or a team's own TEI, vLLM or Ollama server).

Texts go in batches of ``batch_size``, ``concurrency`` requests at a time. A 429, a 5xx, a
timeout or a dropped connection is retried ``retries`` times with exponential backoff
(a ``Retry-After`` header is obeyed); an endpoint that stays down raises
``EndpointUnavailable``, which the embeddings stage turns into one errors row per
document, writing nothing. The API key is read from the environment variable the settings
name, at each request: it is never stored, logged, hashed into the identity or put in
metadata.

Chunks are sized in the model's tokens when the settings name its ``tokenizer.json``;
otherwise a text is counted as one token per ``chars_per_token`` characters (a
conservative budget: English runs about four characters a token) against the model's
stated ``max_tokens``. The identity is the model name and the settings that change vectors
(width, prefixes, token budget), not the URL: the same model moved to another host keeps
its vectors.
"""

from __future__ import annotations

import base64
import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ingest_pipeline.embedding.port import factory, identity_key, normalised, refuse_unknown

REF = "openai@1"
SETTINGS = (
    "base_url",
    "model",
    "api_key_env",
    "dim",
    "dimensions",
    "batch_size",
    "concurrency",
    "timeout",
    "retries",
    "backoff",
    "max_tokens",
    "tokenizer",
    "chars_per_token",
    "query_prefix",
    "passage_prefix",
    "images",
)
RETRIED_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class EndpointUnavailable(RuntimeError):
    """The endpoint did not answer usefully after every retry."""


class OpenAIEmbedder:
    """Vectors from an OpenAI-compatible ``/v1/embeddings`` endpoint."""

    ref = REF
    modalities = ("text",)

    def __init__(self, settings: Mapping[str, Any]) -> None:
        refuse_unknown(REF, settings, SETTINGS)
        for name in ("base_url", "model"):
            if not settings.get(name):
                raise ValueError(f"embedder {REF} needs {name}")
        self.url = str(settings["base_url"]).rstrip("/") + "/embeddings"
        self.model = str(settings["model"])
        self.api_key_env = str(settings.get("api_key_env") or "")
        self.dimensions = int(settings["dimensions"]) if settings.get("dimensions") else None
        self.batch_size = max(1, int(settings.get("batch_size", 64)))
        self.concurrency = max(1, int(settings.get("concurrency", 4)))
        self.timeout = float(settings.get("timeout", 60.0))
        self.retries = max(0, int(settings.get("retries", 5)))
        self.backoff = float(settings.get("backoff", 0.5))
        self.max_tokens = int(settings.get("max_tokens", 512))
        self.chars_per_token = float(settings.get("chars_per_token", 3.0))
        self.query_prefix = str(settings.get("query_prefix", ""))
        self.passage_prefix = str(settings.get("passage_prefix", ""))
        self.images = bool(settings.get("images", False))
        self.modalities = ("text", "image") if self.images else ("text",)
        tokenizer = settings.get("tokenizer")
        # how chunks are sized for it and how its tokens are counted: one definition for both
        self.sizing = endpoint_sizing(settings)
        self._identity = {
            "model": self.model,
            "dimensions": self.dimensions,
            "max_tokens": self.max_tokens,
            "tokens": "tokenizer" if tokenizer else f"{self.chars_per_token} chars",
            "query_prefix": self.query_prefix,
            "passage_prefix": self.passage_prefix,
            **({"images": True} if self.images else {}),
        }
        self.model_id = identity_key(REF, self._identity)
        self._client = None
        self._client_lock = threading.Lock()
        self._dim = int(settings["dim"]) if settings.get("dim") else (self.dimensions or 0)

    def identity(self) -> dict[str, Any]:
        return {"ref": REF, **self._identity}

    @property
    def dim(self) -> int:
        if not self._dim:  # the width the endpoint gives, from one call
            self._dim = int(self._request(["width"]).shape[1])
        return self._dim

    # -------------------------------------------------------------- token sizing

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        specials = self.sizing.specials
        return [n + specials for n in self.sizing.count(texts)]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        return self.sizing.offsets(text)

    def _fit(self, text: str) -> str:
        """The text cut to the model's limit (chunks are sized to it; a query may not be), in
        the tokens its sizing counts, so a text cut here counts as fitting."""
        spans = self.token_offsets(text)
        limit = self.max_tokens - self.sizing.specials
        return text if len(spans) <= limit else text[: spans[limit - 1][1]]

    # -------------------------------------------------------------- embedding

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([self.passage_prefix + t for t in texts])

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([self.query_prefix + t for t in texts])

    def embed_images(self, images: Sequence[bytes]) -> np.ndarray:
        """Pictures into the same space as the texts (``images = true``), each sent as
        ``{"image": "<base64>"}`` in ``input``, the form multimodal embedding endpoints such
        as Jina's take."""
        if not self.images:
            raise ValueError(f"embedder {REF} of {self.model} is not set to take images (images = true)")
        return self._batched([{"image": base64.b64encode(bytes(image)).decode("ascii")} for image in images])

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._batched([self._fit(t) or " " for t in texts])

    def _batched(self, fitted: list[Any]) -> np.ndarray:
        if not fitted:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        batches = [fitted[i : i + self.batch_size] for i in range(0, len(fitted), self.batch_size)]
        if len(batches) == 1 or self.concurrency == 1:
            parts = [self._request(b) for b in batches]
        else:
            with ThreadPoolExecutor(
                min(self.concurrency, len(batches)), thread_name_prefix="embed-http"
            ) as pool:
                parts = list(pool.map(self._request, batches))
        out = normalised(np.concatenate(parts))
        if self._dim and out.shape[1] != self._dim:
            raise EndpointUnavailable(f"{self.model} answered {out.shape[1]}-wide vectors, not {self._dim}")
        self._dim = self._dim or out.shape[1]
        return out

    def client(self):
        with self._client_lock:
            if self._client is None:
                import httpx

                self._client = httpx.Client(
                    timeout=self.timeout, limits=httpx.Limits(max_connections=self.concurrency)
                )
            return self._client

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _request(self, texts: list[Any]) -> np.ndarray:
        """One batch's vectors, in the texts' order, with retries."""
        import httpx

        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        last = "no answer"
        for attempt in range(self.retries + 1):
            wait = min(20.0, self.backoff * 2**attempt) * (0.5 + random.random() / 2)
            try:
                answer = self.client().post(self.url, json=body, headers=self._headers())
            except httpx.HTTPError as exc:  # timeouts, refused or dropped connections
                last = f"{type(exc).__name__}: {exc}"
            else:
                if answer.status_code == 200:
                    return _vectors(answer.json(), len(texts))
                last = f"HTTP {answer.status_code}: {answer.text[:200]}"
                if answer.status_code not in RETRIED_STATUS:
                    raise EndpointUnavailable(f"{self.url} refused the request ({last})")
                wait = _retry_after(answer.headers.get("retry-after"), wait)
            if attempt < self.retries:
                time.sleep(wait)
        raise EndpointUnavailable(f"{self.url} did not answer after {self.retries + 1} tries (last: {last})")


def _retry_after(header: str | None, default: float) -> float:
    try:
        return min(60.0, max(0.0, float(header))) if header is not None else default
    except ValueError:
        return default


def _vectors(answer: Mapping[str, Any], expected: int) -> np.ndarray:
    """The answer's vectors in input order (``index`` says where each goes)."""
    data = answer.get("data")
    if not isinstance(data, list) or len(data) != expected:
        raise EndpointUnavailable(f"the answer held {len(data or [])} vectors for {expected} texts")
    rows: list[Any] = [None] * expected
    for position, item in enumerate(data):
        rows[int(item.get("index", position))] = item["embedding"]
    if any(r is None for r in rows):
        raise EndpointUnavailable("the answer left some texts without a vector")
    return np.asarray(rows, dtype=np.float32)


def endpoint_sizing(settings: Mapping[str, Any]):
    """The tokenizer file the settings name and the stated limit, else the limit with the
    character budget ``count_tokens`` uses."""
    from ingest_pipeline.embedding.sizing import TokenSizing, tokenizer_sizing

    refuse_unknown(REF, settings, SETTINGS)
    limit = int(settings.get("max_tokens", 512))
    if settings.get("tokenizer"):
        return tokenizer_sizing(str(settings["tokenizer"]), limit)
    return TokenSizing(limit, chars_per_token=max(1, int(float(settings.get("chars_per_token", 3.0)))))


@factory(
    REF,
    "an OpenAI-compatible /v1/embeddings endpoint (settings: base_url, model, api_key_env, ...)",
    sizing=endpoint_sizing,
)
def make_openai(settings: Mapping[str, Any], runtime) -> OpenAIEmbedder:
    return OpenAIEmbedder(settings)
