"""The ``sources`` stage: observe one document's bytes (media type from the bytes, size,
sha256, mtime, path), and hand the bytes a source row describes to later stages."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

from ingest_pipeline import media_types
from ingest_pipeline.documents import DocumentEntry, UntrustedSource, check_trusted
from ingest_pipeline.identity import real_name, sha256_bytes, stored_name
from ingest_pipeline.readers.base import password_for
from ingest_pipeline.routing import DEFAULT_ROUTE, Facts, Route
from ingest_pipeline.settings import Settings
from ingest_pipeline.stages.common import (
    STAGE_VERSIONS,
    UNCHANGED,
    Outcome,
    StageError,
    UpstreamMissing,
    fingerprint_of,
    now,
)
from ingest_pipeline.stages.routes import NotRouted
from ingest_pipeline.storage import object_store
from ingest_pipeline.storage.store import Store


def observe_source(
    settings: Settings, store: Store, document: str, run_id: str, force: bool = False
) -> Outcome:
    """Record a document's bytes: media type from the bytes, size, sha256, mtime, path.

    A file that definitely cannot be observed (refused link, over its size limit, gone,
    not readable by us) loses its previous source row, so nothing downstream keeps serving
    what that row described. Any other failure to read it (a bucket that times out, a
    dropped connection) is ``SourceUnavailable``: the previous rows stay served and the next
    run tries again."""
    entry = store.entry(document)
    if entry is None:
        raise StageError(f"document {document} is not in the inventory; ingest its file first")
    try:
        return _observe(settings, store, entry, run_id, force)
    except DEFINITE_FAILURES:
        store.delete_source(document)
        raise
    except Exception as exc:
        raise SourceUnavailable(
            f"could not read {entry.path} now ({type(exc).__name__}: {exc}); its previous "
            "rows stay served and the next run tries again"
        ) from exc


class SourceChanged(StageError):
    """The file changed between its observation and its reading (while its ingest ran): a
    transient failure, so the document is not marked current and the next run reads it anew."""


class SourceUnavailable(StageError):
    """Reading a source failed in a way that may pass (network, bucket, timeout)."""


# Failures that say the file itself is refused, gone or unreadable: its rows are withdrawn.
DEFINITE_FAILURES = (StageError, PermissionError, IsADirectoryError, NotADirectoryError, FileNotFoundError)


def _observe(settings: Settings, store: Store, entry: DocumentEntry, run_id: str, force: bool) -> Outcome:
    document = entry.document_id
    try:
        real = check_trusted(settings, entry)
    except UntrustedSource as exc:
        raise StageError(str(exc)) from None
    try:
        stat = object_store.stat(real)
        media = media_types.detect_stream(lambda: object_store.open_input(real), stat.size, entry.path)
    except FileNotFoundError:
        raise StageError(f"source file is gone: {entry.path}") from None
    found = settings.routes.route_for(Facts(entry.path, media, stat.size))
    away = settings.routes.refusal(found)
    if away is not None:  # not an error: its rows, if it had any, leave the lake and search
        if (store.source_meta(document) or {}).get("turned_away") != away:
            store.turn_away_source(document, away)
        return Outcome(document, "skipped", {"reason": away})
    route = found or DEFAULT_ROUTE
    _check_size(settings, route, media, stat.size)
    try:
        sha = object_store.sha256(real, _HASH_BLOCK)
    except FileNotFoundError:
        raise StageError(f"source file is gone: {entry.path}") from None
    fingerprint = fingerprint_of(STAGE_VERSIONS["sources"], sha, media, entry.path)
    previous = store.source_meta(document)
    # The route is shown with the row, not part of its fingerprint: each later stage takes in
    # what the route changes of its own output, so a moved document recomputes only that.
    same_route = (previous or {}).get("route", DEFAULT_ROUTE.name) == route.name
    if previous and previous.get("fingerprint") == fingerprint and same_route and not force:
        return Outcome(
            document, "unchanged", {"sha256": sha, "media_type": media, "route": route.name, **UNCHANGED}
        )
    row = {
        "document_id": document,
        "path": entry.path,
        "uri": stored_name(entry.uri),
        "media_type": media,
        "bytes": stat.size,
        "sha256": sha,
        "mtime": datetime.fromtimestamp(stat.mtime, timezone.utc),
        "status": "observed",
        "observed_at": now(),
        "run_id": run_id,
        "route": route.name,
    }
    store.write_source(document, row, meta={"fingerprint": fingerprint, "sha256": sha, "route": route.name})
    status = "changed" if previous else "new"
    detail = {"sha256": sha, "media_type": media, "bytes": stat.size, "route": route.name}
    if previous and not same_route:
        detail["route_was"] = previous.get("route", DEFAULT_ROUTE.name)
    return Outcome(document, status, detail)


def _check_size(settings: Settings, route: Route, media: str, size: int) -> None:
    """A file over its route's size ceiling, or else over its format's, is not loaded."""
    if size > settings.max_file_bytes:
        raise StageError(f"file is {size} bytes, over the limit of {settings.max_file_bytes}")
    if route.max_mib is not None:
        if size > route.max_mib * MIB:
            raise StageError(
                f"{media} file of {size / MIB:.1f} MiB is over route '{route.name}''s limit of "
                f"{route.max_mib:g} MiB (max_mib); not loaded"
            )
        return
    family = media_types.size_family(media)
    limit = settings.max_bytes.get(family)
    if limit is not None and size > limit:
        raise StageError(
            f"{media} file of {size / MIB:.1f} MiB is over the {family} limit of "
            f"{limit / MIB:g} MiB ([limits.max_mib] {family}); not loaded"
        )


MIB = 1024 * 1024
_HASH_BLOCK = 4 * MIB


def load_source(store: Store, document: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A document's source row and its metadata; UpstreamMissing when it has none (NotRouted
    when the routes turned it away)."""
    row = store.source(document)
    if row is None:
        away = (store.source_meta(document) or {}).get("turned_away")
        if away:  # the routes skip it: so does every later stage
            raise NotRouted(away)
        raise UpstreamMissing(f"no source row for {document}")
    return row, store.source_meta(document) or {}


