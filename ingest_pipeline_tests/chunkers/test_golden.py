"""Every built-in chunker version's output over the corpus equals its golden file.

A version's output may change only with a new version number or a new configuration
hash: either changes the golden key (``id@version/config_hash``), and then this test asks
for a regenerated golden instead of comparing. Regenerate with
``pytest ingest_pipeline_tests/chunkers/test_golden.py --regenerate-golden`` (or
``INGEST_REGENERATE_GOLDEN=1``), and commit the diff with the version bump.
"""

from __future__ import annotations

import pytest

from ingest_pipeline.readers import reader_ids
from ingest_pipeline.registry import ChunkerRegistry, chunker_config
from ingest_pipeline.stages import chunk_document
from ingest_pipeline_tests import golden
from ingest_pipeline_tests.conftest import requires_corpus

BUILTIN_SOURCE = "= ingest_pipeline.chunkers."


def builtin_versions():
    registry = ChunkerRegistry.discover(reserved_ids=reader_ids())
    return [(registry.info(c), c) for c in registry.all() if BUILTIN_SOURCE in registry.info(c).source]


VERSIONS = builtin_versions()


def claims_of(chunker, corpus) -> dict[str, list]:
    """relpath -> golden records, for every corpus document this version claims."""
    ref = f"{chunker.id}@{chunker.version}"
    media = getattr(chunker, "media_types", None)
    info = ChunkerRegistry().info(chunker)
    out = {}
    for relpath, (content, media_type, password, pages) in corpus.items():
        if pages is None or (media and media_type not in media):
            continue
        try:
            answer, _checks, _metrics = chunk_document(chunker, content, media_type, pages, password)
        except Exception as exc:  # noqa: BLE001 - a raise is part of the output too
            out[relpath] = [{"raised": type(exc).__name__}]
            continue
        if answer:
            out[relpath] = golden.document_record(relpath, ref, info.config_hash, pages, answer)
    return out


def test_every_builtin_version_is_covered():
    refs = {info.ref for info, _ in VERSIONS}
    assert {"page@1", "pdf@1", "pdf@2", "pdf@3", "markdown@1", "xlsx@1", "delimited@1"} <= refs
    stale = {p.stem for p in golden.GOLDEN_DIR.glob("*.json")} - {info.asset_name for info, _ in VERSIONS}
    assert not stale, f"golden files for versions that are not installed: {sorted(stale)}; delete them"


@requires_corpus
@pytest.mark.parametrize("info,chunker", VERSIONS, ids=[info.ref for info, _ in VERSIONS])
def test_output_equals_golden(info, chunker, corpus_documents, regenerate_golden):
    actual = claims_of(chunker, corpus_documents)
    path = golden.golden_path(info)
    if regenerate_golden:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            golden.render(info.ref, info.config_hash, chunker_config(chunker), actual), encoding="utf-8"
        )
        return
    stored = golden.load(path)
    key = f"{info.ref}/{info.config_hash}"
    if stored is None or (stored["chunker"], stored["config_hash"]) != (info.ref, info.config_hash):
        held = f" (the golden file holds {stored['chunker']}/{stored['config_hash']})" if stored else ""
        pytest.fail(
            f"no golden for {key}{held}; regenerate with pytest {__file__} --regenerate-golden "
            f"and commit it with the version bump"
        )
    assert actual, f"{info.ref} claims no corpus document"
    changes = golden.diff(stored["documents"], actual)
    assert not changes, (
        f"{key} output differs from its golden file {path.name} without a new version or config hash:\n"
        f"{changes}\n(give the changed behaviour a new version; regenerate only with the bump)"
    )


def test_a_difference_reads_as_documents_and_piece_lines():
    row = ["page:1/chunk:0", "id0", "aaaa", [0.1, 0.1, 0.2, 0.2], None, None, "line", [], "r"]
    moved = [*row[:3], [0.1, 0.1, 0.3, 0.2], *row[4:]]
    expected = {"a.pdf": [row], "gone.pdf": [row]}
    actual = {"a.pdf": [moved], "new.pdf": [row, row]}
    text = golden.diff(expected, actual)
    assert "- gone.pdf: no longer claimed" in text and "+ new.pdf: newly claimed (2 pieces)" in text
    assert "~ a.pdf: 1 -> 1 pieces" in text
    assert "-" + golden.canonical_json(row) in text and "+" + golden.canonical_json(moved) in text
    assert golden.diff(expected, dict(expected)) == ""
    many = golden.diff({"a.pdf": [row] * 500}, {"a.pdf": [moved] * 500}, limit=40, total=10)
    assert many.count("\n") == 10 and many.endswith("more lines")
