"""Documents: finding files, naming them (document ids), trusting their links, and telling
which known ones vanished or were superseded (the inventory itself is kept by the store)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ingest_pipeline.identity import document_id, label_name
from ingest_pipeline.routing import glob_matches
from ingest_pipeline.settings import CONFIG_FILE, Settings, SourceFilter
from ingest_pipeline.storage import object_store
from ingest_pipeline.storage.object_store import is_candidate


@dataclass(frozen=True)
class DocumentEntry:
    """A file the pipeline knows: its partition key, its label path and where it is."""

    document_id: str
    path: str  # relative to the source root (or to the folder it was ingested from)
    uri: str  # absolute location of the bytes (a link keeps its own name here)
    root: str | None = None  # the folder it was found under; None for a file named alone


class UntrustedSource(Exception):
    """A file the pipeline refuses to read: a symbolic link that leaves every trusted root."""


def walk_files(folder: str) -> list[str]:
    """Every candidate file under ``folder``, sorted, skipping hidden files and folders
    (linked folders are not descended into; linked files are listed and checked later)."""
    found = []
    for current, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(current, f) for f in sorted(files) if is_candidate(f))
    return sorted(found)


def _normalized(file_path: str) -> str:
    """The absolute path with its folders resolved (so every spelling of a folder, links
    and ``..`` included, gives one path) and the file's own name kept (a link stays a link)."""
    absolute = os.path.abspath(file_path)
    return os.path.join(os.path.realpath(os.path.dirname(absolute)), os.path.basename(absolute))


def _inside(path: str, folder: str) -> bool:
    return os.path.commonpath([path, folder]) == folder


def entry_for(settings: Settings, file_path: str, base: str | None = None) -> DocumentEntry:
    """Name a file. Under the source root (however it was spelled) its id and label come
    from its path relative to the root, so the data folder can move. Outside every root its
    id comes from its resolved absolute path alone, so naming it directly or through its
    folder gives one document; its label is its path relative to the folder it was ingested
    from (its name, alone). A URI (an object in a bucket) is named relative to a source
    root that is a URI too."""
    if object_store.is_uri(file_path):
        return _object_entry(settings, file_path, base)
    normalized = _normalized(file_path)
    if not object_store.is_uri(settings.source_root):
        root = os.path.realpath(settings.source_root)
        if _inside(normalized, root):
            label = os.path.relpath(normalized, root).replace(os.sep, "/")
            return DocumentEntry(document_id(f"sources:{label}", label), label_name(label), normalized, root)
    folder = os.path.realpath(base) if base else None
    anchor = os.path.dirname(folder) if folder else os.path.dirname(normalized)
    label = os.path.relpath(normalized, anchor).replace(os.sep, "/")
    key = f"file:{normalized}"
    return DocumentEntry(
        document_id(key, os.path.basename(normalized)), label_name(label), normalized, folder
    )


def _object_entry(settings: Settings, uri: str, base: str | None) -> DocumentEntry:
    root = object_store.absolute(settings.source_root) + "/"
    if uri.startswith(root):
        label = uri[len(root) :]
        key = f"sources:{label}"
    else:
        anchor = (base.rstrip("/").rsplit("/", 1)[0] if base else uri.rsplit("/", 1)[0]) + "/"
        label = uri[len(anchor) :] if uri.startswith(anchor) else uri.rsplit("/", 1)[-1]
        key = f"file:{uri}"
    return DocumentEntry(document_id=document_id(key, label), path=label, uri=uri)


def trusted_roots(settings: Settings, entry: DocumentEntry) -> list[str]:
    """Local folders a document's bytes may come from: the source root, the folder the
    document was found under, and the outside roots the settings allow links into."""
    roots = [settings.source_root, *settings.link_roots] + ([entry.root] if entry.root else [])
    return [os.path.realpath(r) for r in roots if not object_store.is_uri(r)]


def check_trusted(settings: Settings, entry: DocumentEntry) -> str:
    """The real path of a document's bytes; raises UntrustedSource for a symbolic link
    that resolves outside every trusted root (a plain file named alone is trusted; an
    object in a bucket has no links and is returned as it is)."""
    if object_store.is_uri(entry.uri):
        return entry.uri
    real = os.path.realpath(entry.uri)
    if real == entry.uri and (entry.root is None or _inside(real, os.path.realpath(entry.root))):
        return real
    if any(_inside(real, r) for r in trusted_roots(settings, entry)):
        return real
    raise UntrustedSource(
        f"refused: {entry.path} is a symbolic link to {real}, outside the source root "
        f"(allow outside roots with [sources] link_roots in {CONFIG_FILE})"
    )


def mineru_documents(paths: Sequence[str]) -> list[str]:
    """The documents among files found in a folder (paths with '/' or the system's
    separator), MinerU-style outputs read as the seed reads them: a folder
    ``<stem>_output`` holding ``auto/<stem>.md`` yields that Markdown alone (not its origin
    PDF, layout JSON or images), and stands for its original, so a file ``<stem>.<ext>``
    beside the folder (the original, or an older ``<stem>.md``) is left out."""
    split = [p.replace(os.sep, "/") for p in paths]
    outputs: dict[str, str] = {}  # the <stem>_output folder -> its stem
    for path in split:
        parts = path.split("/")
        if len(parts) >= 3 and parts[-2] == "auto" and parts[-3] == parts[-1][: -len(".md")] + "_output":
            if parts[-1].endswith(".md"):
                outputs["/".join(parts[:-2])] = parts[-1][: -len(".md")]
    if not outputs:
        return list(paths)
    kept = []
    for original, path in zip(paths, split):
        folder, _, name = path.rpartition("/")
        under = next((o for o in outputs if path.startswith(o + "/")), None)
        if under is not None:
            if path == f"{under}/auto/{outputs[under]}.md":
                kept.append(original)
            continue
        stem = name.split(".", 1)[0]
        if f"{folder}/{stem}_output" in outputs and outputs[f"{folder}/{stem}_output"] == stem:
            continue
        kept.append(original)
    return kept


