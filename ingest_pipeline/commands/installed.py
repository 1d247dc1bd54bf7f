"""What is installed: the chunker versions and the embedders (``chunkers``, ``embedders``)."""

from __future__ import annotations

from ingest_pipeline.commands.output import as_json, table


def passages_sized_for(p, profile) -> dict[str, int]:
    """The token limit each token-sized chunker version of a profile cuts its passages for
    (its embedder's), by the name the version has in that profile (a variant cut for another
    embedder than the bundled MiniLM: ``embedding.sizing``)."""
    return {
        f"{c.id}@{c.version}": c.token_sizing.limit
        for c in p.registry.order_for(profile.chunkers, profile.name)
        if callable(getattr(c, "sized_for", None))
    }


def list_embedders(args, p) -> int:
    """The installed embedders, which one each profile uses (its identity, no secret), and
    the limit its token-sized chunkers cut passages for."""
    from ingest_pipeline.embedding.registry import installed

    settings = p.settings
    profiles = []
    for profile in settings.profiles:
        ref, options = settings.embedder_of(profile)
        row = {"profile": profile.name, "embedder": ref, "indexed": settings.is_indexed(profile)}
        try:
            model = p.embedder.for_profile(profile.name)
            row.update(model=model.model_id, max_tokens=model.max_tokens, identity=model.identity())
            row["passages_sized_for"] = passages_sized_for(p, profile)
        except Exception as exc:  # noqa: BLE001 - a profile whose embedder cannot be made says why
            row["error"] = f"{type(exc).__name__}: {exc}"
        profiles.append(row)
    if args.json:
        print(as_json({"installed": installed().describe(), "profiles": profiles}))
        return 0
    print(table(["ref", "summary"], installed().describe(), width=80))
    print()
    shown = [
        {
            **r,
            "model": r.get("model") or r.get("error", ""),
            "passages": ", ".join(f"{c}: {n} tokens" for c, n in (r.get("passages_sized_for") or {}).items()),
        }
        for r in profiles
    ]
    print(table(["profile", "embedder", "model", "passages"], shown, width=80))
    return 0


def list_chunkers(args, p) -> int:
    """The installed chunker versions: default or opt-in, media types, summary, and the config
    hash each has with the storage root's settings (its chunker settings, and the sizing of
    the embedders of the profiles that use it)."""
    registry = p.registry
    rows = [
        {
            "chunker": i.ref,
            "id": i.id,
            "version": i.version,
            "default": i.default,
            "builtin": i.builtin,
            "fallback": i.fallback,
            "media_types": list(i.media_types or ["*"]),
            "summary": i.summary,
            "config_hash": i.config_hash,
        }
        for i in registry.infos()
    ]
    if args.json:
        print(as_json(rows))
    else:
        shown = [
            {
                **r,
                "media_types": ", ".join(r["media_types"]),
                "default": "default" if r["default"] else "opt-in",
            }
            for r in rows
        ]
        print(table(["chunker", "default", "media_types", "summary"], shown, width=70))
    return 0
