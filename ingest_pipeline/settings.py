"""Where the data lives and how the pipeline is configured (profiles, chunker configs)."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ingest_pipeline.routing import DEFAULT_ROUTE, Facts, Route, Routes, parse_routes
from ingest_pipeline.storage import object_store

CONFIG_FILE = "ingest_pipeline.toml"
PASSWORDS_FILE = "passwords.toml"
DEFAULT_PROFILE = "default"
SERVED_PROFILE = "retrieval"
# The embedder of a storage root that names none (``ingest-pipeline embedders`` lists them):
# the bundled MiniLM with int8 products, which loses no retrieval to its float32 run
# (``bench/embedders_bench.py``) for a fraction of its CPU (``bench/model_graph_bench.py``).
DEFAULT_EMBEDDER = "minilm-int8@1"
_PROFILE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


MiB = 1024 * 1024
# Format families for [limits.max_mib]; see media_types.size_family.
DEFAULT_MAX_BYTES = {
    "text": 16 * MiB,
    "markdown": 16 * MiB,
    "delimited": 32 * MiB,
    "pdf": 256 * MiB,
    "office": 128 * MiB,
    # XLSX/XLSM: a workbook's cells are held whole while its sheets are cut into tables; this is
    # the size the memory measured by bench/large_inputs_bench.py supports within its budget
    "spreadsheet": 15 * MiB,
    "image": 64 * MiB,
    "other": 64 * MiB,
}


@dataclass(frozen=True)
class Profile:
    """A named, ordered list of chunker versions that lead the default order."""

    name: str
    chunkers: tuple[str, ...] = ()
    # Cut chunks over the embedder's token limit at token-aware boundaries (else flag them).
    split_oversized: bool = True
    # Prefix every chunk's embedding text with its document's title: its file name, and the
    # title a chunker read in the document (pdf@4: the first page's largest lines), if any.
    document_context: bool = False
    # Embedded and written to LanceDB; None = only when it is the served profile.
    indexed: bool | None = None
    # The embedder (id@version, ``ingest-pipeline embedders`` lists them) and its settings;
    # empty: the storage root's ``[embedder]``.
    embedder: str = ""
    embedder_settings: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=True)

    def options(self) -> dict[str, Any]:
        return {"split_oversized": self.split_oversized, "document_context": self.document_context}


@dataclass(frozen=True)
class SourceFilter:
    """Which files found in a source folder are documents (``[sources]``, or ``ingest
    --include/--exclude/--max-documents``): globs over a document's path (as the summary
    shows it; ``*`` crosses folders, a pattern ending in ``/`` names a folder), applied
    before the limit. ``max_documents``: None takes all; 0 takes none."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_documents: int | None = None

    def __post_init__(self):
        if self.max_documents is not None and self.max_documents < 0:
            raise ValueError(f"max_documents must be 0 or more, not {self.max_documents}")

    def overridden(
        self, include: list[str] | None, exclude: list[str] | None, max_documents: int | None
    ) -> SourceFilter:
        """This filter with the command line's options, each replacing the file's own."""
        return SourceFilter(
            tuple(include) if include else self.include,
            tuple(exclude) if exclude else self.exclude,
            self.max_documents if max_documents is None else max_documents,
        )


