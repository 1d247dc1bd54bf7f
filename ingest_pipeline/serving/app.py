"""The HTTP service: one Starlette app over one storage root, read-only.

Every route reads; none writes. A document is named by its id and looked up in the store,
never by a path from the request, so no file outside the root can be reached through it.
The model and the tables are opened once, when the service starts.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from ingest_pipeline.identity import display_name
from ingest_pipeline.retrieval.filters import DOCUMENT_FIELDS, FilterError
from ingest_pipeline.retrieval.search import CONTEXTS, GROUPS, Request, Searcher
from ingest_pipeline.serving.web_page import PAGE

RECORDS_MAX_AGE = 30.0  # seconds a service keeps the document records before reading them again
MAX_K = 50


class BadRequest(ValueError):
    """A request the service cannot answer as asked: status 400 with the reason."""


def _int(params, name: str, default: int, low: int, high: int) -> int:
    raw = params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number") from None
    if not low <= value <= high:
        raise BadRequest(f"{name} must be between {low} and {high}")
    return value


def _choice(params, name: str, choices, default):
    value = params.get(name) or default
    if value is not None and value not in choices:
        raise BadRequest(f"{name} must be one of {', '.join(choices)}")
    return value


def _where(params) -> str | dict[str, Any] | None:
    """The request's filter: ``where`` (the filter language), or one parameter per document
    field (``organisation=Apple&year=2022``), never both."""
    fields = {k: params[k] for k in DOCUMENT_FIELDS if params.get(k)}
    if params.get("where") and fields:
        raise BadRequest("give a filter as where=… or as field parameters, not both")
    if "year" in fields:
        fields["year"] = _int(params, "year", 0, 1000, 9999)
    return params.get("where") or fields or None


class Service:
    def __init__(self, parts) -> None:
        self.parts = parts
        self.searcher = Searcher(parts)
        self._read_at = time.monotonic()

    def warm(self) -> None:
        """Load the served profile's model and table before the first request."""
        profile = self.parts.settings.default_profile
        if self.parts.settings.is_indexed(profile):
            self.parts.embedder.for_profile(profile).embed_queries(["warm"])
            self.parts.index.open(profile)
        _ = self.searcher.records

    def _fresh(self) -> Searcher:
        if time.monotonic() - self._read_at > RECORDS_MAX_AGE:
            self.searcher.refresh()
            self._read_at = time.monotonic()
        return self.searcher

    def search(self, params) -> dict[str, Any]:
        query = (params.get("q") or "").strip()
        if not query:
            raise BadRequest("q (the question) is required")
        request = Request(
            query,
            params.get("profile") or None,
            k=_int(params, "k", 5, 1, MAX_K),
            mode=_choice(params, "mode", ("vector", "text", "hybrid"), "hybrid"),
            where=_where(params),
            group=_choice(params, "group", GROUPS, "page"),
            context=_choice(params, "context", CONTEXTS, None),
        )
        started = time.perf_counter()
        result = self._fresh().search(request)
        return {
            "query": query,
            "profile": result.profile,
            "named": result.named,
            "seconds": round(time.perf_counter() - started, 4),
            "results": [_shown(hit) for hit in result.hits],
        }

    def documents(self) -> list[dict[str, Any]]:
        keep = ("document_id", "path", *DOCUMENT_FIELDS, "pages")
        return [_shown({k: r.get(k) for k in keep}) for r in self._fresh().records]

    def document(self, document: str) -> dict[str, Any] | None:
        record = self._fresh().record(document)
        if record is None:
            return None
        return _shown({**record, "read_from": json.loads(record.get("read_from") or "{}")})


def _shown(item: dict[str, Any]) -> dict[str, Any]:
    """The item with ``shown_path``: its path as a person may see it (control characters and
    bytes that are not UTF-8 written as visible escapes); ``path`` stays the name itself."""
    if item.get("path") is not None:
        item["shown_path"] = display_name(item["path"])
    return item


def _warming(service: Service):
    @contextlib.asynccontextmanager
    async def lifespan(app):
        service.warm()
        yield

    return lifespan


def build_app(parts) -> Starlette:
    from ingest_pipeline.commands.lineage import explain_chunk
    from ingest_pipeline.commands.show import ShowError
    from ingest_pipeline.serving.page_picture import page_png
    from ingest_pipeline.storage.vector_index import EmbedderMismatch

    service = Service(parts)

    def answer(work):
        try:
            return work()
        except (BadRequest, FilterError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except EmbedderMismatch as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)
        except ShowError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)

    def index(request: HttpRequest) -> Response:
        return HTMLResponse(PAGE)

    def search(request: HttpRequest) -> Response:
        return answer(lambda: JSONResponse(service.search(request.query_params)))

    def documents(request: HttpRequest) -> Response:
        return JSONResponse(service.documents())

    def document(request: HttpRequest) -> Response:
        found = service.document(request.path_params["document"])
        if found is None:
            return JSONResponse({"error": "no such document"}, status_code=404)
        return JSONResponse(found)

    def lineage(request: HttpRequest) -> Response:
        chains = explain_chunk(
            parts, request.path_params["chunk"], request.query_params.get("profile") or None
        )
        if not chains:
            return JSONResponse({"error": "no such chunk"}, status_code=404)
        return JSONResponse(json.loads(json.dumps(chains, default=str)))

    def picture(request: HttpRequest) -> Response:
        params = request.query_params

        def draw() -> Response:
            page = _int(request.path_params, "page", 1, 1, 1_000_000)
            chunks = [c for c in (params.get("chunks") or "").split(",") if c][:MAX_K]
            profile = params.get("profile") or parts.settings.default_profile
            width = _int(params, "width", 900, 200, 2000)
            png = page_png(parts, request.path_params["document"], page, chunks, profile, width)
            return Response(png, media_type="image/png", headers={"Cache-Control": "max-age=60"})

        return answer(draw)

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/api/search", search),
            Route("/api/documents", documents),
            Route("/api/documents/{document}", document),
            Route("/api/chunks/{chunk}/lineage", lineage),
            Route("/api/pages/{document}/{page}.png", picture),
        ],
        lifespan=_warming(service),
    )
    app.state.service = service
    return app
