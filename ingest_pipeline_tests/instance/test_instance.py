"""The instance of a storage root: its event log keeps SQLite connections open, writes the
very files Dagster's own storage reads, and never reports a partition missing that another
process has added."""

import os
import subprocess
import sys
import textwrap

import pytest
from dagster import DagsterEventType, DagsterInstance
from dagster._core.storage.event_log import SqliteEventLogStorage

from ingest_pipeline.commands.ingest import ingest
from ingest_pipeline.instance.home import (
    DAGSTER_YAML,
    KeptOpenSqliteEventLogStorage,
    instance_for,
    runs_directory,
)
from ingest_pipeline.partitions import DOCUMENTS
from ingest_pipeline_tests.conftest import write
from ingest_pipeline_tests.dagster_helpers import fresh_pipeline


def _stock_instance(home):
    """The same home read through Dagster's stock SQLite event log (what a user's own
    ``dagster`` without this package's class would use)."""
    stock = DAGSTER_YAML.replace(
        "module: ingest_pipeline.instance.home\n  class: KeptOpenSqliteEventLogStorage",
        f"module: dagster._core.storage.event_log\n  class: SqliteEventLogStorage\n"
        f"  config:\n    base_dir: {runs_directory(str(home))}",
    )
    other = home.parent / "stock_home"
    other.mkdir()
    (other / "dagster.yaml").write_text(stock)
    # Runs and schedules live under the home; the stock instance is pointed at the same files.
    (other / "history").symlink_to(home / "history")
    return DagsterInstance.from_config(str(other))


