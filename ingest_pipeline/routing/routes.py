"""Routes: an ordered list in ``ingest_pipeline.toml``; the first whose filter matches a
document decides how it is treated, a route without ``when`` catches the rest::

    [[routes]]
    name = "contracts"
    when = { path = "contracts/" }
    serve = "layout"          # the served index holds them as profile 'layout' cuts them
    profiles = []             # and no other profile reads them
    parse_timeout = 600

    [[routes]]
    name = "scans"
    when = { path = "scans/", media_type = "application/pdf" }
    ocr_dpi = 300

    [[routes]]
    name = "drafts"
    when = { path = "drafts/" }
    serve = false             # cut and kept in the lake, never searched

    [[routes]]
    name = "default"          # no `when`: every other document

A route sets three things. *Where it goes*: ``serve`` (absent: the served profile cuts it
with its own chunkers; a profile's name: the served index holds it as that profile's
chunkers cut it; ``false``: it stays out of the served index) and ``profiles`` (the other
profiles it goes through; absent: all of them). *How it is read*: ``ocr``, ``ocr_dpi``,
``password_file`` (a file under the storage root whose first line is the password). *Its
limits*: ``parse_timeout`` (seconds), ``parse_memory_mib`` and ``max_mib`` (its size
ceiling, in place of ``[limits.max_mib]``). ``skip = true`` turns the documents it matches
away. A document no route accepts is skipped with that reason, not failed (SPEC E12); a
root without routes has one route, ``default``, that changes nothing.

Only what a route changes for a document's output enters that output's fingerprint (the
reader settings its pages, the chunkers it is cut with its chunk map), so editing a route
recomputes exactly the documents whose output it changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ingest_pipeline.routing.filters import Facts, Match, parse_match

MiB = 1024 * 1024
_KEYS = {
    "name",
    "when",
    "serve",
    "profiles",
    "skip",
    "ocr",
    "ocr_dpi",
    "password_file",
    "parse_timeout",
    "parse_memory_mib",
    "max_mib",
}


class RoutingError(ValueError):
    """A ``[[routes]]`` entry that cannot be used as written."""


@dataclass(frozen=True)
class Route:
    name: str
    when: Match | None = None  # None: every document
    serve: str | None = None  # the profile whose chunkers cut it for the served index
    served: bool = True
    profiles: tuple[str, ...] | None = None  # the other profiles it goes through; None: all
    skip: bool = False
    ocr: bool | None = None
    ocr_dpi: int | None = None
    password_file: str | None = None
    parse_timeout: float | None = None
    parse_memory_mib: int | None = None
    max_mib: float | None = None

    def accepts(self, facts: Facts) -> bool:
        return self.when is None or self.when.matches(facts)

    def goes_through(self, profile: str, served_profile: str) -> bool:
        """Whether the document is cut by ``profile`` (the served one when it is served)."""
        if profile == served_profile:
            return self.served
        return self.profiles is None or profile in self.profiles

    def cut_as(self, profile: str, served_profile: str) -> str:
        """The profile whose chunkers cut the document for ``profile``'s chunk map."""
        return self.serve if profile == served_profile and self.serve else profile

    def reader_settings(self) -> dict[str, Any]:
        """The reader settings the route states (the rest keep their defaults)."""
        stated = {"ocr": self.ocr, "ocr_dpi": self.ocr_dpi}
        return {k: v for k, v in stated.items() if v is not None}

    def described(self) -> dict[str, Any]:
        """The route as written: what ``inspect`` shows and the ``configs`` table keeps."""
        out: dict[str, Any] = {"name": self.name, "when": self.when.describe() if self.when else None}
        if not self.served or self.serve:
            out["serve"] = self.serve if self.served else False
        for key in ("profiles", "skip", "ocr", "ocr_dpi", "password_file", "parse_timeout"):
            value = getattr(self, key)
            if value is not None and not (key == "skip" and not value):
                out[key] = list(value) if isinstance(value, tuple) else value
        for key in ("parse_memory_mib", "max_mib"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


DEFAULT_ROUTE = Route("default")


@dataclass(frozen=True)
class Routes:
    """The routes in order; ``configured`` False: the root states none, and every document
    takes ``DEFAULT_ROUTE``."""

    routes: tuple[Route, ...] = ()
    configured: bool = False

    def route_for(self, facts: Facts) -> Route | None:
        """The first route whose filter matches, or None when none does."""
        if not self.configured:
            return DEFAULT_ROUTE
        return next((r for r in self.routes if r.accepts(facts)), None)

    def turned_away(self, facts: Facts) -> str | None:
        """Why the routes skip a document (None when one takes it)."""
        return self.refusal(self.route_for(facts))

    def refusal(self, route: Route | None) -> str | None:
        """Why the route a document found (None: none took it) turns it away, if it does."""
        if route is None:
            names = ", ".join(r.name for r in self.routes)
            return f"no route accepts it (routes: {names}; a route without `when` catches the rest)"
        if route.skip:
            return f"route '{route.name}' skips it"
        return None

    def named(self, name: str | None) -> Route:
        """The route of that name (the default route for None or a name no longer there)."""
        return next((r for r in self.routes if r.name == name), DEFAULT_ROUTE)


def parse_routes(entries: Any, profiles: Sequence[str], served_profile: str) -> Routes:
    """``[[routes]]`` as read from TOML, checked against the root's profiles."""
    if entries is None:
        return Routes()
    if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
        raise RoutingError("routes must be written as [[routes]] tables")
    routes = tuple(_route(e, i, profiles, served_profile) for i, e in enumerate(entries))
    names = [r.name for r in routes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise RoutingError(f"two routes are named {', '.join(twice)}: route names must differ")
    return Routes(routes, configured=True)


def _route(entry: Mapping[str, Any], index: int, profiles: Sequence[str], served_profile: str) -> Route:
    where = f"[[routes]] #{index + 1}"
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise RoutingError(f'{where} needs a name (name = "…")')
    where = f"route '{name}'"
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise RoutingError(f"{where}: unknown key {', '.join(unknown)} (keys: {', '.join(sorted(_KEYS))})")
    try:
        when = parse_match(entry["when"], f"{where}.when") if "when" in entry else None
    except ValueError as exc:
        raise RoutingError(str(exc)) from None
    serve = entry.get("serve", True)
    if not isinstance(serve, (bool, str)):
        raise RoutingError(f"{where}.serve must be true, false or a profile's name")
    if isinstance(serve, str) and serve not in profiles:
        raise RoutingError(f"{where}.serve names no profile: {serve!r} (profiles: {', '.join(profiles)})")
    listed = entry.get("profiles")
    if listed is not None:
        if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
            raise RoutingError(f"{where}.profiles must be a list of profile names")
        missing = [p for p in listed if p not in profiles]
        if missing:
            raise RoutingError(f"{where}.profiles names no profile: {', '.join(missing)}")
        if serve is False and served_profile in listed:
            raise RoutingError(f"{where} says serve = false and lists the served profile '{served_profile}'")
    return Route(
        name=name.strip(),
        when=when,
        serve=serve if isinstance(serve, str) else None,
        served=serve is not False,
        profiles=None if listed is None else tuple(listed),
        skip=_typed(entry, "skip", bool, where) or False,
        ocr=_typed(entry, "ocr", bool, where),
        ocr_dpi=_positive(entry, "ocr_dpi", where, whole=True),
        password_file=_typed(entry, "password_file", str, where),
        parse_timeout=_positive(entry, "parse_timeout", where),
        parse_memory_mib=_positive(entry, "parse_memory_mib", where, whole=True),
        max_mib=_positive(entry, "max_mib", where),
    )


def _typed(entry: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = entry.get(key)
    if value is not None and not isinstance(value, kind):
        raise RoutingError(f"{where}.{key} must be a {kind.__name__}, not {value!r}")
    return value


def _positive(entry: Mapping[str, Any], key: str, where: str, whole: bool = False) -> Any:
    value = entry.get(key)
    if value is None:
        return None
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or value <= 0:
        raise RoutingError(f"{where}.{key} must be a {'whole ' if whole else ''}number above 0")
    return value
