"""The Dagster instance of a storage root (its ``dagster_home``)."""

from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager, suppress
from typing import Any

from dagster._core.storage.event_log import SqliteEventLogStorage
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME

from ingest_pipeline.instance.check_writes import KeptCheckEvaluations, kept_reads_write_first

DAGSTER_YAML = """\
# The Dagster instance of this storage root: runs, partitions, sensor cursors.
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    # Look at the run queue every second (the default is 5 s): a dropped file is searchable sooner.
    dequeue_interval_seconds: 1
run_monitoring:
  enabled: true
  # A run whose process died is marked failed, and its pool slots freed, by the daemon.
  poll_interval_seconds: 30
  free_slots_after_run_end_seconds: 30
concurrency:
  runs:
    max_concurrent_runs: 2
  pools:
    # LanceDB writes conflict when concurrent: the lancedb assets share one slot.
    default_limit: 1
telemetry:
  enabled: false
# No "join the community" dialog over the UI on a fresh instance.
nux:
  enabled: false
# Runs' event logs in SQLite where Dagster keeps them ($DAGSTER_HOME/history/runs), written
# through connections kept open (ingest_pipeline.instance.home.KeptOpenSqliteEventLogStorage): a
# batched run writes hundreds of events, and opening the database anew for each cost more
# than the documents' own work.
event_log_storage:
  module: ingest_pipeline.instance.home
  class: KeptOpenSqliteEventLogStorage
"""


def ensure_dagster_home(path: str) -> str:
    os.makedirs(path, exist_ok=True)
    config = os.path.join(path, "dagster.yaml")
    if not os.path.exists(config):
        with open(config, "w", encoding="utf-8") as handle:
            handle.write(DAGSTER_YAML)
    return os.path.abspath(path)


def instance_for(path: str):
    """The instance of ``path``, whatever ``DAGSTER_HOME`` says: the kept-open event log is
    pointed at this home's ``history/runs`` explicitly."""
    import yaml
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    home = ensure_dagster_home(path)
    with open(os.path.join(home, "dagster.yaml"), encoding="utf-8") as handle:
        config = yaml.safe_load(handle) or {}
    storage = config.get("event_log_storage") or {}
    if storage.get("class") != KeptOpenSqliteEventLogStorage.__name__:
        return DagsterInstance.from_config(home)
    if not any(key in config for key in ("storage", "run_storage", "schedule_storage")):
        _seed_databases(home)  # SQLite everywhere, as DAGSTER_YAML has it
    ours = {**storage, "config": {**(storage.get("config") or {}), "base_dir": runs_directory(home)}}
    return DagsterInstance.from_ref(InstanceRef.from_dir(home, overrides={"event_log_storage": ours}))


# The SQLite databases of an instance home: runs, schedules and sensor ticks, the event log's index.
HOME_DATABASES = (("history", "runs.db"), ("schedules", "schedules.db"), ("history", "runs", "index.db"))
_MADE: dict[str, str | None] = {}  # template name -> its path, or None when it could not be made
_MADE_LOCK = threading.Lock()


def _made_once(name: str, make) -> str | None:
    """The path ``make(folder)`` returned the first time this process asked for ``name``,
    ``folder`` a temporary one removed at exit; None, for good, if it raised (Dagster then
    initialises each database itself)."""
    with _MADE_LOCK:
        if name not in _MADE:
            folder = tempfile.mkdtemp(prefix=f"ingest-{name}-")
            atexit.register(shutil.rmtree, folder, True)
            try:
                _MADE[name] = make(folder)
            except Exception:  # noqa: BLE001 - no template: Dagster initialises each database itself
                _MADE[name] = None
        return _MADE[name]


def _home_template() -> str | None:
    """A home whose databases Dagster itself created (tables, WAL mode, alembic stamp, data
    migrations marked done), made once per process."""

    def make(folder: str) -> str:
        from dagster import DagsterInstance
        from dagster._core.instance.ref import InstanceRef

        home = ensure_dagster_home(folder)
        config = {
            "module": __name__,
            "class": KeptOpenSqliteEventLogStorage.__name__,
            "config": {"base_dir": runs_directory(home)},
        }
        instance = DagsterInstance.from_ref(
            InstanceRef.from_dir(home, overrides={"event_log_storage": config})
        )
        with instance.event_log_storage.index_connection():
            pass  # the index database is made on first use
        instance.dispose()
        for parts in HOME_DATABASES:
            _checkpoint(os.path.join(home, *parts))
        return home

    return _made_once("home-template", make)


