"""A base class for chunkers: identity attributes and a pydantic configuration."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from ingest_pipeline.contract import PageChunks, PageOutput


class ChunkerConfig(BaseModel):
    """A chunker's configuration; its JSON form hashes to the chunker's config hash."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class BaseChunker(ABC):
    """Subclasses set ``id``, ``version``, ``summary`` (and ``Config`` if configurable)."""

    id: ClassVar[str]
    version: ClassVar[int]
    summary: ClassVar[str] = ""
    media_types: ClassVar[frozenset[str] | None] = None
    builtin: ClassVar[bool] = False
    fallback: ClassVar[bool] = False
    opt_in: ClassVar[bool] = False
    Config: ClassVar[type[ChunkerConfig]] = ChunkerConfig

    def __init__(self, config: ChunkerConfig | Mapping[str, Any] | None = None) -> None:
        if isinstance(config, ChunkerConfig):
            self.config = self.Config.model_validate(config.model_dump())
        else:
            self.config = self.Config.model_validate(dict(config or {}))

    @abstractmethod
    def chunk(self, content: bytes, media_type: str, pages: tuple[PageOutput, ...]) -> tuple[PageChunks, ...]:
        """Answer for the pages this chunker claims; () disclaims the document."""

    def disclaims(self, media_type: str) -> bool:
        """This chunker's own fast answer, asked before the document's bytes are sent: True
        when it disclaims every document of ``media_type`` unread. By default it says
        nothing, so it is asked about every document: ``media_types`` only advertise."""
        return False

    def environment(self) -> dict[str, Any]:
        """Settings this chunker read from the environment when it was built that change
        its output, only those that differ from their defaults. They are part of its
        stated configuration (and config hash) next to ``config``."""
        return {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}@{self.version}>"


def outside_media_types(chunker: BaseChunker, media_type: str) -> bool:
    """A fast answer for a chunker that never cuts anything outside its ``media_types``
    (the built-ins say so with ``disclaims = outside_media_types``)."""
    return chunker.media_types is not None and media_type not in chunker.media_types
