"""What a page reader is, and the options a read takes."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ingest_pipeline.contract import PageOutput


@dataclass(frozen=True)
class ReadOptions:
    """Per-document options; ``password`` is never logged or stored. ``ocr`` and
    ``ocr_dpi`` are the OCR settings the caller stated (None: from the environment), so a
    worker process reads with the settings its caller hashed."""

    name: str = ""
    password: str | None = field(default=None, repr=False)
    ocr: bool | None = None
    ocr_dpi: float | None = None


class PageReader(Protocol):
    id: str
    version: int
    media_types: frozenset[str]

    def read(self, content: bytes, media_type: str, options: ReadOptions) -> tuple[PageOutput, ...]: ...


def password_for(name: str, passwords: Mapping[str, str]) -> str | None:
    """The password whose key (a file name, a relative path or a glob) matches ``name``."""
    base = name.rsplit("/", 1)[-1]
    for pattern, password in passwords.items():
        if pattern in (name, base) or fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(base, pattern):
            return password
    return None
