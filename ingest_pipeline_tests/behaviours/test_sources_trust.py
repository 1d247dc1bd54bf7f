"""Sources you can trust: links that leave the source root are refused, a file has one
identity however it is named, and a file that turns unreadable leaves search."""

import os

from ingest_pipeline.commands.ingest import ingest
from ingest_pipeline.documents import DocumentEntry, collect, entry_for, superseded
from ingest_pipeline.resources import parts_for
from ingest_pipeline.samples import simple_pdf
from ingest_pipeline.settings import load_settings
from ingest_pipeline.storage.catalog import query
from ingest_pipeline_tests.conftest import write


def test_a_file_inside_the_root_has_one_id_however_it_is_named(data_dir, tmp_path):
    settings = load_settings(data_dir)
    root = data_dir / "sources"
    write(root / "team" / "plan.txt", "plan")
    alias = tmp_path / "alias"
    os.symlink(data_dir, alias)  # another spelling of the storage root
    spellings = [
        [root / "team" / "plan.txt"],
        [root / "team"],
        [root],
        [root / "team" / ".." / "team" / "plan.txt"],
        [alias / "sources" / "team" / "plan.txt"],
        [alias / "sources"],
    ]
    found = {
        (e.document_id, e.path) for paths in spellings for e in collect(settings, [str(p) for p in paths])
    }
    assert len(found) == 1 and next(iter(found))[1] == "team/plan.txt"


def test_a_file_outside_every_root_is_one_document_by_its_resolved_path(data_dir, tmp_path):
    settings = load_settings(data_dir)
    outside = write(tmp_path / "elsewhere" / "reports" / "q3.txt", "q3")
    direct = entry_for(settings, str(outside))
    through_folder = collect(settings, [str(tmp_path / "elsewhere")])[0]
    assert direct.document_id == through_folder.document_id
    assert (direct.path, through_folder.path) == ("q3.txt", "elsewhere/reports/q3.txt")
    # The label it was first registered with stays, so its path does not flip between runs.
    again = collect(settings, [str(outside)], known={direct.document_id: through_folder})
    assert [(e.document_id, e.path) for e in again] == [(direct.document_id, "elsewhere/reports/q3.txt")]
    other = write(tmp_path / "other" / "q3.txt", "another q3")
    assert entry_for(settings, str(other)).document_id != direct.document_id  # same name, other file


def test_a_root_holding_two_ids_for_one_file_keeps_one(data_dir, tmp_path):
    """An inventory written by the old rule (an id per spelling) converges on one document."""
    settings = load_settings(data_dir)
    outside = write(tmp_path / "elsewhere" / "q3.txt", "q3")
    uri = entry_for(settings, str(outside)).uri
    old = {
        "q3-txt-aaaa": DocumentEntry("q3-txt-aaaa", "q3.txt", uri),
        "elsewhere-q3-txt-aaaa": DocumentEntry("elsewhere-q3-txt-aaaa", "elsewhere/q3.txt", uri),
    }
    entries = collect(settings, [str(tmp_path / "elsewhere")], known=old)
    assert [(e.document_id, e.path) for e in entries] == [("elsewhere-q3-txt-aaaa", "elsewhere/q3.txt")]
    assert [e.document_id for e in superseded(old, entries)] == ["q3-txt-aaaa"]


def _ingest(data_dir):
    p = parts_for(str(data_dir))
    return p, ingest(p)


def test_links_out_of_the_root_are_refused_and_one_file_is_one_document(data_dir, tmp_path):
    root = data_dir / "sources"
    write(root / "greenhouse.txt", "The greenhouse vents open at twenty-six degrees.\n")
    secret = write(tmp_path / "private" / "secret.txt", "The vault passphrase is marzipan-quokka.\n")
    allowed = write(tmp_path / "shared_docs" / "pumps.txt", "The irrigation pumps are serviced each March.\n")
    os.symlink(secret, root / "escape.txt")
    os.symlink(tmp_path / "private", root / "private_folder")  # a linked folder is not walked
    os.symlink(root / "greenhouse.txt", root / "inside_link.txt")
    os.symlink(allowed, root / "allowed_link.txt")
    (data_dir / "ingest_pipeline.toml").write_text(
        f'[sources]\nlink_roots = ["{tmp_path / "shared_docs"}"]\n'
    )

    p, report = _ingest(data_dir)
    paths = report.paths
    failed = {paths[d]: errs for d, errs in report.failed.items()}
    assert set(failed) == {"escape.txt"}
    assert (
        "symbolic link" in failed["escape.txt"][0]["reason"]
        and "outside the source root" in failed["escape.txt"][0]["reason"]
    )
    assert sorted(paths[d] for d in report.new) == ["allowed_link.txt", "greenhouse.txt", "inside_link.txt"]
    texts = " ".join(r["text"] for r in query(p.lake, "select text from chunks").to_pylist())
    assert "marzipan" not in texts and "irrigation pumps" in texts
    assert all(
        "marzipan" not in (h["text"] or "")
        for h in p.index.search("retrieval", "vault passphrase marzipan", None, k=10, mode="text")
    )
    assert query(p.lake, "select count(*) as n from sources where path = 'escape.txt'").to_pylist() == [
        {"n": 0}
    ]

    # The same outside file ingested by path, then through its folder: one document.
    outside = write(tmp_path / "inbox" / "frost.txt", "Frost protection fleece goes on below two degrees.\n")
    first = ingest(p, [str(outside)])
    second = ingest(p, [str(tmp_path / "inbox")])
    assert first.new == second.unchanged and len(first.new) == 1
    rows = query(p.lake, "select document_id, path from sources where uri = ?", [str(outside)]).to_pylist()
    assert rows == [{"document_id": first.new[0], "path": "frost.txt"}]
    hits = p.index.search("retrieval", "frost protection fleece", None, k=10, mode="text")
    assert [h["document_id"] for h in hits].count(first.new[0]) == 1


