"""A re-run over an unchanged tree launches no Dagster run, and anything that can change a
document's outputs sends exactly that document (or, for a setting, every document) through
the graph again."""

from __future__ import annotations

from ingest_pipeline.commands.ingest import ingest
from ingest_pipeline.resources import parts_for
from ingest_pipeline_tests.conftest import write

PAGE = "Tomatoes need deep watering twice a week in dry summers.\n\n" * 3


def _fresh(data_dir):
    return parts_for(str(data_dir))


def _ids(p, report, path):
    return next(doc for doc, label in report.paths.items() if label == path)


def test_an_unchanged_tree_runs_nothing_and_each_kind_of_change_runs_its_documents(data_dir):
    src = data_dir / "sources"
    write(src / "a.txt", "A. " + PAGE)
    write(src / "b.md", "# Beans\n\n" + PAGE)
    write(src / "broken.pdf", b"%PDF-1.4 not really a PDF\n%%EOF\n")
    p = _fresh(data_dir)
    first = ingest(p)
    assert len(first.new) == 2 and len(first.failed) == 1 and first.run_ids
    a, b = _ids(p, first, "a.txt"), _ids(p, first, "b.md")

    # Nothing changed: no run at all, and the report says what a run would have said.
    second = ingest(p)
    assert second.run_ids == []
    assert sorted(second.unchanged) == sorted([a, b]) and list(second.failed) == list(first.failed)
    assert second.texts_embedded == 0 and second.texts_from_cache > 0
    assert second.chunks == first.chunks
    reading = next(s for s in second.stages if s["stage"] == "Reading")
    assert (reading["cached"], reading["failed"]) == (2, 1)

    # New bytes: that document runs (one run), the other stays as it is.
    write(src / "a.txt", "A, rewritten. " + PAGE)
    third = ingest(p)
    assert len(third.run_ids) >= 1 and third.changed == [a] and third.unchanged == [b]

    # Rows gone from LanceDB behind the pipeline's back: the document runs and gets them back.
    profile = p.settings.default_profile
    rows = p.index.count(profile, b)
    p.index.delete_document(b)
    fourth = ingest(p)
    assert fourth.run_ids and p.index.count(profile, b) == rows > 0
    assert ingest(p).run_ids == []

    # A setting that changes an output: every document goes through the graph again
    # (markdown@1 cuts text and Markdown: both are re-cut; the broken PDF fails again).
    write(data_dir / "ingest_pipeline.toml", '[chunkers."markdown@1"]\ntarget_chars = 120\nmax_chars = 200\n')
    p = _fresh(data_dir)
    fifth = ingest(p)
    assert (
        fifth.run_ids and sorted(fifth.changed) == sorted([a, b]) and list(fifth.failed) == list(first.failed)
    )

    # An edit of the passwords file (its values never stored) looks at every document again.
    write(data_dir / "passwords.toml", '"broken.pdf" = "secret"\n')
    p = _fresh(data_dir)
    assert ingest(p).run_ids
    assert ingest(p).run_ids == []

    # --force ignores the markers.
    assert ingest(p, force=True).run_ids


def test_a_document_that_ran_out_of_time_is_never_marked_current(data_dir):
    import pyarrow as pa

    from ingest_pipeline import stages
    from ingest_pipeline.definitions import INGEST_JOB, build_definitions
    from ingest_pipeline.storage.freshness import Freshness

    write(data_dir / "sources" / "a.txt", PAGE)
    p = _fresh(data_dir)
    doc = next(iter(ingest(p).new))
    assert p.store.current_marker(doc)  # a clean run marks it
    # What a reading timeout leaves: an errors row naming the parse limit.
    stages.record_error(p.store, "pages", doc, stages.StageError("took longer than 300 s"), "run")
    table = p.lake.read("errors", "pages", doc)
    p.lake.write(
        "errors",
        ("pages", doc),
        table.set_column(table.schema.get_field_index("error"), "error", pa.array(["ParseLimitExceeded"])),
    )
    p.store.forget_current_marker(doc)

    assets = [
        k.to_user_string()
        for k in build_definitions(p.settings).resolve_job_def(INGEST_JOB).asset_layer.selected_asset_keys
    ]
    entry = p.store.inventory()[doc]
    freshness = Freshness(p, assets, [doc])
    freshness.mark(entry)
    assert p.store.current_marker(doc) is None  # a timeout depends on the machine, not the bytes
    assert not freshness.check(entry).current
    assert ingest(p).run_ids  # so the next ingest tries it again
