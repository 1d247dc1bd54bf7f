"""The one conversion between a per-document stage's three names: the Dagster asset that runs
it (``chunks/pdf_v1``, ``chunk_map_retrieval``), the stage an ``errors`` row names
(``chunks/pdf@1``, ``chunk_map/retrieval``) and the lake table and partition it writes
(``claims`` under ``pdf_v1``, ``chunks`` under ``retrieval``).

Every other module asks this one, so a new stage or a renamed table changes one mapping.
Asset keys are Dagster's ``AssetKey.from_user_string`` of :attr:`StageName.asset`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Kind -> the lake table it writes (None: it writes no lake table of its own).
TABLE_OF_KIND: dict[str, str | None] = {
    "sources": "sources",
    "pages": "pages",
    "chunks": "claims",
    "chunk_map": "chunks",
    "embeddings": "embeddings",
    "lancedb": "indexed",
    "retrieval_eval": None,
}
# Kinds without a subject: one asset for every document.
_PLAIN = ("sources", "pages")
# Kinds named ``<kind>_<profile>`` as assets, longest first so ``chunk_map_`` is not read
# as something else's prefix.
_PROFILE_KINDS = sorted((k for k in TABLE_OF_KIND if k not in (*_PLAIN, "chunks")), key=len, reverse=True)
_VERSIONED = re.compile(r"^(?P<id>.+)_v(?P<version>\d+)$")


@dataclass(frozen=True)
class StageName:
    """A stage of one kind for one subject: a chunker reference (``pdf@1``) for ``chunks``,
    a profile name for the profile kinds, nothing for ``sources`` and ``pages``."""

    kind: str
    subject: str = ""

    def __post_init__(self) -> None:
        if self.kind not in TABLE_OF_KIND:
            raise ValueError(f"{self.kind!r} is not a stage kind ({', '.join(TABLE_OF_KIND)})")
        if (self.kind in _PLAIN) != (not self.subject):
            raise ValueError(
                f"stage kind {self.kind!r} {'takes no' if self.kind in _PLAIN else 'needs a'} subject"
            )
        if self.kind == "chunks" and "@" not in self.subject:
            raise ValueError(f"a chunks stage names a chunker as id@version, not {self.subject!r}")

    @classmethod
    def of_asset(cls, asset: str) -> StageName | None:
        """The stage an asset (its user string) runs; None for an asset that is no stage."""
        if asset in _PLAIN:
            return cls(asset)
        if asset.startswith("chunks/"):
            found = _VERSIONED.match(asset.split("/", 1)[1])
            return cls("chunks", f"{found['id']}@{found['version']}") if found else None
        for kind in _PROFILE_KINDS:
            if asset.startswith(f"{kind}_"):
                return cls(kind, asset[len(kind) + 1 :])
        return None

    @classmethod
    def of_stage(cls, stage: str) -> StageName | None:
        """The stage an ``errors`` row names; None for a row about no stage (``run``: the
        sensor gave up on a document's run)."""
        kind, _, subject = stage.partition("/")
        try:
            return cls(kind, subject)
        except ValueError:
            return None

    @classmethod
    def chunker(cls, chunker_ref: str) -> StageName:
        return cls("chunks", chunker_ref)

    @property
    def asset(self) -> str:
        """The asset's user string (``AssetKey.from_user_string`` takes it)."""
        if self.kind in _PLAIN:
            return self.kind
        if self.kind == "chunks":
            return f"chunks/{self.chunker_asset_name}"
        return f"{self.kind}_{self.subject}"

    @property
    def stage(self) -> str:
        """The name ``errors`` rows carry."""
        return f"{self.kind}/{self.subject}" if self.subject else self.kind

    @property
    def chunker_asset_name(self) -> str:
        """A chunks stage's chunker as its asset and claims partition name it (``pdf_v1``)."""
        if self.kind != "chunks":
            raise ValueError(f"a {self.kind} stage has no chunker")
        chunker_id, _, version = self.subject.rpartition("@")
        return f"{chunker_id}_v{version}"

    @property
    def is_chunker(self) -> bool:
        """A chunker version's stage: its failures hand pages to the next version, so they
        are warnings of the document, not its failure."""
        return self.kind == "chunks"

    @property
    def table(self) -> str | None:
        """The lake table the stage writes, if any."""
        return TABLE_OF_KIND[self.kind]

    def partition(self, document: str) -> tuple[str, ...]:
        """The table partition holding the stage's output for a document."""
        if self.kind in _PLAIN:
            return (document,)
        if self.kind == "chunks":
            return (self.chunker_asset_name, document)
        return (self.subject, document)
