"""Shared fixtures: a storage root per test and documents the tests write themselves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ingest_pipeline.samples import simple_pdf, write_samples

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
# INGEST_TEST_CORPUS points the tests at another copy (test_conftest.py points it nowhere).
CORPUS = Path(os.environ.get("INGEST_TEST_CORPUS") or SHARED / "corpus")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "sources").mkdir(parents=True)
    return root


@pytest.fixture
def sample_sources(data_dir: Path) -> Path:
    write_samples(str(data_dir / "sources"))
    return data_dir / "sources"


@pytest.fixture(scope="session")
def embedder():
    from ingest_pipeline.embedding.minilm import default_embedder

    return default_embedder()


def pdf_bytes(pages: list[list[str]]) -> bytes:
    return simple_pdf(pages)


def write(path: Path, content: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


def corpus_available() -> bool:
    return (CORPUS / "files").is_dir()


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def _corpus_must_exist() -> None:
    """Session-scoped so it runs before any module fixture that reads the corpus."""
    if not corpus_available():
        pytest.fail(
            f"../shared/corpus is not present at {CORPUS}, and CI is set: the corpus tests "
            "cannot run, and in CI that is a failure, not a skip",
            pytrace=False,
        )


def _requires_corpus_mark():
    """On ../shared/corpus: marked ``corpus``; without it, skipped on a workstation and
    failed loudly in CI (``CI=true``)."""
    if corpus_available():
        return pytest.mark.corpus
    if in_ci():
        return pytest.mark.usefixtures("_corpus_must_exist")
    return pytest.mark.skip(reason="../shared/corpus is not present (in CI this fails)")


requires_corpus = _requires_corpus_mark()


def pytest_addoption(parser):
    parser.addoption(
        "--regenerate-golden",
        action="store_true",
        default=False,
        help="rewrite ingest_pipeline_tests/golden/ from the chunkers' current output",
    )


@pytest.fixture(scope="session")
def regenerate_golden(request) -> bool:
    from ingest_pipeline_tests.golden import REGENERATE_ENV

    return bool(request.config.getoption("--regenerate-golden")) or os.environ.get(REGENERATE_ENV) == "1"


def corpus_passwords() -> dict[str, str]:
    """The passwords FACTS.tsv lists, keyed by file name as a storage root's passwords.toml would be."""
    import csv
    import json

    out = {}
    with open(CORPUS / "FACTS.tsv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            password = json.loads(row["facts_json"]).get("password")
            if password is not None:
                out[row["relpath"].rsplit("/", 1)[-1]] = str(password)
    return out


@pytest.fixture(scope="session")
def corpus_documents():
    """relpath -> (bytes, media type, password, pages or None) for every corpus file, each
    read once per session by the real readers with their default settings (OCR on at its
    default resolution, whatever the environment says); pages is None for a file the
    readers refuse."""
    from ingest_pipeline import media_types
    from ingest_pipeline.readers import read_pages
    from ingest_pipeline.readers.base import ReadOptions, password_for
    from ingest_pipeline.readers.ocr import DEFAULT_OCR_DPI

    passwords = corpus_passwords()
    out = {}
    for path in sorted(p for p in (CORPUS / "files").rglob("*") if p.is_file()):
        relpath = str(path.relative_to(CORPUS))
        content = path.read_bytes()
        media = media_types.detect(content, relpath)
        password = password_for(relpath, passwords)
        try:
            pages = read_pages(
                content,
                media,
                ReadOptions(name=relpath, password=password, ocr=True, ocr_dpi=DEFAULT_OCR_DPI),
            )
        except Exception:  # noqa: BLE001 - a file the readers refuse has no pages to chunk
            pages = None
        out[relpath] = (content, media, password, pages)
    return out


os.environ.setdefault("INGEST_CHUNK_DPI", "120")