def selected(entry: DocumentEntry, sources: SourceFilter) -> bool:
    """Whether the source filters keep a document found under a folder: it matches one of
    ``include`` (if any is set) and none of ``exclude``."""
    if sources.include and not any(glob_matches(entry.path, g) for g in sources.include):
        return False
    return not any(glob_matches(entry.path, g) for g in sources.exclude)


def chosen_in_folder(
    settings: Settings, files: Sequence[str], sources: SourceFilter | None = None
) -> list[str]:
    """Of the files found under the source root (as the sensor walks it), those the
    source filters make documents, limit included: what ``collect`` would take."""
    sources = settings.sources if sources is None else sources
    kept = mineru_documents(files)
    if sources.include or sources.exclude:
        kept = [f for f in kept if selected(entry_for(settings, f), sources)]
    return kept if sources.max_documents is None else kept[: sources.max_documents]


def collect(
    settings: Settings,
    paths: Iterable[str],
    known: dict[str, DocumentEntry] | None = None,
    sources: SourceFilter | None = None,
    refused: list[tuple[str, str]] | None = None,
) -> list[DocumentEntry]:
    """Entries for files and folders (recursively), in a stable order, without repeats.
    A file already in ``known`` (the inventory) keeps the id and label it was first given,
    so a storage root made before a naming rule changed keeps one document per file.
    ``sources`` (default: the settings' ``[sources]``) filters the files found in folders
    (a file named alone is always taken), then ``max_documents`` keeps the first ones:
    filter before limit. A file found in a folder that cannot be named goes to ``refused``
    (its name as a label, and why) instead of ending the walk: one file, never the run."""
    sources = settings.sources if sources is None else sources
    refused = [] if refused is None else refused

    def named(files: Iterable[str], base: str) -> list[DocumentEntry]:
        out = []
        for f in files:
            try:
                out.append(entry_for(settings, f, base=base))
            except Exception as exc:  # one file's name, never the run
                name = f if object_store.is_uri(f) else os.path.relpath(f, base)
                refused.append((label_name(name), f"{type(exc).__name__}: {exc}".splitlines()[0][:300]))
        return out

    by_uri: dict[str, DocumentEntry] = {}
    for before in sorted((known or {}).values(), key=lambda e: e.document_id):
        by_uri.setdefault(before.uri, before)
    entries: dict[str, DocumentEntry] = {}
    for path in paths:
        walked = object_store.is_folder(path) if object_store.is_uri(path) else os.path.isdir(path)
        if object_store.is_uri(path):
            if walked:
                found = named(mineru_documents([uri for _, uri, _ in object_store.walk(path)]), path)
            elif object_store.exists(path):
                found = [entry_for(settings, path)]
            else:
                raise FileNotFoundError(f"no such file or folder: {path}")
        elif walked:
            found = named(mineru_documents(walk_files(path)), path)
        elif os.path.isfile(path) or os.path.islink(path):
            found = [entry_for(settings, path)]
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
        for entry in found:
            before = (known or {}).get(entry.document_id)
            if before is None or before.uri != entry.uri:
                before = by_uri.get(entry.uri)
            if before is not None:
                entry = DocumentEntry(before.document_id, before.path, entry.uri, before.root or entry.root)
            if walked and not selected(entry, sources):
                continue
            entries.setdefault(entry.document_id, entry)
    found_all = list(entries.values())
    return found_all if sources.max_documents is None else found_all[: sources.max_documents]


def superseded(inventory: dict[str, DocumentEntry], entries: Iterable[DocumentEntry]) -> list[DocumentEntry]:
    """Known documents that name the same file as one of ``entries`` under another id
    (left by an older naming rule): they are duplicates to forget."""
    kept = {e.uri: e.document_id for e in entries}
    return sorted(
        (e for e in inventory.values() if e.uri in kept and kept[e.uri] != e.document_id),
        key=lambda e: e.document_id,
    )


def vanished(inventory: dict[str, DocumentEntry], roots: Iterable[str]) -> list[DocumentEntry]:
    """Known documents under any of ``roots`` whose file no longer exists."""
    folders = [os.path.realpath(r) for r in roots if not object_store.is_uri(r) and os.path.isdir(r)]
    prefixes = [r.rstrip("/") + "/" for r in roots if object_store.is_uri(r)]
    gone = []
    for entry in inventory.values():
        if object_store.is_uri(entry.uri):
            if any(entry.uri.startswith(p) for p in prefixes) and not object_store.exists(entry.uri):
                gone.append(entry)
            continue
        inside = any(_inside(entry.uri, f) for f in folders)
        if inside and not os.path.exists(entry.uri):
            gone.append(entry)
    return sorted(gone, key=lambda e: e.document_id)
