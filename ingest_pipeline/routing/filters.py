"""What a route matches on: a document's path under the source root (globs), its media type
(detected from its bytes) and its size, combined with ``all``, ``any`` and ``not``.

A filter is written as a TOML table. Its keys are tests that must all hold::

    when = { path = ["contracts/", "legal/*.pdf"], media_type = "application/pdf" }
    when = { any = [{ path = "scans/" }, { media_type = "image/*" }], not = { path = "*/draft*" } }
    when = { larger_than_mib = 5 }

A list under ``path`` or ``media_type`` is any of its globs; ``*`` crosses folders and a
path ending in ``/`` names a folder and everything under it."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MiB = 1024 * 1024
_KEYS = ("path", "media_type", "larger_than_mib", "smaller_than_mib", "all", "any", "not")


def glob_matches(path: str, pattern: str) -> bool:
    """A glob over a document's path ('*' crosses folders); a pattern ending in '/' names a
    folder and matches everything under it."""
    if pattern.endswith("/"):
        return path.startswith(pattern) or f"/{pattern}" in f"/{path}"
    return fnmatch.fnmatchcase(path, pattern)


@dataclass(frozen=True)
class Facts:
    """What a route may look at: the document's path as the summary shows it, its media type
    and its size in bytes."""

    path: str
    media_type: str
    size: int


@dataclass(frozen=True)
class Match:
    """One filter: every test it states must hold (an empty filter matches everything)."""

    paths: tuple[str, ...] = ()
    media_types: tuple[str, ...] = ()
    larger_than: int | None = None
    smaller_than: int | None = None
    all_of: tuple[Match, ...] = ()
    any_of: tuple[Match, ...] = ()
    none_of: Match | None = None

    def matches(self, facts: Facts) -> bool:
        if self.paths and not any(glob_matches(facts.path, g) for g in self.paths):
            return False
        if self.media_types and not any(fnmatch.fnmatchcase(facts.media_type, m) for m in self.media_types):
            return False
        if self.larger_than is not None and facts.size <= self.larger_than:
            return False
        if self.smaller_than is not None and facts.size >= self.smaller_than:
            return False
        if not all(m.matches(facts) for m in self.all_of):
            return False
        if self.any_of and not any(m.matches(facts) for m in self.any_of):
            return False
        return self.none_of is None or not self.none_of.matches(facts)

    def describe(self) -> dict[str, Any]:
        """The filter as it was written (for the ``configs`` values and ``inspect``)."""
        out: dict[str, Any] = {}
        if self.paths:
            out["path"] = list(self.paths)
        if self.media_types:
            out["media_type"] = list(self.media_types)
        if self.larger_than is not None:
            out["larger_than_mib"] = self.larger_than / MiB
        if self.smaller_than is not None:
            out["smaller_than_mib"] = self.smaller_than / MiB
        if self.all_of:
            out["all"] = [m.describe() for m in self.all_of]
        if self.any_of:
            out["any"] = [m.describe() for m in self.any_of]
        if self.none_of is not None:
            out["not"] = self.none_of.describe()
        return out


def parse_match(value: Any, where: str) -> Match:
    """A filter from its TOML table; a ValueError naming ``where`` for anything else."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be a table of tests ({', '.join(_KEYS)}), not {value!r}")
    unknown = sorted(set(value) - set(_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown test {', '.join(unknown)} (tests: {', '.join(_KEYS)})")

    def globs(key: str) -> tuple[str, ...]:
        got = value.get(key) or ()
        got = [got] if isinstance(got, str) else got
        if not all(isinstance(g, str) and g for g in got):
            raise ValueError(f"{where}.{key} must be a glob or a list of globs")
        return tuple(got)

    def size(key: str) -> int | None:
        got = value.get(key)
        if got is None:
            return None
        if isinstance(got, bool) or not isinstance(got, (int, float)) or got < 0:
            raise ValueError(f"{where}.{key} must be a number of MiB, 0 or more")
        return int(got * MiB)

    def many(key: str) -> tuple[Match, ...]:
        got = value.get(key)
        if got is None:
            return ()
        if not isinstance(got, list):
            raise ValueError(f"{where}.{key} must be a list of filters")
        return tuple(parse_match(v, f"{where}.{key}[{i}]") for i, v in enumerate(got))

    return Match(
        paths=globs("path"),
        media_types=globs("media_type"),
        larger_than=size("larger_than_mib"),
        smaller_than=size("smaller_than_mib"),
        all_of=many("all"),
        any_of=many("any"),
        none_of=parse_match(value["not"], f"{where}.not") if "not" in value else None,
    )
