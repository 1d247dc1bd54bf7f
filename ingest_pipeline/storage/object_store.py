"""Paths that may be object-store URIs: joining, reading, listing, and the options LanceDB
needs. Endpoint, region and credentials come from the environment (the AWS variables),
never from code, configuration files or the lake."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass

from pyarrow import fs as pafs


def is_uri(path: str) -> bool:
    return "://" in str(path)


def join(root: str, *parts: str) -> str:
    """``root/part/...``; a URI keeps its scheme, a local root stays an OS path."""
    if is_uri(root):
        return "/".join((root.rstrip("/"), *(p.strip("/") for p in parts)))
    return os.path.join(root, *parts)


def absolute(path: str) -> str:
    return path.rstrip("/") if is_uri(path) else os.path.abspath(path)


@functools.lru_cache(maxsize=16)
def _filesystem(scheme_and_authority: str) -> pafs.FileSystem:
    filesystem, _ = pafs.FileSystem.from_uri(scheme_and_authority)
    return filesystem


def resolve(path: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem of a local path or URI, and the path inside it."""
    if not is_uri(path):
        return pafs.LocalFileSystem(), os.path.abspath(path)
    scheme, rest = path.split("://", 1)
    bucket = rest.split("/", 1)[0]
    return _filesystem(f"{scheme}://{bucket}"), rest.rstrip("/")


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime_ns: int
    mtime: float  # seconds, as os.stat gives them locally


def _from_os(st: os.stat_result) -> FileStat:
    return FileStat(st.st_size, st.st_mtime_ns, st.st_mtime)


def _from_info(info: pafs.FileInfo) -> FileStat:
    ns = int(info.mtime_ns or 0)
    return FileStat(int(info.size or 0), ns, ns / 1e9)


def stat(path: str) -> FileStat:
    """Size and modification time; FileNotFoundError when the file is not there."""
    if not is_uri(path):
        return _from_os(os.stat(path))
    filesystem, inner = resolve(path)
    info = filesystem.get_file_info(inner)
    if info.type != pafs.FileType.File:
        raise FileNotFoundError(path)
    return _from_info(info)


def read_bytes(path: str) -> bytes:
    if not is_uri(path):
        with open(path, "rb") as handle:
            return handle.read()
    filesystem, inner = resolve(path)
    try:
        with filesystem.open_input_stream(inner) as source:
            return source.read()
    except (FileNotFoundError, OSError):
        if filesystem.get_file_info(inner).type == pafs.FileType.NotFound:
            raise FileNotFoundError(path) from None
        raise


def open_input(path: str):
    """A seekable binary file of a local path or a URI: only what is read is fetched
    (an object store serves it as ranged reads). FileNotFoundError when it is not there."""
    if not is_uri(path):
        return open(path, "rb")
    filesystem, inner = resolve(path)
    try:
        return filesystem.open_input_file(inner)
    except (FileNotFoundError, OSError):
        if filesystem.get_file_info(inner).type == pafs.FileType.NotFound:
            raise FileNotFoundError(path) from None
        raise


def sha256(path: str, block: int = 4 * 1024 * 1024) -> str:
    """The sha256 of a file or object, read in blocks of ``block`` bytes (never whole)."""
    import hashlib

    digest = hashlib.sha256()
    with open_input(path) as handle:
        while chunk := handle.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def exists(path: str) -> bool:
    try:
        stat(path)
    except FileNotFoundError:
        return False
    return True


# Names a file gets while it is hidden, being written or locked by an editor.
_SKIP_NAMES = (".", "~$")
# ".record.json": a document record sidecar (records.overrides), read with its document
_SKIP_SUFFIXES = (".tmp", ".part", ".crdownload", ".swp", ".record.json")


def is_candidate(name: str) -> bool:
    """A file name worth reading: not hidden, not a partial download or an editor's lock."""
    return not name.startswith(_SKIP_NAMES) and not name.endswith(_SKIP_SUFFIXES)


def is_folder(path: str) -> bool:
    if not is_uri(path):
        return os.path.isdir(path)
    filesystem, inner = resolve(path)
    return filesystem.get_file_info(inner).type == pafs.FileType.Directory


def walk(root: str) -> Iterator[tuple[str, str, FileStat]]:
    """Every file under ``root`` as (path relative to root with '/', full path or URI, stat),
    sorted, skipping hidden names at any depth. On an object store this is one recursive
    listing (S3 ListObjectsV2 pages), not a request per file."""
    if not is_uri(root):
        root = os.path.abspath(root)
        found = []
        for current, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in files:
                if not is_candidate(name):
                    continue
                full = os.path.join(current, name)
                try:
                    st = os.stat(full)
                except FileNotFoundError:
                    continue
                found.append((os.path.relpath(full, root).replace(os.sep, "/"), full, _from_os(st)))
        yield from sorted(found)
        return
    filesystem, inner = resolve(root)
    selector = pafs.FileSelector(inner, recursive=True, allow_not_found=True)
    scheme = root.split("://", 1)[0]
    found = []
    for info in filesystem.get_file_info(selector):
        if info.type != pafs.FileType.File:
            continue
        rel = info.path[len(inner) :].lstrip("/")
        parts = rel.split("/")
        if any(p.startswith(".") for p in parts[:-1]) or not is_candidate(parts[-1]):
            continue
        found.append((rel, f"{scheme}://{info.path}", _from_info(info)))
    yield from sorted(found)


def lancedb_storage_options(uri: str) -> dict[str, str] | None:
    """What LanceDB's object-store layer needs beyond the AWS variables it reads itself:
    a custom endpoint (S3-compatible servers) and, for an http endpoint, permission to use it.
    Credentials are deliberately absent: LanceDB takes them from the environment."""
    if not uri.startswith("s3://"):
        return None
    options: dict[str, str] = {}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        options["endpoint"] = endpoint
        if endpoint.startswith("http://"):
            options["allow_http"] = "true"
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        options["region"] = region
    return options or None
