"""A profile's embedder, through real ingests: a third-party embedder found by its entry
point serves a profile; switching it re-embeds only that profile and switching back embeds
nothing; a table built with one embedder is refused to a query of another; a dead
OpenAI-compatible endpoint leaves errors rows and an untouched table, and the next run
completes."""

from __future__ import annotations

from ingest_pipeline.commands.cli import main as cli
from ingest_pipeline.commands.ingest import ingest
from ingest_pipeline.embedding.minilm import MiniLMEmbedder
from ingest_pipeline.resources import parts_for
from ingest_pipeline.settings import CONFIG_FILE
from ingest_pipeline.storage.catalog import query
from ingest_pipeline_tests.conftest import CORPUS, requires_corpus
from ingest_pipeline_tests.embedding.test_embedders import install_hashing_embedder
from ingest_pipeline_tests.embedding_server import EmbeddingServer

TWO_PROFILES = """
[profiles.other]
chunkers = ["page@1"]
indexed = true
"""


def configure(data_dir, text: str) -> None:
    (data_dir / CONFIG_FILE).write_text(text)


def embedded_texts(parts, profile: str) -> dict[str, int]:
    """Per document: the texts its embeddings file says were embedded in the run that wrote it."""
    return {
        doc: (parts.store.embeddings_meta(profile, doc) or {}).get("summary", {}).get("embedded", 0)
        for doc in parts.store.inventory()
    }


def fingerprints(parts, profile: str) -> dict[str, str]:
    return {
        doc: (parts.store.embeddings_meta(profile, doc) or {}).get("fingerprint")
        for doc in parts.store.inventory()
    }


def code_versions(data_dir) -> dict[str, str]:
    """Each asset's code version in the graph a code location of this root would load."""
    from ingest_pipeline.definitions import build_definitions

    parts = parts_for(str(data_dir))
    defs = build_definitions(parts.settings, parts.resources)
    return {spec.key.to_user_string(): spec.code_version for spec in defs.resolve_all_asset_specs()}


def test_a_profile_switches_to_a_third_party_embedder_and_back(
    data_dir, sample_sources, tmp_path, monkeypatch
):
    install_hashing_embedder(tmp_path, monkeypatch)
    configure(data_dir, TWO_PROFILES)
    first = ingest(parts_for(str(data_dir)))
    assert not first.failed
    parts = parts_for(str(data_dir))
    served_before, other_before = fingerprints(parts, "retrieval"), fingerprints(parts, "other")
    assert parts.index.model_of("other")["model_id"] == default_model_id()
    graph_before = code_versions(data_dir)

    configure(
        data_dir, TWO_PROFILES + 'embedder = "hashing@1"\n[profiles.other.embedder_settings]\ndim = 48\n'
    )
    graph = code_versions(data_dir)
    changed = sorted(k for k in graph if graph[k] != graph_before.get(k))
    assert changed == ["chunk_map_other", "embeddings_other", "lancedb_other"]  # the graph shows it
    switched = ingest(parts_for(str(data_dir)))
    parts = parts_for(str(data_dir))
    assert not switched.failed
    assert fingerprints(parts, "retrieval") == served_before  # the served profile is untouched
    assert switched.texts_embedded == 0
    after = fingerprints(parts, "other")
    assert all(after[d] != other_before[d] for d in after if other_before[d])
    assert sum(embedded_texts(parts, "other").values()) > 0
    recorded = parts.index.model_of("other")
    assert recorded["model_id"] == "hashing_v1_48" and recorded["dim"] == 48
    assert recorded["identity"] == {"ref": "hashing@1", "dim": 48}
    models = query(parts.lake, "select distinct model from embeddings where profile = 'other'").to_pylist()
    assert models == [{"model": "hashing_v1_48"}]  # every vector's lineage names its embedder
    hits = parts.index.search("other", "greenhouse", [0.1] * 48, k=3, mode="hybrid", model_id="hashing_v1_48")
    assert hits

    model = parts.embedder.for_profile("retrieval")  # the default embedder, as this process made it
    calls = model.usage()["calls"]
    configure(data_dir, TWO_PROFILES)
    back = ingest(parts_for(str(data_dir)))
    parts = parts_for(str(data_dir))
    assert not back.failed
    assert parts.embedder.for_profile("other") is model
    assert model.usage()["calls"] == calls  # the cache kept the default embedder's vectors
    assert sum(embedded_texts(parts, "other").values()) == 0
    assert fingerprints(parts, "other") == other_before
    assert parts.index.model_of("other")["model_id"] == default_model_id()


def default_model_id() -> str:
    """The model id of the embedder a profile that names none uses."""
    from ingest_pipeline.embedding.registry import Runtime, installed
    from ingest_pipeline.settings import DEFAULT_EMBEDDER, Settings

    return (
        installed()
        .make(DEFAULT_EMBEDDER, {}, Runtime(models_dir=Settings(data="unused").models_dir))
        .model_id
    )