def test_a_run_written_through_kept_open_connections_reads_the_same_through_dagsters_own_storage(data_dir):
    for i in range(3):
        write(data_dir / "sources" / f"note_{i}.txt", f"note {i} about the greenhouse heating\n")
    pipeline = fresh_pipeline(data_dir)
    instance = instance_for(pipeline.settings.dagster_home)
    assert isinstance(instance.event_log_storage, KeptOpenSqliteEventLogStorage)
    report = ingest(pipeline, instance=instance)
    assert report.run_ids and not report.failed

    stock = _stock_instance(data_dir / "dagster_home")
    assert type(stock.event_log_storage) is SqliteEventLogStorage
    run_id = report.run_ids[0]
    ours = [r.dagster_event.event_type for r in instance.all_logs(run_id) if r.dagster_event]
    theirs = [r.dagster_event.event_type for r in stock.all_logs(run_id) if r.dagster_event]
    assert ours == theirs and DagsterEventType.ASSET_MATERIALIZATION in theirs
    materialized = stock.get_materialized_partitions(
        next(
            r.dagster_event.asset_key
            for r in stock.all_logs(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
        )
    )
    assert materialized == set(instance.get_dynamic_partitions(DOCUMENTS))


def test_a_partition_another_process_adds_is_never_reported_missing(data_dir):
    home = data_dir / "dagster_home"
    instance = instance_for(str(home))
    instance.add_dynamic_partitions(DOCUMENTS, ["doc_a"])
    assert instance.get_dynamic_partitions(DOCUMENTS) == ["doc_a"]  # now kept for a second
    script = textwrap.dedent(f"""
        from ingest_pipeline.instance.home import instance_for
        instance_for({str(home)!r}).add_dynamic_partitions("documents", ["doc_b"])
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert instance.has_dynamic_partition(DOCUMENTS, "doc_b")  # not in the kept list: looked up
    storage = instance.event_log_storage
    storage.PARTITIONS_SECONDS = 0.0  # the list kept a moment ago is stale at once
    assert instance.get_dynamic_partitions(DOCUMENTS) == ["doc_a", "doc_b"]
    instance.delete_dynamic_partition(DOCUMENTS, "doc_a")  # this process's own change: seen at once
    storage.PARTITIONS_SECONDS = 60.0
    assert instance.get_dynamic_partitions(DOCUMENTS) == ["doc_b"]
    assert not instance.has_dynamic_partition(DOCUMENTS, "doc_a")


def test_the_instance_of_a_root_ignores_a_dagster_home_pointing_elsewhere(data_dir, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(elsewhere))
    instance = instance_for(str(data_dir / "dagster_home"))
    assert instance.event_log_storage._base_dir == runs_directory(str(data_dir / "dagster_home"))
    monkeypatch.delenv("DAGSTER_HOME")
    with pytest.raises(RuntimeError, match="needs DAGSTER_HOME"):
        KeptOpenSqliteEventLogStorage.from_config_value(None, {})


def test_a_new_roots_instance_shows_no_community_dialog_and_sends_no_telemetry(data_dir):
    instance = instance_for(str(data_dir / "dagster_home"))
    assert instance.nux_enabled is False and instance.telemetry_enabled is False


def test_old_run_shards_are_closed_beyond_the_kept_number(data_dir):
    storage = instance_for(str(data_dir / "dagster_home")).event_log_storage
    for i in range(storage.KEEP + 3):
        with storage.run_connection(f"run_{i}") as conn:
            conn.exec_driver_sql("SELECT 1")
    kept = list(storage._engines)
    assert len(kept) == storage.KEEP and kept[-1] == f"run_{storage.KEEP + 2}" and "run_0" not in kept


def _asset_story(instance, run_id):
    """What the UI reads of a run's assets: per asset, its materialized partitions, each
    partition's status line (its story), and the asset record's last run and last partition."""
    story = {}
    keys = {
        r.dagster_event.asset_key
        for r in instance.all_logs(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
    }
    for key in keys:
        partitions = instance.get_materialized_partitions(key)
        record = instance.get_asset_records([key])[0].asset_entry
        last = record.last_materialization_record.event_log_entry
        story[key.to_user_string()] = (
            sorted(partitions),
            record.last_run_id == run_id,
            last.dagster_event.partition,
            sorted(
                str(e.dagster_event.asset_observation_data.asset_observation.metadata["status"].value)
                for e in instance.all_logs(run_id, of_type=DagsterEventType.ASSET_OBSERVATION)
                if e.dagster_event.asset_key == key
            ),
        )
    return story


def test_a_steps_partitioned_materializations_are_stored_as_one_batch_that_reads_as_event_by_event(
    tmp_path, monkeypatch
):
    stored = []
    original = KeptOpenSqliteEventLogStorage.store_event_batch
    monkeypatch.setattr(
        KeptOpenSqliteEventLogStorage,
        "store_event_batch",
        lambda self, events: (stored.append(len(events)), original(self, events))[1],
    )
    stories, kinds = [], []
    for batched in (True, False):
        data = tmp_path / ("batched" if batched else "one_by_one") / "data"
        for i in range(4):
            write(data / "sources" / f"note_{i}.txt", f"note {i} about the greenhouse heating\n")
        monkeypatch.setenv("DAGSTER_EVENT_BATCH_SIZE", "1000" if batched else "0")
        pipeline = fresh_pipeline(data)
        instance = instance_for(pipeline.settings.dagster_home)
        report = ingest(pipeline, instance=instance)
        assert len(report.run_ids) == 1 and not report.failed
        if batched:
            assert stored and max(stored) >= 4  # a step's four partitions, and the run's planned events
            written = len(stored)
        else:
            assert len(stored) == written  # nothing more went through a batch
        run_id = report.run_ids[0]
        kinds.append(
            sorted(str(r.dagster_event.event_type) for r in instance.all_logs(run_id) if r.dagster_event)
        )
        stories.append(_asset_story(instance, run_id))
        stock = _stock_instance(data / "dagster_home")  # and Dagster's own storage reads the same
        assert _asset_story(stock, run_id) == stories[-1]
    assert kinds[0] == kinds[1]
    assert stories[0] == stories[1] and all(s[1] and s[2] for s in stories[0].values())


def test_a_new_runs_database_is_a_copy_of_one_dagster_initialised_and_reads_as_dagsters_own(
    data_dir, tmp_path
):
    """Run databases are copied from an empty one Dagster initialised (tables, WAL, alembic
    stamp) instead of being stamped through alembic each time: the copy has Dagster's head
    revision and exactly the schema Dagster makes, and the stock storage reads its events."""
    import sqlite3

    import sqlalchemy
    from dagster._core.storage.event_log.sqlite import sqlite_event_log
    from dagster._core.storage.sql import check_alembic_revision, get_alembic_config

    write(data_dir / "sources" / "note.txt", "a note about the greenhouse heating\n")
    pipeline = fresh_pipeline(data_dir)
    instance = instance_for(pipeline.settings.dagster_home)
    storage = instance.event_log_storage
    initialised = []
    real = storage._initdb
    storage._initdb = lambda engine, **kw: (initialised.append(engine.url.database), real(engine, **kw))[1]
    report = ingest(pipeline, instance=instance)
    assert report.run_ids and not report.failed
    run_db = storage.path_for_shard(report.run_ids[0])
    assert os.path.exists(run_db) and run_db not in initialised  # made by copying, not by alembic

    def schema(path):
        with sqlite3.connect(path) as conn:
            rows = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        conn.close()
        return rows, mode

    fresh = str(tmp_path / "stock.db")  # what Dagster's own initialisation makes
    engine = sqlalchemy.create_engine(f"sqlite:///{fresh}")
    sqlite_event_log.SqliteEventLogStorage._initdb(storage, engine)
    engine.dispose()
    assert schema(run_db) == schema(fresh) and schema(run_db)[1] == "wal"
    engine = sqlalchemy.create_engine(f"sqlite:///{run_db}")
    with engine.connect() as conn:
        db_revision, head = check_alembic_revision(get_alembic_config(sqlite_event_log.__file__), conn)
    engine.dispose()
    assert db_revision == head and head

    stock = _stock_instance(data_dir / "dagster_home")
    ours = [r.dagster_event.event_type for r in instance.all_logs(report.run_ids[0]) if r.dagster_event]
    theirs = [r.dagster_event.event_type for r in stock.all_logs(report.run_ids[0]) if r.dagster_event]
    assert ours == theirs and DagsterEventType.ASSET_MATERIALIZATION in theirs


def test_asset_records_are_updated_in_place_without_a_refused_insert_and_match_dagsters_own(
    data_dir, tmp_path
):
    """The events of two runs, stored again through this storage and through Dagster's stock
    one: the ``asset_keys`` rows come out identical, and this storage never has SQLite refuse
    an insert (Dagster's own inserts first and updates after the refusal, for every event
    after an asset's first)."""
    import sqlalchemy

    source = data_dir / "sources" / "note.txt"
    write(source, "a note about the greenhouse heating\n")
    pipeline = fresh_pipeline(data_dir)
    instance = instance_for(pipeline.settings.dagster_home)
    first = ingest(pipeline, instance=instance)
    write(source, "a note about the greenhouse heating, and the boiler that feeds it\n")
    second = ingest(pipeline, instance=instance)
    events = [e for run in first.run_ids + second.run_ids for e in instance.all_logs(run)]
    assert sum(e.dagster_event_type == DagsterEventType.ASSET_MATERIALIZATION for e in events) >= 2 * 10

    def replay(storage):
        refused = []
        real = storage.index_connection

        def watched():
            context = real()
            conn = context.__enter__()
            listen = sqlalchemy.event.listen
            listen(
                conn.engine, "handle_error", lambda ctx: refused.append(type(ctx.original_exception).__name__)
            )
            return _Entered(context, conn)

        storage.index_connection = watched
        for event in events:
            storage.store_event(event)
        with real() as conn:  # every column but the row id and the wall-clock time of the insert
            rows = conn.exec_driver_sql("SELECT * FROM asset_keys ORDER BY asset_key")
            names = list(rows.keys())
            rows = [{k: v for k, v in zip(names, row) if k not in ("id", "create_timestamp")} for row in rows]
        return rows, refused

    ours, our_refusals = replay(KeptOpenSqliteEventLogStorage(str(tmp_path / "ours")))
    theirs, their_refusals = replay(SqliteEventLogStorage(str(tmp_path / "stock")))
    assert len(ours) >= 10 and ours == theirs and all(r["last_materialization"] for r in ours)
    assert our_refusals == [] and "IntegrityError" in their_refusals


class _Entered:
    """A context manager already entered: hands back its connection, then exits it."""

    def __init__(self, context, conn):
        self.context, self.conn = context, conn

    def __enter__(self):
        return self.conn

    def __exit__(self, *exc):
        return self.context.__exit__(*exc)


def test_a_new_homes_databases_are_copies_dagster_finds_at_its_head_and_each_home_keeps_its_own_identity(
    tmp_path, monkeypatch
):
    """A new storage root's run, schedule and event-index databases are copied from a home
    Dagster initialised once per process, not created through alembic each time: the copies
    hold exactly what Dagster's own creation makes, and no home shares another's identity."""
    import sqlite3

    from dagster._core.storage.event_log.sqlite import sqlite_event_log
    from dagster._core.storage.runs.sqlite import sqlite_run_storage
    from dagster._core.storage.schedules.sqlite import sqlite_schedule_storage

    from ingest_pipeline.instance import home as instance_module
    from ingest_pipeline.instance.home import HOME_DATABASES

    instance_for(str(tmp_path / "first"))  # the process's template exists from here on
    stamped = []
    for module in (sqlite_run_storage, sqlite_schedule_storage, sqlite_event_log):
        real = module.stamp_alembic_rev
        monkeypatch.setattr(
            module,
            "stamp_alembic_rev",
            lambda *a, _real=real, **kw: (stamped.append(a[0].config_file_name), _real(*a, **kw))[1],
        )
    seeded = instance_for(str(tmp_path / "seeded"))
    with seeded.event_log_storage.index_connection():
        pass
    assert stamped == []  # nothing created through alembic
    monkeypatch.setattr(instance_module, "_seed_databases", lambda home: None)
    made = instance_for(str(tmp_path / "made"))  # what Dagster makes without the copies
    with made.event_log_storage.index_connection():
        pass
    assert len(stamped) == 3

    def contents(home, parts):
        with sqlite3.connect(os.path.join(home, *parts)) as conn:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            found = {
                "schema": conn.execute(
                    "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
                ).fetchall(),
                "journal": conn.execute("PRAGMA journal_mode").fetchone()[0],
                "revision": conn.execute("SELECT * FROM alembic_version").fetchall(),
                "marked": sorted(r[0] for r in conn.execute("SELECT name FROM secondary_indexes"))
                if "secondary_indexes" in tables
                else None,
                "rows": {
                    t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                    for t in tables
                    if t not in ("alembic_version", "secondary_indexes")
                },
            }
        conn.close()
        return found

    for parts in HOME_DATABASES:
        ours, dagsters = contents(tmp_path / "seeded", parts), contents(tmp_path / "made", parts)
        assert ours == dagsters and ours["journal"] == "wal" and ours["revision"], parts
        assert not any(ours["rows"].values())  # empty: no run, tick or identity carried over
    assert seeded.run_storage.get_run_storage_id() != made.run_storage.get_run_storage_id()


def test_a_home_whose_dagster_yaml_names_the_old_instance_module_still_opens(tmp_path):
    """Homes written before the instance code became a package name the event log storage's
    module ``ingest_pipeline.instance``; their instance is still the kept-open one."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    old = DAGSTER_YAML.replace(
        "module: ingest_pipeline.instance.home\n", "module: ingest_pipeline.instance\n"
    )
    assert old != DAGSTER_YAML
    (home / "dagster.yaml").write_text(old)
    instance = instance_for(str(home))
    try:
        assert isinstance(instance.event_log_storage, KeptOpenSqliteEventLogStorage)
    finally:
        instance.dispose()


def test_a_runs_check_evaluations_are_written_together_and_read_as_dagsters_own(data_dir, monkeypatch):
    from dagster import AssetCheckKey

    stored_one_by_one = []
    original = SqliteEventLogStorage.store_event
    monkeypatch.setattr(
        SqliteEventLogStorage,
        "store_event",
        lambda self, event: (stored_one_by_one.append(event.dagster_event_type), original(self, event))[1],
    )
    for i in range(3):
        write(data_dir / "sources" / f"note_{i}.txt", f"note {i} about the greenhouse heating\n")
    pipeline = fresh_pipeline(data_dir)
    instance = instance_for(pipeline.settings.dagster_home)
    report = ingest(pipeline, instance=instance)
    assert report.run_ids and not report.failed
    assert DagsterEventType.ASSET_CHECK_EVALUATION not in stored_one_by_one  # none went alone
    evaluations = instance.all_logs(report.run_ids[0], of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
    judged = [e.dagster_event.event_specific_data for e in evaluations]
    keys = sorted({AssetCheckKey(j.asset_key, j.check_name) for j in judged}, key=str)
    assert len(evaluations) >= 3 * len(keys) > 0  # every check judged each of the three notes
    stock = _stock_instance(data_dir / "dagster_home")

    def latest(inst):
        return sorted(
            (
                str(i.check_key),
                i.partition_key,
                i.latest_execution_status.value,
                i.latest_check_event_storage_id,
            )
            for i in inst.event_log_storage.get_asset_check_partition_info(keys)
        )

    assert latest(stock) == latest(instance) and len(latest(stock)) == len(evaluations)
    assert {row[2] for row in latest(stock)} == {"SUCCEEDED"}
