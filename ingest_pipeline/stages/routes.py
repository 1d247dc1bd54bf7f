"""What a document's route (``[[routes]]``, ``ingest_pipeline.routing``) means for the
stages after ``sources``: which profiles cut it, with which chunker versions, and the skip
a stage reports for a document its route does not send there."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ingest_pipeline.registry import ChunkerRegistry
from ingest_pipeline.routing import Route
from ingest_pipeline.settings import Profile, Settings
from ingest_pipeline.stages.common import UpstreamMissing


class NotRouted(UpstreamMissing):
    """The document's route does not send it through this stage: a skip, not a failure."""


def cut_profile(settings: Settings, route: Route, profile: Profile) -> Profile:
    """``profile`` as it cuts a document of ``route``: the served profile takes the chunker
    versions and options of the profile the route serves the document as (``serve``)."""
    named = route.cut_as(profile.name, settings.default_profile)
    if named == profile.name:
        return profile
    cut = settings.profile(named)
    return replace(
        profile,
        chunkers=cut.chunkers,
        split_oversized=cut.split_oversized,
        document_context=cut.document_context,
    )


def routed_profile(settings: Settings, route: Route, profile: Profile) -> Profile:
    """The profile to cut a document of ``route`` with, or NotRouted when the route keeps
    the document out of it."""
    if not route.goes_through(profile.name, settings.default_profile):
        served = profile.name == settings.default_profile
        where = "the served index" if served else f"profile '{profile.name}'"
        raise NotRouted(f"route '{route.name}' does not send it to {where}")
    return cut_profile(settings, route, profile)


def chunker_refs(settings: Settings, registry: ChunkerRegistry, route: Route) -> set[str]:
    """The chunker versions that cut a document of ``route`` in some profile."""
    refs: set[str] = set()
    for profile in settings.profiles:
        if route.goes_through(profile.name, settings.default_profile):
            cut = cut_profile(settings, route, profile)
            refs |= {registry.info(c).ref for c in registry.order_for(cut.chunkers, cut.name)}
    return refs


def check_chunker_routed(
    settings: Settings, registry: ChunkerRegistry, source: dict[str, Any], ref: str
) -> None:
    """NotRouted when the document's route sends it through no profile that uses the
    chunker version ``ref`` (a version no profile uses, asked on demand, is always asked)."""
    if not settings.routes.configured:
        return
    used = {registry.info(c).ref for p in settings.profiles for c in registry.order_for(p.chunkers, p.name)}
    route = settings.route_of(source)
    if ref in used and ref not in chunker_refs(settings, registry, route):
        raise NotRouted(f"route '{route.name}' sends it through no profile that uses {ref}")


def served_as(settings: Settings) -> list[Profile]:
    """The profiles the routes serve documents as, besides the served profile's own."""
    named = {r.serve for r in settings.routes.routes if r.serve} - {settings.default_profile}
    return [settings.profile(n) for n in sorted(named)]
