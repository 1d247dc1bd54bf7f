"""Routes: which documents go through which profiles, read how, within which limits
(``[[routes]]`` in ``ingest_pipeline.toml``). ``filters`` holds what a route matches on,
``routes`` the routes themselves and the first-match rule."""

from ingest_pipeline.routing.filters import Facts, Match, glob_matches, parse_match
from ingest_pipeline.routing.routes import DEFAULT_ROUTE, Route, Routes, RoutingError, parse_routes

__all__ = [
    "DEFAULT_ROUTE",
    "Facts",
    "Match",
    "Route",
    "Routes",
    "RoutingError",
    "glob_matches",
    "parse_match",
    "parse_routes",
]
