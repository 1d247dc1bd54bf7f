"""Small chunkers the tests define to exercise the registry and the merge."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

from ingest_pipeline.chunkers.base import BaseChunker, ChunkerConfig
from ingest_pipeline.contract import ChunkPiece, PageChunks


class FixedChunker(BaseChunker):
    """Answers the pages in ``answers`` (page -> texts), in construction order."""

    id = "fixed"
    version = 1

    def __init__(self, answers=None, cid="fixed", version=1, opt_in=False, builtin=False, fallback=False):
        super().__init__()
        self.answers = answers or {}
        self.id, self.version = cid, version
        self.opt_in, self.builtin, self.fallback = opt_in, builtin, fallback
        self.calls = 0

    def chunk(self, content, media_type, pages):
        self.calls += 1
        return tuple(
            PageChunks(
                page=p,
                pieces=tuple(
                    ChunkPiece(image=t, bbox=(0, 0, 1, 1))
                    if isinstance(t, bytes)
                    else ChunkPiece(text=t, bbox_reason="no_geometry")
                    for t in texts
                ),
            )
            for p, texts in self.answers.items()
        )


class RaisingChunker(BaseChunker):
    """Raises ``error_type(message)`` on every document it is asked about."""

    id = "broken"
    version = 3
    error_type: type[Exception] = RuntimeError
    message = "cannot parse this"

    def chunk(self, content, media_type, pages):
        raise self.error_type(self.message)


class SizedConfig(ChunkerConfig):
    size: int = 100
    label: str = "x"


class SizedChunker(BaseChunker):
    """Cuts each read page into pieces of ``size`` characters."""

    id = "sized"
    version = 1
    summary = "fixed-size slices of the page text"
    Config = SizedConfig

    def chunk(self, content, media_type, pages):
        out = []
        for page in pages:
            if page.status != "read" or not page.text:
                continue
            text = page.text
            pieces = tuple(
                ChunkPiece(text=text[i : i + self.config.size], bbox_reason="no_geometry")
                for i in range(0, len(text), self.config.size)
            )
            out.append(PageChunks(page=page.page, pieces=pieces))
        return tuple(out)


def install_distribution(
    root: Path,
    name: str,
    module_source: str,
    entry_points: dict[str, str],
    group: str = "ingest_pipeline.chunkers",
) -> Path:
    """Install a tiny distribution the way pip lays it out (a module plus a .dist-info
    with entry_points.txt) under ``root``; the caller puts ``root`` on sys.path."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{name}.py").write_text(textwrap.dedent(module_source))
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}\n")
    importlib.invalidate_caches()
    sys.modules.pop(name, None)
    return root


THIRD_PARTY_SOURCE = '''
from ingest_pipeline.contract import ChunkPiece, PageChunks


class ShoutChunker:
    """A third-party chunker that knows nothing of the project's base class."""

    id = "shout"
    version = 1
    summary = "the page text in capitals"

    def chunk(self, content, media_type, pages):
        return tuple(PageChunks(page=p.page,
                                pieces=(ChunkPiece(text=p.text.upper(), bbox_reason="no_geometry"),))
                     for p in pages if p.status == "read")
'''