@dataclass(frozen=True)
class Settings:
    """Everything a run needs to know about its storage root and configuration.

    ``data`` is the storage root: a local folder or an object-store URI
    (``s3://bucket/prefix``). The lake, LanceDB and the source root live under it; the
    catalog file and the Dagster home are local files, so for a URI root they live in
    ``$INGEST_LOCAL`` (default ``./.ingest_local``) and the instance in ``$DAGSTER_HOME``.
    """

    data: str
    profiles: tuple[Profile, ...] = field(default_factory=lambda: builtin_profiles())
    default_profile: str = SERVED_PROFILE
    chunker_configs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # The embedder of every profile that names none (``[embedder] use = "id@version"`` and
    # its settings beside it).
    embedder: str = DEFAULT_EMBEDDER
    embedder_settings: Mapping[str, Any] = field(default_factory=dict)
    passwords: Mapping[str, str] = field(default_factory=dict, repr=False)
    max_file_bytes: int = 512 * 1024 * 1024
    # Per-format ceilings (bytes on disk), checked before a file is loaded: a larger file
    # is one clear error, so a run's memory is bounded by these settings, not by its input.
    max_bytes: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_MAX_BYTES))
    # Outside folders a symbolic link in a source folder may point into (besides the
    # source root and the folder it was found in).
    link_roots: tuple[str, ...] = ()
    # Which files in a source folder are documents ([sources] include, exclude, max_documents).
    sources: SourceFilter = field(default_factory=SourceFilter)
    # How the model runs: one session per CPU, each on one thread, 4 texts per call. One
    # session on several cores waits for its threads at every operator; small batches keep
    # padding low (bench/embed_threads_bench.py, bench/results/embed_threads.json).
    embed_batch: int = 4
    embed_workers: int = field(default_factory=lambda: available_cpus())
    embed_threads: int = 1  # intra-op threads per session; 0: onnxruntime's own count
    # Readers and chunkers run in a worker process: seconds per call (0 = in process)
    # and the worker's address-space limit.
    parse_timeout: float = 300.0
    # Seconds a stage may spend on one document's content in the run process (chunk maps, their
    # token offsets and embedding texts; runtime/budget.py); 0: no budget
    stage_timeout: float = 600.0
    # Bytes the run process may grow by while a stage works on one document's content
    # (runtime/budget.py); 0: no budget
    stage_memory_bytes: int = 4 * 1024**3
    parse_memory_bytes: int = 6 * 1024**3
    # How many documents the pages step reads at once, each in its own worker process
    # (a step of fewer than READ_ALONE documents reads them in one).
    read_workers: int = field(default_factory=lambda: default_read_workers())
    # Dagster: seconds between sensor ticks; the executor of the ingest job
    # ("in_process": one process per run; "multiprocess": one per step).
    sensor_interval: int = 15
    executor: str = "in_process"
    # A batch of documents a run covers; runs that fail are re-requested this many times.
    # Each run pays Dagster for its steps whatever its size, so fewer, larger runs cost
    # less (bench/suite.py's dagster_alone section, bench/results/suite.json).
    run_batch: int = 50
    run_retries: int = 2
    # What a partition of ``documents`` is: one document, or (large collections) a hash
    # shard of document ids or a top-level folder. See ingest_pipeline.storage.shards.
    partition_mode: str = "document"
    shard_count: int = 4096
    # Document record fields a person sets: ``[documents."<glob>"] organisation = "…"``,
    # matched against the document's path (records.overrides).
    document_fields: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # How each document is treated, by the first route that matches it ([[routes]]; see
    # ingest_pipeline.routing.routes): profiles, reader settings, limits.
    routes: Routes = field(default_factory=Routes)
    # The order of ingest's progress columns ([progress] column_order, names as shown:
    # Reading, Chunking, Embedding, Indexing, …): listed first, unlisted after, as found.
    column_order: tuple[str, ...] = ()

    def route_of(self, source: Mapping[str, Any]) -> Route:
        """The route a document's source row takes (the default route when none does: the
        sources stage keeps no row for such a document)."""
        facts = Facts(str(source["path"]), str(source["media_type"]), int(source.get("bytes") or 0))
        return self.routes.route_for(facts) or DEFAULT_ROUTE

    @property
    def shard_scheme(self):
        if self.partition_mode == "document":
            return None
        from ingest_pipeline.storage.shard_keys import ShardScheme

        return ShardScheme(self.partition_mode, self.shard_count)

    @property
    def source_root(self) -> str:
        return os.environ.get("INGEST_SOURCES") or object_store.join(self.data, "sources")

    @property
    def lake_root(self) -> str:
        return object_store.join(self.data, "lake")

    @property
    def lancedb_uri(self) -> str:
        return object_store.join(self.data, "lancedb")

    @property
    def local_root(self) -> str:
        """Where the files that must be local go (the catalog, a default Dagster home)."""
        if not object_store.is_uri(self.data):
            return self.data
        return os.path.abspath(os.environ.get("INGEST_LOCAL") or ".ingest_local")

    @property
    def models_dir(self) -> str:
        """Where models built on this machine from bundled weights are written once, for
        every storage root of the user: ``$INGEST_MODELS``, else ``ingest_pipeline/models``
        in the user's cache folder (``$XDG_CACHE_HOME``, else ``~/.cache``)."""
        if os.environ.get("INGEST_MODELS"):
            return os.environ["INGEST_MODELS"]
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(cache, "ingest_pipeline", "models")

    @property
    def catalog_path(self) -> str:
        return os.path.join(self.local_root, "catalog.duckdb")

    @property
    def dagster_home(self) -> str:
        if object_store.is_uri(self.data) and os.environ.get("DAGSTER_HOME"):
            return os.environ["DAGSTER_HOME"]
        return os.path.join(self.local_root, "dagster_home")

    def is_indexed(self, profile: Profile | str) -> bool:
        """Whether a profile is embedded and served from LanceDB (by default only the
        served one; a profile says ``indexed = true`` to be searchable too)."""
        profile = self.profile(profile) if isinstance(profile, str) else profile
        return profile.indexed if profile.indexed is not None else profile.name == self.default_profile

    def embedder_of(self, profile: Profile | str) -> tuple[str, dict[str, Any]]:
        """The embedder a profile uses and its settings."""
        profile = self.profile(profile) if isinstance(profile, str) else profile
        if profile.embedder:
            return profile.embedder, dict(profile.embedder_settings)
        return self.embedder, dict(self.embedder_settings)

    @property
    def indexed_profiles(self) -> tuple[Profile, ...]:
        return tuple(p for p in self.profiles if self.is_indexed(p))

    def profile(self, name: str | None = None) -> Profile:
        name = name or self.default_profile
        for profile in self.profiles:
            if profile.name == name:
                return profile
        raise KeyError(f"no profile {name!r} (profiles: {', '.join(p.name for p in self.profiles)})")