def test_search_refuses_a_table_built_with_another_embedder(
    data_dir, sample_sources, tmp_path, monkeypatch, capsys
):
    install_hashing_embedder(tmp_path, monkeypatch)
    assert not ingest(parts_for(str(data_dir))).failed
    assert cli(["--data", str(data_dir), "search", "greenhouse", "--json"]) == 0
    configure(data_dir, '[profiles.retrieval]\nembedder = "hashing@1"\n')
    capsys.readouterr()
    assert cli(["--data", str(data_dir), "search", "greenhouse"]) == 2
    err = capsys.readouterr().err
    assert f"chunks_retrieval was built with embedder {default_model_id()}" in err
    assert "hashing_v1_64" in err and "ingest" in err
    assert cli(["--data", str(data_dir), "search", "greenhouse", "--mode", "text"]) == 0  # no vectors asked


def test_a_dead_endpoint_leaves_errors_rows_and_an_untouched_table_and_the_next_run_completes(
    data_dir, sample_sources, monkeypatch
):
    server = EmbeddingServer()
    endpoint = (
        '[profiles.retrieval]\nembedder = "openai@1"\n[profiles.retrieval.embedder_settings]\n'
        'base_url = "{url}"\nmodel = "minilm-served"\nretries = 1\nbackoff = 0.01\ntimeout = 5\n'
        f'tokenizer = "{MiniLMEmbedder.tokenizer_path()}"\nmax_tokens = 256\n'
    )
    configure(data_dir, endpoint.format(url=server.base_url))
    try:
        assert not ingest(parts_for(str(data_dir))).failed
    finally:
        server.stop()
    parts = parts_for(str(data_dir))
    rows_before = parts.index.counts("retrieval")
    version_before = parts.index.open("retrieval").version
    (sample_sources / "late.md").write_text(
        "# Late\n\nA note written after the first ingest, about valves.\n"
    )
    (sample_sources / "greenhouse.txt").write_text("The greenhouse log, rewritten.\n" * 5)

    down = ingest(parts_for(str(data_dir)))  # the server is gone: nobody listens at its port
    parts = parts_for(str(data_dir))
    assert len(down.failed) == 2
    stages = {e["stage"] for errs in down.failed.values() for e in errs}
    assert stages == {"embeddings/retrieval"}
    assert all("did not answer after 2 tries" in e["reason"] for errs in down.failed.values() for e in errs)
    assert parts.index.counts("retrieval") == rows_before  # nothing half-written
    assert parts.index.open("retrieval").version == version_before
    errors = query(parts.lake, "select stage from errors").to_pylist()
    assert sorted(r["stage"] for r in errors) == ["embeddings/retrieval"] * 2

    again = EmbeddingServer()
    try:
        configure(data_dir, endpoint.format(url=again.base_url))  # the same model, served elsewhere
        back = ingest(parts_for(str(data_dir)))
    finally:
        again.stop()
    assert not back.failed, back.failed
    parts = parts_for(str(data_dir))
    assert query(parts.lake, "select count(*) as n from errors").to_pylist() == [{"n": 0}]
    assert sum(parts.index.counts("retrieval").values()) > sum(rows_before.values())
    assert again.requests  # the new server answered the run


@requires_corpus
def test_an_embedder_that_takes_images_puts_picture_chunks_into_the_same_space(data_dir):
    """A scanned page read with OCR off is one rendered picture chunk. With an endpoint that
    takes images (``images = true``), it gets a vector in the profile's space, so a query
    for the words in the picture finds it by vector alone; with the same endpoint not set
    to take images, it is indexed without one, as before."""
    import shutil

    import lancedb

    from ingest_pipeline.retrieval.search import Request, Searcher

    scans = data_dir / "sources" / "scans"
    scans.mkdir()
    shutil.copy(CORPUS / "files" / "pdf" / "docling__ocr_test.pdf", scans / "brochure.pdf")
    (data_dir / "sources" / "orchard.md").write_text("# Orchard\n\nApple trees were pruned in March.\n")
    server = EmbeddingServer()
    endpoint = (
        '[[routes]]\nname = "scans"\nwhen = { path = "scans/" }\nocr = false\n\n[[routes]]\nname = "rest"\n\n'
        '[profiles.retrieval]\nembedder = "openai@1"\n[profiles.retrieval.embedder_settings]\n'
        'base_url = "{url}"\nmodel = "minilm-served"\nmax_tokens = 256\n'
        f'tokenizer = "{MiniLMEmbedder.tokenizer_path()}"\n'
    )
    try:
        for images in (False, True):
            settings = endpoint.replace("{url}", server.base_url) + f"images = {str(images).lower()}\n"
            configure(data_dir, settings)
            report = ingest(parts_for(str(data_dir)))
            assert not report.failed, report.failed
            table = lancedb.connect(str(data_dir / "lancedb")).open_table("chunks_retrieval").to_arrow()
            rows = [r for r in table.to_pylist() if r["modality"] == "image"]
            assert len(rows) == 1 and rows[0]["path"] == "scans/brochure.pdf"
            assert (rows[0]["vector"] is not None) is images
        parts = parts_for(str(data_dir))
        query = "PDF conversion to JSON and Markdown in a self contained package"
        result = Searcher(parts).search(Request(query=query, k=2, mode="vector", group="none"))
        assert result.hits[0]["document_id"] == rows[0]["document_id"]
        assert sum(r["images"] for r in server.requests) == 1  # the picture, asked once
    finally:
        server.stop()


