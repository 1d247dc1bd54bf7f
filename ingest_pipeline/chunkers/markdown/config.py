"""markdown@1's settings: character limits, heading context and what to leave out."""

from __future__ import annotations

from pydantic import Field, model_validator

from ingest_pipeline.chunkers.base import ChunkerConfig
from ingest_pipeline.chunkers.markdown.sections import DEFAULT_SKIP_HEADINGS


class MarkdownConfig(ChunkerConfig):
    """Character limits, heading context and the sections to leave out (SPEC C43)."""

    max_chars: int = Field(1200, ge=1)
    min_chars: int = Field(80, ge=0)
    target_chars: int = Field(800, ge=1)
    context_depth: int = Field(3, ge=0, le=6)
    merge_short: bool = True
    atomic_types: tuple[str, ...] = ("code", "html", "list", "math", "table")
    skip_headings: tuple[str, ...] = tuple(sorted(DEFAULT_SKIP_HEADINGS))
    skip_pre_heading: bool = False
    fail_on_broken_fence: bool = True
    fail_on_content_loss: bool = False

    @model_validator(mode="after")
    def _ordered_limits(self) -> MarkdownConfig:
        if not self.min_chars <= self.target_chars <= self.max_chars:
            raise ValueError("markdown limits need min_chars <= target_chars <= max_chars")
        return self