SERVED_CHUNKERS = ("pdf@4", "docx@1", "xlsx@1", "delimited@1", "pptx@1", "markdown@1")


def builtin_profiles() -> tuple[Profile, ...]:
    """The profiles every storage root has.

    ``default`` is the registry's default order (line chunks for PDFs). ``retrieval`` is
    what search serves: PDF pages as pdf@4 passages (paragraphs packed to the embedder's
    tokens under their heading path, tables alone, each with its box), the Office formats'
    structured versions, Markdown sections; each chunk's embedding text starts with its
    document's title. Only the served profile is indexed unless a profile says so.
    """
    return (
        Profile(DEFAULT_PROFILE),
        Profile(SERVED_PROFILE, SERVED_CHUNKERS, document_context=True),
    )


def default_data_dir() -> str:
    """``$INGEST_DATA``, else ``./data``."""
    return object_store.absolute(os.environ.get("INGEST_DATA") or "data")


def _read_text(path: str) -> str | None:
    try:
        return object_store.read_bytes(path).decode("utf-8")
    except FileNotFoundError:
        return None


def load_settings(data: str | os.PathLike[str] | None = None) -> Settings:
    """Settings for a storage root, from its ``ingest_pipeline.toml`` and ``passwords.toml``."""
    root = object_store.absolute(os.fspath(data)) if data else default_data_dir()
    text = _read_text(object_store.join(root, CONFIG_FILE))
    config: dict[str, Any] = tomllib.loads(text) if text is not None else {}
    profiles = _profiles(config.get("profiles") or {})
    passwords: dict[str, str] = {}
    pw_text = _read_text(os.environ.get("INGEST_PASSWORDS") or object_store.join(root, PASSWORDS_FILE))
    if pw_text is not None:
        raw = tomllib.loads(pw_text)
        passwords = {str(k): str(v) for k, v in (raw.get("passwords", raw)).items()}
    limits = config.get("limits") or {}
    embedder_cfg = dict(config.get("embedder") or {})
    dagster_cfg = config.get("dagster") or {}
    executor = str(os.environ.get("INGEST_EXECUTOR") or dagster_cfg.get("executor", "in_process"))
    if executor not in ("in_process", "multiprocess"):
        raise ValueError(f"executor {executor!r} must be 'in_process' or 'multiprocess'")
    partitioning = config.get("partitions") or {}
    mode = str(os.environ.get("INGEST_PARTITION_MODE") or partitioning.get("mode", "document"))
    if mode not in ("document", "hash", "folder"):
        raise ValueError(f"[partitions] mode must be document, hash or folder, not {mode!r}")
    max_bytes = dict(DEFAULT_MAX_BYTES)
    for family, mib in (limits.get("max_mib") or {}).items():
        if family not in DEFAULT_MAX_BYTES:
            raise ValueError(f"[limits.max_mib] {family!r} is not one of {', '.join(DEFAULT_MAX_BYTES)}")
        max_bytes[family] = int(float(mib) * MiB)
    link_roots = _link_roots(root, config.get("sources") or {})
    default_profile = str(config.get("default_profile", SERVED_PROFILE))
    routes = parse_routes(config.get("routes"), [p.name for p in profiles], default_profile)
    return Settings(
        data=root,
        sources=_source_filter(config.get("sources") or {}),
        profiles=tuple(profiles),
        default_profile=default_profile,
        routes=routes,
        chunker_configs={k: dict(v) for k, v in (config.get("chunkers") or {}).items()},
        embedder=str(embedder_cfg.pop("use", DEFAULT_EMBEDDER)),
        embedder_settings=embedder_cfg,
        passwords=passwords,
        max_file_bytes=int(limits.get("max_file_bytes", 512 * 1024 * 1024)),
        max_bytes=max_bytes,
        link_roots=link_roots,
        parse_timeout=float(os.environ.get("INGEST_PARSE_TIMEOUT") or limits.get("parse_timeout", 300.0)),
        parse_memory_bytes=int(limits.get("parse_memory_mib", 6 * 1024)) * 1024**2,
        stage_timeout=float(os.environ.get("INGEST_STAGE_TIMEOUT") or limits.get("stage_timeout", 600.0)),
        stage_memory_bytes=int(limits.get("stage_memory_mib", 4 * 1024)) * 1024**2,
        read_workers=max(1, int(limits.get("read_workers", default_read_workers()))),
        embed_batch=int(config.get("embed_batch", Settings.embed_batch)),
        embed_workers=max(1, int(config.get("embed_workers", available_cpus()))),
        embed_threads=max(0, int(config.get("embed_threads", Settings.embed_threads))),
        sensor_interval=int(
            os.environ.get("INGEST_SENSOR_INTERVAL") or dagster_cfg.get("sensor_interval", 15)
        ),
        executor=executor,
        run_batch=int(dagster_cfg.get("run_batch", Settings.run_batch)),
        run_retries=int(dagster_cfg.get("run_retries", 2)),
        partition_mode=mode,
        shard_count=int(partitioning.get("shards", 4096)),
        document_fields=_document_fields(config.get("documents") or {}),
        column_order=tuple(str(c) for c in (config.get("progress") or {}).get("column_order") or ()),
    )