def test_a_file_that_turns_unreadable_leaves_search_but_not_the_history(data_dir):
    root = data_dir / "sources"
    write(root / "report.pdf", simple_pdf([["Tomato yield rose to forty kilograms per square metre."]]))
    write(root / "notes.txt", "Spare keys hang in the potting shed.\n")
    p, first = _ingest(data_dir)
    assert len(first.new) == 2 and not first.failed
    doc = next(d for d, path in first.paths.items() if path == "report.pdf")
    served = p.settings.default_profile
    assert p.index.count(served, doc) > 0

    write(root / "report.pdf", b"%PDF-1.7\n" + os.urandom(4000))  # overwritten with corrupt bytes
    second = ingest(p)
    stages = {e["stage"]: e["reason"] for e in second.failed[doc]}
    assert "pages" in stages and f"chunk_map/{served}" in stages
    assert stages[f"chunk_map/{served}"].startswith("withdrawn from search")
    assert p.index.count(served, doc) == 0
    assert not p.index.search(served, "tomato yield kilograms", None, k=10, mode="text")
    for profile in p.settings.profiles:
        assert query(p.lake, "select count(*) as n from chunks where document_id = ?", [doc]).to_pylist() == [
            {"n": 0}
        ], profile.name
    history = p.lake.read(
        "history/chunks",
        served,
        doc,
        *[f.rsplit("/", 1)[-1][: -len(".parquet")] for f in p.lake.files(f"history/chunks/{served}/{doc}")][
            :1
        ],
    )
    assert history is not None and "forty kilograms" in " ".join(history.column("text").to_pylist())
    errors = query(p.lake, "select stage, reason from errors where document_id = ?", [doc]).to_pylist()
    assert any(e["reason"].startswith("withdrawn from search") for e in errors)
    assert p.index.count(served) == p.index.count(served, next(d for d in first.paths if d != doc))

    write(root / "report.pdf", simple_pdf([["Tomato yield rose to forty kilograms per square metre."]]))
    third = ingest(p)
    assert doc in third.new and not third.failed and p.index.count(served, doc) > 0


def test_a_source_that_cannot_be_read_for_now_keeps_its_rows_and_is_retried(data_dir, monkeypatch):
    from ingest_pipeline.storage import object_store

    root = data_dir / "sources"
    write(root / "report.pdf", simple_pdf([["Tomato yield rose to forty kilograms per square metre."]]))
    p, first = _ingest(data_dir)
    doc = next(iter(first.paths))
    served = p.settings.default_profile
    rows = p.index.count(served, doc)
    assert rows > 0

    real_stat = object_store.stat

    def timing_out(path):  # the bucket or share the file lives on does not answer
        raise TimeoutError("read timed out")

    write(root / "report.pdf", simple_pdf([["Tomato yield rose to fifty kilograms per square metre."]]))
    monkeypatch.setattr(object_store, "stat", timing_out)
    second = ingest(p)  # the new bytes cannot be observed yet: the old ones stay served
    (failure,) = second.failed[doc]
    assert failure["stage"] == "sources" and "next run tries again" in failure["reason"]
    assert p.index.count(served, doc) == rows  # still served, not withdrawn
    assert "forty" in " ".join(
        h["text"] for h in p.index.search(served, "tomato yield", None, k=5, mode="text")
    )
    assert query(p.lake, "select count(*) as n from sources where document_id = ?", [doc]).to_pylist() == [
        {"n": 1}
    ]
    assert query(p.lake, "select error from errors where document_id = ?", [doc]).to_pylist() == [
        {"error": "SourceUnavailable"}
    ]

    monkeypatch.setattr(object_store, "stat", real_stat)
    third = ingest(p)  # the failed observation is retried and the new bytes served
    assert not third.failed and doc in third.changed
    assert query(p.lake, "select count(*) as n from errors where document_id = ?", [doc]).to_pylist() == [
        {"n": 0}
    ]
    assert "fifty" in " ".join(
        h["text"] for h in p.index.search(served, "tomato yield", None, k=5, mode="text")
    )
