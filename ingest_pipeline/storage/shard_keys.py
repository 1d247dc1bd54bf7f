"""What a shard is, by key: a hash shard of document ids or a top-level folder of the source
root, and a file as a listing reports it. Plain values, so the settings can name a scheme
without the store that keeps the shards' manifests (``storage.shards``)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ingest_pipeline.identity import document_id

MODES = ("document", "hash", "folder")
_HASH_KEY = re.compile(r"^shard-(\d{5})-of-(\d{5})$")
_FOLDER_KEY = re.compile(r"^folder-[a-z0-9-]*-[0-9a-f]{8}$")
_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class Listed:
    """A file as a listing reports it: path relative to the source root, where it is, and
    the (size, mtime) signature a change is detected by."""

    path: str
    uri: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class ShardScheme:
    mode: str = "hash"  # hash | folder
    count: int = 4096  # hash shards

    def __post_init__(self) -> None:
        if self.mode not in ("hash", "folder"):
            raise ValueError(f"shard mode must be 'hash' or 'folder', not {self.mode!r}")
        if not 1 <= self.count <= 99_999:
            raise ValueError("shard count must be between 1 and 99999")

    def shard_of(self, document: str, path: str) -> str:
        """A document's shard: in hash mode by the hash every document id ends with."""
        if self.mode == "hash":
            return self._hash_key(int(document[-10:], 16))
        return self._folder_key(path)

    def shard_of_path(self, path: str) -> str:
        """The same shard from a path under the source root, without building the id (the
        id's hash is sha256 of ``sources:<path>``): what a tick does for every file."""
        if self.mode == "hash":
            return self._hash_key(int(hashlib.sha256(f"sources:{path}".encode()).hexdigest()[:10], 16))
        return self._folder_key(path)

    def _hash_key(self, value: int) -> str:
        return f"shard-{value % self.count:05d}-of-{self.count:05d}"

    @staticmethod
    def _folder_key(path: str) -> str:
        top = path.split("/", 1)[0] if "/" in path else ""
        slug = _SLUG.sub("-", top.lower()).strip("-")[:40].strip("-")
        return f"folder-{slug}-{hashlib.sha256(top.encode()).hexdigest()[:8]}"


def is_shard_key(key: str) -> bool:
    return bool(_HASH_KEY.match(key) or _FOLDER_KEY.match(key))


def source_document_id(path: str) -> str:
    """The id of a file under the source root: the one document mode gives it."""
    return document_id(f"sources:{path}", path)


def digest(entries: Iterable[Listed]) -> str:
    """A shard's signature: any new, removed, resized or touched file changes it."""
    h = hashlib.blake2b(digest_size=8)
    for e in sorted(entries, key=lambda e: e.path):
        h.update(f"{e.path}\0{e.size}\0{e.mtime_ns}\n".encode())
    return h.hexdigest()