def _profiles(tables: Mapping[str, Any]) -> list[Profile]:
    """The built-in profiles with the ``[profiles.<name>]`` sections applied: a section naming
    a built-in profile changes only the fields it gives, any other adds a profile."""
    profiles = list(builtin_profiles())
    for name, body in tables.items():
        if not _PROFILE_NAME.match(name):
            raise ValueError(f"profile name {name!r} must match [a-z][a-z0-9_]*")
        body = dict(body) if isinstance(body, Mapping) else {"chunkers": list(body)}
        same = [i for i, p in enumerate(profiles) if p.name == name]
        # a section naming a built-in profile changes only the fields it gives
        base = profiles[same[0]] if same else Profile(name)
        profile = Profile(
            name,
            tuple(body.get("chunkers", base.chunkers)),
            split_oversized=bool(body.get("split_oversized", base.split_oversized)),
            document_context=bool(body.get("document_context", base.document_context)),
            indexed=base.indexed if body.get("indexed") is None else bool(body["indexed"]),
            embedder=str(body.get("embedder") or base.embedder),
            embedder_settings=dict(body.get("embedder_settings") or base.embedder_settings),
        )
        if same:
            profiles[same[0]] = profile
        else:
            profiles.append(profile)
    return profiles


def _link_roots(root: str, table: Mapping[str, Any]) -> tuple[str, ...]:
    """Link roots are local folders; a relative one is relative to a local storage root
    (to the working directory when the storage root is a URI)."""
    anchor = os.getcwd() if object_store.is_uri(root) else root
    return tuple(os.path.abspath(os.path.join(anchor, str(r))) for r in (table.get("link_roots") or ()))


def _source_filter(table: Mapping[str, Any]) -> SourceFilter:
    def globs(key: str) -> tuple[str, ...]:
        value = table.get(key) or ()
        return (str(value),) if isinstance(value, str) else tuple(str(g) for g in value)

    limit = table.get("max_documents")
    return SourceFilter(globs("include"), globs("exclude"), None if limit is None else int(limit))


def _document_fields(tables: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    from ingest_pipeline.records.overrides import checked

    return {
        str(glob): checked(dict(fields), f'[documents."{glob}"]')
        for glob, fields in tables.items()
        if isinstance(fields, Mapping)
    }


def default_read_workers() -> int:
    """Documents the pages step reads at once unless told: one per CPU, at most two."""
    return min(2, available_cpus())


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity where the system says it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not every platform has affinity
        return max(1, os.cpu_count() or 1)
