"""Shared fixtures: a storage root per test and documents the tests write themselves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ingest_pipeline.samples import simple_pdf, write_samples

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CORPUS = SHARED / "corpus"


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
    from ingest_pipeline.embedding import default_embedder

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


requires_corpus = pytest.mark.skipif(not corpus_available(), reason="../shared/corpus is not present")
os.environ.setdefault("INGEST_CHUNK_DPI", "120")