def _long_report() -> bytes:
    """Two pages of one section each, every paragraph two long lines."""
    from ingest_pipeline_tests.pdf_writer import PdfWriter

    w = PdfWriter()
    for title in ("Liquidity and Capital Resources", "Results of Operations"):
        page = w.page()
        page.text(72, 740, title, 16)
        for i in range(50):
            page.text(72, 720 - 12 * i, f"Net sales grew in every segment while costs of goods fell {i}", 9)
    return w.to_bytes()


def _pdf_passages(parts, profile: str) -> dict:
    """pdf@4's passages in a profile, by whatever name the version is cut under there."""
    (row,) = query(
        parts.lake,
        "select max(tokens) as most, count(*) as n, min(config_hash) as h, count(distinct "
        "config_hash) as hashes, min(chunker) as chunker from chunks where profile = "
        f"'{profile}' and (chunker = 'pdf@4' or chunker like 'pdf\\_%@4' escape '\\')",
    ).to_pylist()
    return row


def test_pdf_passages_are_cut_for_the_profile_s_embedder(data_dir, tmp_path, capsys):
    """A profile whose model reads 512 tokens gets pdf@4 passages sized for 512, cut by the
    version registered for that sizing, with a config hash whose stated values say so; a
    second profile on the bundled model using pdf@4 gets MiniLM's passages under pdf@4's own
    name and hash, and the first profile's chunks do not change."""
    import json
    import shutil

    (data_dir / "sources" / "report.pdf").write_bytes(_long_report())
    folder = tmp_path / "wide-minilm"  # the bundled graph reads up to 512 positions
    folder.mkdir()
    shutil.copy(MiniLMEmbedder.model_path(), folder / "model.onnx")
    shutil.copy(MiniLMEmbedder.tokenizer_path(), folder / "tokenizer.json")
    assert not ingest(parts_for(str(data_dir))).failed
    bundled = _pdf_passages(parts_for(str(data_dir)), "retrieval")
    assert bundled["most"] <= 224 and bundled["chunker"] == "pdf@4"

    wide = (
        '[profiles.retrieval]\nembedder = "onnx@1"\n[profiles.retrieval.embedder_settings]\n'
        f'path = "{folder}"\nmax_tokens = 512\n'
    )
    configure(data_dir, wide)
    assert not ingest(parts_for(str(data_dir))).failed
    parts = parts_for(str(data_dir))
    sized = _pdf_passages(parts, "retrieval")
    variant = sized["chunker"]
    assert variant.startswith("pdf_512_") and variant.endswith("@4") and sized["hashes"] == 1
    assert 256 < sized["most"] <= 480 and sized["n"] < bundled["n"] and sized["h"] != bundled["h"]
    (stated,) = query(
        parts.lake, f"select config from configs where config_hash = '{sized['h']}'"
    ).to_pylist()
    sizing = json.loads(stated["config"])["config"]["environment"]["sizing"]
    assert (sizing["limit"], sizing["target_tokens"], sizing["max_tokens"]) == (512, 320, 480)
    assert parts.index.model_of("retrieval")["identity"]["max_tokens"] == 512
    capsys.readouterr()
    assert cli(["--data", str(data_dir), "chunkers", "--json"]) == 0
    listed = {c["chunker"]: c["config_hash"] for c in json.loads(capsys.readouterr().out)}
    assert listed[variant] == sized["h"] and listed["pdf@4"] == bundled["h"]
    assert cli(["--data", str(data_dir), "embedders", "--json"]) == 0
    rows = {r["profile"]: r for r in json.loads(capsys.readouterr().out)["profiles"]}
    assert rows["retrieval"]["passages_sized_for"] == {variant: 512}

    configure(data_dir, wide + '[profiles.small]\nchunkers = ["pdf@4"]\n')
    assert not ingest(parts_for(str(data_dir))).failed
    parts = parts_for(str(data_dir))
    assert _pdf_passages(parts, "retrieval") == sized  # another profile changes nothing here
    small = _pdf_passages(parts, "small")
    assert (small["chunker"], small["h"], small["hashes"], small["n"]) == (
        "pdf@4",
        bundled["h"],
        1,
        bundled["n"],
    )
    capsys.readouterr()
    assert cli(["--data", str(data_dir), "embedders", "--json"]) == 0
    rows = {r["profile"]: r for r in json.loads(capsys.readouterr().out)["profiles"]}
    assert rows["retrieval"]["max_tokens"] == 512
    assert rows["retrieval"]["passages_sized_for"] == {variant: 512}
    assert rows["small"]["passages_sized_for"] == {"pdf@4": 256}
    assert rows["default"]["passages_sized_for"] == {}  # pdf@4 is opt-in: not in its order