def source_bytes(source: dict[str, Any]) -> bytes:
    """The bytes the source row describes; refuses bytes that changed since."""
    try:
        content = object_store.read_bytes(real_name(source["uri"]))
    except FileNotFoundError:
        raise StageError(f"source file is gone: {source['path']}") from None
    if sha256_bytes(content) != source["sha256"]:
        raise SourceChanged("source bytes changed since they were observed; the next run picks them up")
    return content


def password_of(settings: Settings, source: dict[str, Any]) -> str | None:
    """The password for a document: its route's password file when it names one (a file
    under the storage root, or an absolute path, whose first line is the password), else
    the passwords file's entry that matches its path."""
    route = settings.route_of(source)
    if not route.password_file:
        return password_for(source["path"], settings.passwords)
    named = route.password_file
    path = password_file_path(settings, named)
    try:
        text = object_store.read_bytes(path).decode("utf-8")
    except (FileNotFoundError, UnicodeDecodeError, OSError) as exc:
        raise StageError(
            f"route '{route.name}' names password file {named}, which cannot be read ({type(exc).__name__})"
        ) from None
    lines = text.splitlines()
    return lines[0].rstrip("\r\n") if lines else ""


def password_file_path(settings: Settings, named: str) -> str:
    """Where a route's password file is: under the storage root unless absolute."""
    if object_store.is_uri(named) or os.path.isabs(named):
        return named
    return object_store.join(settings.data, named)


def parse_limits(settings: Settings, source: dict[str, Any]) -> dict[str, Any]:
    """The limits a document's route sets on its parsing (empty: the worker's own)."""
    route = settings.route_of(source)
    limits: dict[str, Any] = {}
    if route.parse_timeout:
        limits["timeout"] = float(route.parse_timeout)
    if route.parse_memory_mib:
        limits["memory_bytes"] = int(route.parse_memory_mib) * MIB
    return limits
