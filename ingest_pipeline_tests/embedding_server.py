"""An OpenAI-compatible ``POST /v1/embeddings`` server on loopback, serving the bundled model,
that misbehaves on request: the tests of the ``openai@1`` embedder talk to it over a real
socket. ``faults`` is the order of answers to come, one per request: ``"429"``, ``"500"``,
``"slow"`` (answers after ``slow_seconds``), ``"drop"`` (closes the connection without an
answer); once it is empty every request is answered.

An input item ``{"image": "<base64>"}`` (the form multimodal endpoints such as Jina's take)
is embedded into the same space as the texts: no image model runs on this machine, so the
server stands in for one by reading the picture's words with the bundled OCR and embedding
them with the model, which is what puts a picture of words near a query for them."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ingest_pipeline.embedding.minilm import minilm


class EmbeddingServer:
    def __init__(self, faults=(), slow_seconds: float = 3.0, token: str | None = None) -> None:
        self.faults = deque(faults)
        self.slow_seconds = slow_seconds
        self.token = token
        self.requests: list[dict] = []  # each request: its texts' count and what it got
        self.lock = threading.Lock()
        self.model = minilm()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                with server.lock:
                    fault = server.faults.popleft() if server.faults else "ok"
                    server.requests.append(
                        {
                            "texts": len(body["input"]),
                            "images": sum(isinstance(item, dict) for item in body["input"]),
                            "fault": fault,
                            "auth": self.headers.get("authorization"),
                        }
                    )
                if server.token and self.headers.get("authorization") != f"Bearer {server.token}":
                    return self._answer(401, {"error": {"message": "bad key"}})
                if fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if fault == "429":
                    return self._answer(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"})
                if fault == "500":
                    return self._answer(500, {"error": {"message": "boom"}})
                if fault == "slow":
                    time.sleep(server.slow_seconds)
                vectors = server.model.embed([_as_text(item) for item in body["input"]])
                data = [
                    {"object": "embedding", "index": i, "embedding": v.tolist()}
                    for i, v in enumerate(vectors)
                ]
                data.reverse()  # the API allows any order; ``index`` says where each goes
                self._answer(200, {"object": "list", "data": data, "model": body["model"]})

            def _answer(self, status: int, payload: dict, headers: dict | None = None) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _as_text(item) -> str:
    """A text as it is; a picture as the words OCR reads in it."""
    if isinstance(item, str):
        return item
    import base64
    import io

    from PIL import Image

    from ingest_pipeline.readers.ocr import recognize

    _, text = recognize(Image.open(io.BytesIO(base64.b64decode(item["image"]))))
    return text or " "
