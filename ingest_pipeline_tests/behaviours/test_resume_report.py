"""A run killed after some stages of a document: the next run finishes it and says so,
instead of calling it unchanged."""

from ingest_pipeline.commands.ingest import ingest
from ingest_pipeline.documents import collect
from ingest_pipeline.resources import parts_for
from ingest_pipeline.stages import finished, observe_source, read_document
from ingest_pipeline_tests.conftest import write


def test_a_document_a_killed_run_never_finished_is_reported_as_new_work(data_dir):
    write(data_dir / "sources" / "done.txt", "A document that a complete run indexed.\n")
    p = parts_for(str(data_dir))
    first = ingest(p)
    assert len(first.new) == 1 and not first.failed

    # What a kill leaves: a new file observed and read by a run that died before LanceDB.
    write(data_dir / "sources" / "killed.txt", "A document whose first run was killed midway.\n")
    entries = collect(p.settings, [p.settings.source_root])
    p.store.save_inventory(entries)
    killed = next(e.document_id for e in entries if e.path == "killed.txt")
    assert observe_source(p.settings, p.store, killed, "killed-run").status == "new"
    assert read_document(p.settings, p.store, killed, "killed-run").status == "new"
    assert finished(p.store, p.settings.default_profile, killed) is None

    second = ingest(p)
    done = next(e.document_id for e in entries if e.path == "done.txt")
    assert second.new == [killed] and second.unchanged == [done] and not second.failed
    marker = finished(p.store, p.settings.default_profile, killed)
    assert marker is not None and marker["run_id"] in second.run_ids
    assert p.index.count(p.settings.default_profile, killed) == marker["rows"] > 0

    third = ingest(p)
    assert sorted(third.unchanged) == sorted([done, killed]) and not third.new
