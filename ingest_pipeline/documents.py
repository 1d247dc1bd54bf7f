"""Documents: finding files, naming them (document ids) and the inventory of known ones."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone

import pyarrow as pa

from ingest_pipeline import object_store, tables
from ingest_pipeline.identity import document_id
from ingest_pipeline.lake import Lake
from ingest_pipeline.settings import Settings

_SKIP_NAMES = (".", "~$")
_SKIP_SUFFIXES = (".tmp", ".part", ".crdownload", ".swp")


@dataclass(frozen=True)
class DocumentEntry:
    """A file the pipeline knows: its partition key, its label path and where it is."""

    document_id: str
    path: str  # relative to the source root (or to the folder it was ingested from)
    uri: str  # absolute location of the bytes


def is_candidate(name: str) -> bool:
    return not name.startswith(_SKIP_NAMES) and not name.endswith(_SKIP_SUFFIXES)


def walk_files(folder: str) -> list[str]:
    """Every candidate file under ``folder``, sorted, skipping hidden files and folders."""
    found = []
    for current, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(current, f) for f in sorted(files) if is_candidate(f))
    return sorted(found)


def entry_for(settings: Settings, file_path: str, base: str | None = None) -> DocumentEntry:
    """Name a file: under the source root its id comes from its relative path (so the
    data folder can move); elsewhere from its absolute path. A URI (an object in a
    bucket) is named the same way, relative to a source root that is a URI too."""
    if object_store.is_uri(file_path):
        return _object_entry(settings, file_path, base)
    absolute = os.path.abspath(file_path)
    root = os.path.abspath(settings.source_root)
    if os.path.commonpath([absolute, root]) == root:
        label = os.path.relpath(absolute, root).replace(os.sep, "/")
        key = f"sources:{label}"
    else:
        anchor = os.path.dirname(os.path.abspath(base)) if base else os.path.dirname(absolute)
        label = os.path.relpath(absolute, anchor).replace(os.sep, "/")
        key = f"file:{absolute}"
    return DocumentEntry(document_id=document_id(key, label), path=label, uri=absolute)


def _object_entry(settings: Settings, uri: str, base: str | None) -> DocumentEntry:
    root = object_store.absolute(settings.source_root) + "/"
    if uri.startswith(root):
        label = uri[len(root):]
        key = f"sources:{label}"
    else:
        anchor = (base.rstrip("/").rsplit("/", 1)[0] if base else uri.rsplit("/", 1)[0]) + "/"
        label = uri[len(anchor):] if uri.startswith(anchor) else uri.rsplit("/", 1)[-1]
        key = f"file:{uri}"
    return DocumentEntry(document_id=document_id(key, label), path=label, uri=uri)


def collect(settings: Settings, paths: Iterable[str]) -> list[DocumentEntry]:
    """Entries for files and folders (recursively), in a stable order, without repeats."""
    entries: dict[str, DocumentEntry] = {}
    for path in paths:
        if object_store.is_uri(path):
            if object_store.is_folder(path):
                found = [uri for _, uri, _ in object_store.walk(path)]
            elif object_store.exists(path):
                found, path = [path], None
            else:
                raise FileNotFoundError(f"no such file or folder: {path}")
            for uri in found:
                entry = entry_for(settings, uri, base=path)
                entries.setdefault(entry.document_id, entry)
        elif os.path.isdir(path):
            for file_path in walk_files(path):
                entry = entry_for(settings, file_path, base=path)
                entries.setdefault(entry.document_id, entry)
        elif os.path.isfile(path):
            entry = entry_for(settings, path)
            entries.setdefault(entry.document_id, entry)
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    return list(entries.values())


def save_inventory(lake: Lake, entries: Iterable[DocumentEntry]) -> None:
    now = datetime.now(timezone.utc)
    for entry in entries:
        row = {"document_id": entry.document_id, "path": entry.path, "uri": entry.uri, "registered_at": now}
        lake.write("inventory", (entry.document_id,), pa.Table.from_pylist([row], schema=tables.INVENTORY))


def load_entry(lake: Lake, document: str) -> DocumentEntry | None:
    table = lake.read("inventory", document)
    if table is None or table.num_rows == 0:
        return None
    row = table.to_pylist()[0]
    return DocumentEntry(row["document_id"], row["path"], row["uri"])


def load_inventory(lake: Lake) -> dict[str, DocumentEntry]:
    entries = {}
    for path in lake.files("inventory"):
        document = path.rsplit("/", 1)[-1][: -len(".parquet")]
        entry = load_entry(lake, document)
        if entry is not None:
            entries[entry.document_id] = entry
    return entries


def vanished(inventory: dict[str, DocumentEntry], roots: Iterable[str]) -> list[DocumentEntry]:
    """Known documents under any of ``roots`` whose file no longer exists."""
    folders = [os.path.abspath(r) for r in roots if not object_store.is_uri(r) and os.path.isdir(r)]
    prefixes = [r.rstrip("/") + "/" for r in roots if object_store.is_uri(r)]
    gone = []
    for entry in inventory.values():
        if object_store.is_uri(entry.uri):
            if any(entry.uri.startswith(p) for p in prefixes) and not object_store.exists(entry.uri):
                gone.append(entry)
            continue
        inside = any(os.path.commonpath([entry.uri, f]) == f for f in folders)
        if inside and not os.path.exists(entry.uri):
            gone.append(entry)
    return sorted(gone, key=lambda e: e.document_id)