def _seed_databases(home: str) -> None:
    """A new home's databases as copies of the template's: Dagster creates each through alembic,
    which reads its migration scripts from disk, slowly; the copy is the same
    file, and Dagster then finds it at its head revision. A database already there, begun by
    any process, is never replaced."""
    missing = [parts for parts in HOME_DATABASES if not os.path.exists(os.path.join(home, *parts))]
    if not missing:
        return
    template = _home_template()
    if template is None:
        return
    for parts in missing:  # one not placed is created by Dagster, as without a template
        target = os.path.join(home, *parts)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        _place_copy(os.path.join(template, *parts), target)


def _checkpoint(path: str) -> None:
    """Everything of a WAL-mode SQLite database in its main file, no -wal beside it to copy."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _place_copy(source: str, target: str) -> bool:
    """A copy of ``source`` at ``target``, whole or not at all, and never over a file another
    process has begun (hard-linked from a private copy); False when it was not placed."""
    partial = f"{target}.{os.getpid()}.{threading.get_ident()}.partial"
    try:
        shutil.copyfile(source, partial)
        os.link(partial, target)
    except OSError:
        return False
    finally:
        with suppress(OSError):
            os.unlink(partial)
    return True


def runs_directory(home: str) -> str:
    """Where Dagster's SQLite storage keeps the runs' event logs under an instance home."""
    return os.path.join(os.path.abspath(home), "history", "runs")


def _shard_template(storage: SqliteEventLogStorage) -> str | None:
    """An empty run database initialised by Dagster itself (tables, WAL mode, alembic stamp),
    made once per process."""

    def make(folder: str) -> str:
        import sqlalchemy

        path = os.path.join(folder, "template.db")
        engine = sqlalchemy.create_engine(f"sqlite:///{path}")
        try:
            SqliteEventLogStorage._initdb(storage, engine)
        finally:
            engine.dispose()
        _checkpoint(path)
        return path

    return _made_once("run-shard", make)


def _last_of_each_kind(events: list[Any], ids: list[Any]) -> list[tuple[Any, Any]]:
    """The events whose ``asset_keys`` update survives a batch, in order: per asset, the last
    of each event type. That row holds only last-written values (the last materialization, the
    last run id, the last event's time), and an event type writes a subset of what a
    materialization writes, so these updates leave the row exactly as all of them would, one
    serialized record per asset instead of one per partition."""
    last: dict[tuple[Any, Any], int] = {}
    for position, event in enumerate(events):
        last[(event.dagster_event.asset_key, event.dagster_event_type)] = position
    return [(events[i], ids[i]) for i in sorted(last.values())]


class KeptOpenSqliteEventLogStorage(KeptCheckEvaluations, SqliteEventLogStorage):
    """Dagster's SQLite event log (one database per run plus an index shard), with each
    shard's engine kept open instead of created, initialised and disposed for every event.

    The stock storage opens a new SQLAlchemy engine per statement (``NullPool``) and asks
    whether a table exists before every partition lookup, and a batched run writes
    hundreds of events, so that cost dominated writing them. Here an engine per
    shard is kept (the index shard and the most recent run shards, at most ``KEEP``), a
    table once seen is not looked up again, and the shards' journals commit with
    ``synchronous=NORMAL`` (WAL mode, which Dagster sets: a committed event survives the
    process dying; only a power cut can lose the last ones, never corrupt the file).

    Dagster also lists every dynamic partition each time a step adds metadata to one
    partition, which grows with the corpus. The list is kept for ``PARTITIONS_SECONDS``
    (dropped at once when this process adds or deletes partitions): another process's new
    partitions show up at most that late, and a key missing from the kept list is still
    looked up, so a partition is never wrongly reported absent.

    A run's check evaluations, one per document and check, are written together
    (``check_writes.KeptCheckEvaluations``).

    Files, schema and everything Dagster reads stay exactly as the stock storage has them,
    so the webserver and the daemon read what the runs write, whichever class they use."""

    KEEP = 8
    BATCH = 1000
    PARTITIONS_SECONDS = 1.0

    def __init__(self, base_dir: str, inst_data: Any = None):
        self._engines: OrderedDict[str, Any] = OrderedDict()
        self._tables: set[Any] = set()  # tables, columns and indexes once seen
        self._partitions: dict[str, tuple[float, list[str], frozenset[str]]] = {}
        self._keep_checks()
        # Dagster hands a step's partitioned materializations and a run's planned events to
        # ``store_event_batch`` only when this is set; it reads it at each event, in every
        # process that opens this instance (the CLI, a run worker, the daemon).
        os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", str(self.BATCH))
        super().__init__(base_dir, inst_data=inst_data)

    @classmethod
    def config_type(cls) -> Any:
        from dagster import Field, StringSource

        return {
            "base_dir": Field(
                StringSource,
                is_required=False,
                description="Default: $DAGSTER_HOME/history/runs, as Dagster's own.",
            )
        }

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> KeptOpenSqliteEventLogStorage:
        base_dir = (config_value or {}).get("base_dir")
        if not base_dir:
            home = os.environ.get("DAGSTER_HOME")
            if not home:
                raise RuntimeError(
                    "KeptOpenSqliteEventLogStorage needs DAGSTER_HOME (or a base_dir in its config) "
                    "to know where the runs' event logs are"
                )
            base_dir = runs_directory(home)
        return cls(base_dir, inst_data=inst_data)

    def _engine_for(self, shard: str) -> Any:
        import sqlalchemy
        from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS

        engine = self._engines.get(shard)
        if engine is not None:
            self._engines.move_to_end(shard)
            return engine
        engine = sqlalchemy.create_engine(
            self.conn_string_for_shard(shard), connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS}
        )

        @sqlalchemy.event.listens_for(engine, "connect")
        def _journal(dbapi_connection, _record):  # every connection of this engine
            dbapi_connection.execute("PRAGMA synchronous=NORMAL")

        self._engines[shard] = engine
        while len(self._engines) > self.KEEP:
            _, oldest = self._engines.popitem(last=False)
            oldest.dispose()
        return engine

    @contextmanager
    def _connect(self, shard: str):
        with self._db_lock:
            engine = self._engine_for(shard)
            if shard not in self._initialized_dbs:
                if shard == INDEX_SHARD_NAME or not self._copy_template(shard):
                    self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn:
                with conn.begin():
                    yield conn

    def _copy_template(self, shard: str) -> bool:
        """A new run's database as a copy of an empty one this process initialised once.
        Dagster creates each run's SQLite file with its tables and then stamps it through
        alembic, which reads its migration scripts from disk every time (slow, per run);
        a copy is the same file. False, and Dagster's own initialisation runs, when the file
        already exists (another process began it) or no template could be made."""
        path = self.path_for_shard(shard)
        if os.path.exists(path):
            return False
        template = _shard_template(self)
        return template is not None and _place_copy(template, path)

    def store_event_batch(self, events: Any) -> None:
        """A batch Dagster hands over whole (``DAGSTER_EVENT_BATCH_SIZE``, set in ``__init__``):
        a step's partitioned materializations, a run's planned events. The same rows as
        ``store_event`` writes for each, in one multi-row insert per database instead of a
        statement and a commit or two per event."""
        from dagster._core.events import ASSET_CHECK_EVENTS, ASSET_EVENTS, EVENT_TYPE_TO_PIPELINE_RUN_STATUS
        from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
        from dagster._core.storage.sqlalchemy_compat import db_result

        def kind(event: Any) -> Any:
            return event.dagster_event_type if event.is_dagster_event else None

        self._write_checks()  # the step's check evaluations come before what it writes next

        if any(kind(e) in EVENT_TYPE_TO_PIPELINE_RUN_STATUS for e in events):  # never batched by Dagster
            for event in events:
                self.store_event(event)
            return
        by_run: dict[str, list[Any]] = {}
        for event in events:
            by_run.setdefault(event.run_id, []).append(event)
        for run_id, group in by_run.items():
            rows = [self._event_to_row(event) for event in group]  # each event serialized once
            with self.run_connection(run_id) as conn:
                conn.execute(SqlEventLogStorageTable.insert(), rows)
            mirrored = [i for i, event in enumerate(group) if kind(event) in ASSET_EVENTS]
            if mirrored:
                asset_events = [group[i] for i in mirrored]
                with self.index_transaction() as conn:
                    inserted = conn.execute(
                        SqlEventLogStorageTable.insert().returning(
                            SqlEventLogStorageTable.c.id, sort_by_parameter_order=True
                        ),
                        [rows[i] for i in mirrored],
                    )
                    ids = [row[0] for row in inserted]
                    self._store_asset_event_tags(conn, asset_events, ids)
                    for event, event_id in _last_of_each_kind(asset_events, ids):
                        self._store_asset_event(conn, event, event_id)
            for event, row in zip(group, rows):
                if kind(event) in ASSET_CHECK_EVENTS:
                    with (
                        self.index_connection() as conn,
                        db_result(conn, SqlEventLogStorageTable.insert().values(**row)) as result,
                    ):
                        event_id = result.inserted_primary_key[0]
                    self.store_asset_check_event(event, event_id)

    def _store_asset_event(self, conn: Any, event: Any, event_id: int) -> None:
        """The asset's row in ``asset_keys``, updated in place and inserted only when it is not
        there yet. Dagster's own order (insert, and update when the key's uniqueness refuses
        it) raises and unwinds an ``IntegrityError`` for every event after an asset's first,
        a few milliseconds each; the row written is the same."""
        from dagster._core.storage.event_log.schema import AssetKeyTable

        if not (event.dagster_event and event.dagster_event.asset_key):
            return
        values = self._get_asset_entry_values(
            event, event_id, self._has_asset_key_index_cols_on_connection(conn)
        )
        if not values:
            return
        key = event.dagster_event.asset_key.to_string()
        updated = conn.execute(
            AssetKeyTable.update().values(**values).where(AssetKeyTable.c.asset_key == key)
        )
        if updated.rowcount == 0:
            conn.execute(AssetKeyTable.insert().values(asset_key=key, **values))

    def _seen(self, key: Any, lookup) -> bool:
        """A schema fact (table, column, index) once found stays: migrations only add them."""
        if key in self._tables:
            return True
        found = lookup()
        if found:
            self._tables.add(key)
        return found

    def has_table(self, table_name: str) -> bool:
        return self._seen(
            table_name, lambda: super(KeptOpenSqliteEventLogStorage, self).has_table(table_name)
        )

    def _has_asset_key_col_on_connection(self, conn: Any, column_name: str) -> bool:
        # Asked before every asset event.
        return self._seen(
            ("asset_keys", column_name),
            lambda: super(KeptOpenSqliteEventLogStorage, self)._has_asset_key_col_on_connection(
                conn, column_name
            ),
        )

    def has_secondary_index(self, name: str) -> bool:
        return self._seen(
            ("secondary_index", name),
            lambda: super(KeptOpenSqliteEventLogStorage, self).has_secondary_index(name),
        )

    def _kept_partitions(self, name: str) -> tuple[list[str], frozenset[str]] | None:
        kept = self._partitions.get(name)
        if kept is None or time.monotonic() - kept[0] > self.PARTITIONS_SECONDS:
            return None
        return kept[1], kept[2]

    def get_dynamic_partitions(self, partitions_def_name: str) -> Any:
        kept = self._kept_partitions(partitions_def_name)
        if kept is not None:
            return list(kept[0])
        keys = list(super().get_dynamic_partitions(partitions_def_name))
        self._partitions[partitions_def_name] = (time.monotonic(), keys, frozenset(keys))
        return list(keys)

    def has_dynamic_partition(self, partitions_def_name: str, partition_key: str) -> bool:
        kept = self._kept_partitions(partitions_def_name)
        if kept is not None and partition_key in kept[1]:
            return True
        return super().has_dynamic_partition(partitions_def_name, partition_key)

    def add_dynamic_partitions(self, partitions_def_name: str, partition_keys: Any) -> Any:
        try:
            return super().add_dynamic_partitions(partitions_def_name, partition_keys)
        finally:
            self._partitions.pop(partitions_def_name, None)

    def delete_dynamic_partition(self, partitions_def_name: str, partition_key: str) -> None:
        try:
            super().delete_dynamic_partition(partitions_def_name, partition_key)
        finally:
            self._partitions.pop(partitions_def_name, None)

    def _dispose_engines(self) -> None:
        with self._db_lock:
            while self._engines:
                _, engine = self._engines.popitem()
                engine.dispose()

    def wipe(self) -> None:
        self._partitions.clear()
        self._dispose_engines()
        super().wipe()

    def dispose(self) -> None:
        self._write_checks()
        self._dispose_engines()
        super().dispose()


kept_reads_write_first(KeptOpenSqliteEventLogStorage)
