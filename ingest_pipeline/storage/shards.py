"""Shard mode, for collections past Dagster's comfortable partition count (~100,000): a
partition of the ``documents`` set is a shard of documents instead of one document.

Only the partitioning changes. Every stage still works one document at a time under its
own document id, so chunk ids, lineage columns, the lake layout and the public tables
are those of document mode. A shard is either a hash shard of document ids
(``shard-00042-of-04096``) or a top-level folder of the source root
(``folder-<slug>-<hash>``); neither can be mistaken for a document id, whose last part is
always ten hex digits. The sensor keeps one digest per shard and a manifest per shard
(kept by the store), so a tick lists the source root once, and
only a shard whose digest moved is read and compared file by file.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from ingest_pipeline.identity import real_name, stored_name
from ingest_pipeline.storage.shard_keys import (
    Listed,
    ShardScheme,
    digest,
    is_shard_key,
    source_document_id,
)
from ingest_pipeline.storage.store import Store

MANIFEST = pa.schema(
    [
        ("document_id", pa.string()),
        ("path", pa.string()),
        ("uri", pa.string()),
        ("size", pa.int64()),
        ("mtime_ns", pa.int64()),
    ]
)


def group(listing: Iterable[Listed], scheme: ShardScheme) -> dict[str, list[Listed]]:
    """Shard key -> its files, for one listing of the source root."""
    shards: dict[str, list[Listed]] = defaultdict(list)
    for item in listing:
        shards[scheme.shard_of_path(item.path)].append(item)
    return shards


@dataclass
class ShardChange:
    shard: str
    new: list[tuple[str, Listed]]
    changed: list[tuple[str, Listed]]
    removed: list[str]  # document ids

    @property
    def needs_run(self) -> bool:
        """A shard with new or changed files needs a run; so does one whose digest moved while
        its manifest already matches the listing (the manifest was written for a run that
        never ended well: a run to retry, or a tick that did not complete). Removals alone
        are done by the sensor itself."""
        return bool(self.new or self.changed or not self.removed)


@dataclass
class Scan:
    digests: dict[str, str]  # every shard seen in this listing
    changes: list[ShardChange]  # shards whose digest moved, at most ``limit`` of them
    vanished_shards: list[str]  # shards with no file left
    deferred: int  # changed shards left for the next tick
    files: int


def read_manifest(store: Store, scheme: ShardScheme, shard: str) -> dict[str, tuple[str, str, int, int]]:
    table = store.manifest(scheme.mode, shard)
    if table is None:
        return {}
    cols = table.to_pydict()
    return {
        d: (p, u, s, m)
        for d, p, u, s, m in zip(
            cols["document_id"], cols["path"], map(real_name, cols["uri"]), cols["size"], cols["mtime_ns"]
        )
    }


def write_manifest(
    store: Store, scheme: ShardScheme, shard: str, members: Sequence[tuple[str, Listed]]
) -> None:
    rows = sorted(members, key=lambda m: m[0])
    store.write_manifest(
        scheme.mode,
        shard,
        pa.table(
            {
                "document_id": [d for d, _ in rows],
                "path": [e.path for _, e in rows],
                "uri": [stored_name(e.uri) for _, e in rows],
                "size": [e.size for _, e in rows],
                "mtime_ns": [e.mtime_ns for _, e in rows],
            },
            schema=MANIFEST,
        ),
    )


def scan(
    store: Store,
    scheme: ShardScheme,
    listing: Iterable[Listed],
    previous: Mapping[str, str],
    limit: int = 256,
    skip: Iterable[str] = (),
    first: Iterable[str] = (),
) -> Scan:
    """Compare a listing with the shard digests last seen; for at most ``limit`` moved
    shards, diff against the shard's manifest and write the new manifest. Shards in ``skip``
    (a run for them has not ended) are left as they are, manifest included; moved shards in
    ``first`` (runs to retry) go before the others."""
    skip, first = set(skip), set(first)
    shards = group(listing, scheme)
    files = sum(len(m) for m in shards.values())
    digests = {shard: digest(members) for shard, members in shards.items()}
    moved = sorted(
        (s for s, d in digests.items() if previous.get(s) != d and s not in skip),
        key=lambda s: (s not in first, s),
    )
    vanished = sorted(s for s in previous if s not in shards and s not in skip)
    changes = []
    for shard in moved[:limit]:
        before = read_manifest(store, scheme, shard)
        members = [(source_document_id(e.path), e) for e in shards[shard]]
        new = [(d, e) for d, e in members if d not in before]
        changed = [(d, e) for d, e in members if d in before and before[d][2:] != (e.size, e.mtime_ns)]
        present = {d for d, _ in members}
        removed = sorted(d for d in before if d not in present)
        write_manifest(store, scheme, shard, members)
        changes.append(ShardChange(shard, new, changed, removed))
    # Shards past the limit keep their old digest, so the next tick sees them as moved.
    kept = {s: d for s, d in digests.items() if s not in set(moved[limit:])}
    kept.update({s: previous[s] for s in moved[limit:] if s in previous})
    for shard in vanished:  # every document of a shard with no file left is removed
        changes.append(ShardChange(shard, [], [], sorted(read_manifest(store, scheme, shard))))
        store.delete_manifest(scheme.mode, shard)
    return Scan(kept, changes, vanished, max(0, len(moved) - limit), files)


def list_source_root(root: str) -> Iterator[Listed]:
    """The source root (a folder or a bucket prefix) as a listing."""
    from ingest_pipeline.storage import object_store

    for rel, uri, st in object_store.walk(root):
        yield Listed(rel, uri, st.size, st.mtime_ns)


def documents_of(
    store: Store, scheme: ShardScheme | None, keys: Iterable[str]
) -> Iterator[tuple[str, str, str]]:
    """(document id, path, uri) of every document of the given partition keys: a shard
    key expands to its manifest's documents, a document id stands for itself."""
    for key in keys:
        if scheme is None or not is_shard_key(key):
            yield key, "", ""
            continue
        for doc, (path, uri, _, _) in sorted(read_manifest(store, scheme, key).items()):
            yield doc, path, uri
