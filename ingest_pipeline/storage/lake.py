"""The Parquet lake: one file per (table, [version,] document), written atomically."""

from __future__ import annotations

import json
import os
import struct
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from ingest_pipeline.runtime.memo import BoundedMemo

_META_KEY = b"ingest_pipeline"
DAMAGED = "_damaged"  # where damaged files are set aside (no view reads it)


def _meta_json(meta: dict[str, Any]) -> str:
    return json.dumps(meta, sort_keys=True, default=str)


def as_stored(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` as ``Lake.meta`` reads it back from the file it was written with."""
    return json.loads(_meta_json(meta))


def _footer(handle: Any) -> bytes | None:
    """The Parquet footer of an open local file, magic included (None when the file is too
    short or not Parquet: the caller's full read then says why)."""
    size = os.fstat(handle.fileno()).st_size
    if size < 12:
        return None
    handle.seek(size - 8)
    tail = handle.read(8)
    length = struct.unpack("<i", tail[:4])[0]
    if tail[4:] != b"PAR1" or not 0 < length <= size - 12:
        return None
    handle.seek(size - 8 - length)
    return handle.read(length) + tail


class _FooterMemo(BoundedMemo):
    """The stored metadata of footers already parsed, keyed by the footer's own bytes.

    A file's metadata lives in its footer, so equal footer bytes mean equal metadata,
    whichever file or process wrote them: reading the footer (a few KiB from the end) and
    finding it here replaces parsing the schema, about ten times the cost. Nothing is trusted
    from a path, a size or a time. Bounded by ``LIMIT`` bytes of footers, oldest out first."""

    LIMIT = 16 * 2**20
    SHARE = 64

    def _cost(self, key: bytes, value: str) -> int:
        return len(key) + len(value)


_MEMO = _FooterMemo()


def _raw_meta(schema: pa.Schema) -> str:
    raw = (schema.metadata or {}).get(_META_KEY)
    return raw.decode() if raw else ""


class Lake:
    """Tables under one root: ``<root>/<table>/[<sub>/]<name>.parquet``.

    A local write goes to a temporary name and is renamed into place; an object store's
    upload appears whole or not at all; so a killed run leaves the previous file or none,
    never half a file. The root may be a local folder or a URI pyarrow's filesystem layer
    understands.
    """

    def __init__(self, root: str) -> None:
        if "://" in root:
            self.fs, self.root = pafs.FileSystem.from_uri(root)
        else:
            self.fs, self.root = pafs.LocalFileSystem(), os.path.abspath(root)
        self.uri = root
        self._local = isinstance(self.fs, pafs.LocalFileSystem)

    def path(self, table: str, *parts: str) -> str:
        *dirs, name = (table, *parts)
        return "/".join((self.root, *dirs, f"{name}.parquet")) if parts else f"{self.root}/{table}"

    def write(
        self, table: str, parts: tuple[str, ...], data: pa.Table, meta: Mapping[str, Any] | None = None
    ) -> str:
        target = self.path(table, *parts)
        folder = target.rsplit("/", 1)[0]
        if meta:
            schema_meta = dict(data.schema.metadata or {})
            schema_meta[_META_KEY] = _meta_json(meta).encode()
            data = data.replace_schema_metadata(schema_meta)
        if not self._local:
            # An object store shows an object whole or not at all: the finished file goes to
            # its key in one upload, with no folder markers, temporary key, copy or delete
            # (each a request, paid in latency on every write).
            buffer = pa.BufferOutputStream()
            pq.write_table(data, buffer, compression="zstd")
            body = buffer.getvalue()
            with self.fs.open_output_stream(target) as sink:
                sink.write(body)
            return target
        self.fs.create_dir(folder, recursive=True)
        tmp = f"{folder}/.{uuid.uuid4().hex}.tmp"
        with self.fs.open_output_stream(tmp) as sink:
            pq.write_table(data, sink, compression="zstd")
        if self._local:  # what this file's metadata reads back as, known without parsing it again
            with open(tmp, "rb") as handle:
                footer = _footer(handle)
            if footer is not None:
                _MEMO.put(footer, _raw_meta(data.schema))
        self.fs.move(tmp, target)
        return target

    def exists(self, table: str, *parts: str) -> bool:
        return self.fs.get_file_info(self.path(table, *parts)).type == pafs.FileType.File

    def read(self, table: str, *parts: str, columns: list[str] | None = None) -> pa.Table | None:
        path = self.path(table, *parts)
        try:
            if not self._local:  # the whole object in one request, not a range per column chunk
                with self.fs.open_input_stream(path) as source:
                    return pq.read_table(pa.BufferReader(source.read()), columns=columns)
            with self.fs.open_input_file(path) as source:
                return pq.read_table(source, columns=columns)
        except (FileNotFoundError, OSError) as exc:
            if self.fs.get_file_info(path).type == pafs.FileType.NotFound:
                return None
            raise exc

    def meta(self, table: str, *parts: str) -> dict[str, Any] | None:
        """The metadata stored with a file (None when the file does not exist)."""
        path = self.path(table, *parts)
        if self._local:
            try:
                handle = open(path, "rb")  # noqa: SIM115 - closed below, on every path
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                return None
            with handle:
                footer = _footer(handle)
                raw = _MEMO.get(footer) if footer is not None else None
                if raw is None:
                    handle.seek(0)
                    raw = _raw_meta(pq.read_schema(handle))
                    if footer is not None:
                        _MEMO.put(footer, raw)
            return json.loads(raw) if raw else {}
        try:  # opening says whether the object is there: no request of its own to ask first
            with self.fs.open_input_file(path) as source:
                raw = _raw_meta(pq.read_schema(source))
        except FileNotFoundError:
            return None
        except OSError:
            if self.fs.get_file_info(path).type != pafs.FileType.File:
                return None
            raise
        return json.loads(raw) if raw else {}

    def delete(self, table: str, *parts: str) -> bool:
        path = self.path(table, *parts)
        if self.fs.get_file_info(path).type == pafs.FileType.File:
            self.fs.delete_file(path)
            return True
        return False

    def files(self, table: str) -> Iterator[str]:
        """Every Parquet file of a table (any depth), as paths DuckDB can read."""
        selector = pafs.FileSelector(f"{self.root}/{table}", recursive=True, allow_not_found=True)
        for info in self.fs.get_file_info(selector):
            if info.type == pafs.FileType.File and info.path.endswith(".parquet"):
                yield info.path

    def damaged(self) -> list[str]:
        """The lake's local files that are not whole Parquet (no footer: a write cut short, a
        file truncated by hand or by a full disk), as paths relative to the lake. Reading
        one fails every view over its table, so they are found before anything reads."""
        if not self._local:
            return []
        found = []
        for folder, dirs, files in os.walk(self.root):
            dirs[:] = [d for d in dirs if d != DAMAGED]
            for name in files:
                if name.endswith(".parquet"):
                    path = os.path.join(folder, name)
                    with open(path, "rb") as handle:
                        if _footer(handle) is None:
                            found.append(os.path.relpath(path, self.root))
        return sorted(found)

    def set_aside(self, relative: Iterable[str]) -> list[str]:
        """Move damaged files out of every table into ``_damaged/`` (kept for a person to look
        at, named so no view reads them); what a stage wrote there is then missing, so the
        next run of that stage writes it again from the sources."""
        moved = []
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for rel in relative:
            target = os.path.join(self.root, DAMAGED, f"{rel}.{stamp}.damaged")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.replace(os.path.join(self.root, rel), target)
            moved.append(rel)
        return moved

    def subtables(self, table: str) -> list[str]:
        selector = pafs.FileSelector(f"{self.root}/{table}", recursive=False, allow_not_found=True)
        return sorted(
            info.base_name for info in self.fs.get_file_info(selector) if info.type == pafs.FileType.Directory
        )

    def delete_document(self, document: str) -> int:
        """Remove every file of one document from every table; returns how many."""
        return self.delete_documents([document])

    def delete_documents(self, documents: Iterable[str]) -> int:
        """Remove every file of these documents from every table in one walk of the lake."""
        names = {f"{d}.parquet" for d in documents}
        if not names:
            return 0
        removed = 0
        selector = pafs.FileSelector(self.root, recursive=True, allow_not_found=True)
        for info in self.fs.get_file_info(selector):
            if info.type == pafs.FileType.File and info.base_name in names:
                self.fs.delete_file(info.path)
                removed += 1
        return removed

    def sweep_temporary(self, older_than_seconds: float) -> int:
        """Delete the temporary files of writes that were killed before their rename (older
        than ``older_than_seconds``, so no write in flight loses its file); returns how many."""
        import time

        cutoff = time.time() - older_than_seconds
        removed = 0
        selector = pafs.FileSelector(self.root, recursive=True, allow_not_found=True)
        for info in self.fs.get_file_info(selector):
            if (
                info.type == pafs.FileType.File
                and info.base_name.startswith(".")
                and info.base_name.endswith(".tmp")
                and info.mtime is not None
                and info.mtime.timestamp() < cutoff
            ):
                self.fs.delete_file(info.path)
                removed += 1
        return removed
