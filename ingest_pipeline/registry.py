"""The chunker registry: discovery through one entry-point group, refusals and order."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from ingest_pipeline.contract import Chunker
from ingest_pipeline.identity import config_hash
from ingest_pipeline.storage.stage_names import StageName

ENTRY_POINT_GROUP = "ingest_pipeline.chunkers"
_ID_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
_REF_PATTERN = re.compile(r"^([a-z][a-z0-9_]*)@([0-9]+)$")


class RegistryError(ValueError):
    """A chunker the registry refuses, or a profile naming an unknown version."""


def chunker_ref(chunker: Any) -> str:
    return f"{chunker.id}@{chunker.version}"


def parse_ref(ref: str) -> tuple[str, int]:
    match = _REF_PATTERN.match(ref.strip())
    if not match:
        raise RegistryError(f"a chunker version is written id@version (e.g. pdf@1), got {ref!r}")
    return match.group(1), int(match.group(2))


def chunker_config(chunker: Any) -> dict[str, Any]:
    config = getattr(chunker, "config", None)
    if config is None:
        return {}
    dump = getattr(config, "model_dump", None)
    return dump(mode="json") if dump else dict(config)


def chunker_environment(chunker: Any) -> dict[str, Any]:
    """The non-default settings a chunker took from the environment (``environment()``)."""
    stated = getattr(chunker, "environment", None)
    return dict(stated() or {}) if callable(stated) else {}


def stated_config(chunker: Any) -> dict[str, Any]:
    """What a chunker's config hash covers: its configuration and, when it read any
    non-default setting from the environment, those settings too."""
    config = chunker_config(chunker)
    environment = chunker_environment(chunker)
    return {**config, "environment": environment} if environment else config


def reconfigured(chunker: Any, config: Mapping[str, Any]) -> Any:
    """The version with another configuration (a run's, given in the launchpad), cut for the
    same embedder and under the same id (a variant cut for a profile's embedder keeps both)."""
    made = type(chunker)(dict(config))
    if callable(getattr(chunker, "sized_for", None)):
        made = made.sized_for(chunker.token_sizing)
    if made.id != chunker.id:
        made.id, made.opt_in = chunker.id, chunker.opt_in
    return made


def _check_settings_reach_hash(ref: str, settings: Mapping[str, Any], chunker: Any) -> None:
    """Settings given to a chunker must show in the configuration its hash covers (SPEC
    E05): one that took them without stating them would cut differently under the same
    config hash, so the chunks of both configurations would share their ids."""
    lost = sorted(set(settings) - set(chunker_config(chunker)))
    if lost:
        raise RegistryError(
            f"{ref} takes settings it does not state in its config ({', '.join(lost)}), so they would "
            f"not reach its config hash: give it a `config` holding them (e.g. a pydantic model)"
        )


@dataclass(frozen=True)
class ChunkerInfo:
    """What the registry advertises about one installed chunker version."""

    id: str
    version: int
    default: bool
    builtin: bool
    fallback: bool
    media_types: tuple[str, ...] | None
    summary: str
    config_hash: str
    source: str

    @property
    def ref(self) -> str:
        return f"{self.id}@{self.version}"

    @property
    def asset_name(self) -> str:
        return StageName.chunker(self.ref).chunker_asset_name


class ChunkerRegistry:
    """Installed chunker versions with the refusals and ordering rules of the contract.

    ``reserved_ids`` are ids the chunkers may not take (readers share the namespace).
    """

    def __init__(self, reserved_ids: Iterable[str] = ()) -> None:
        self._chunkers: dict[str, Chunker] = {}
        self._sources: dict[str, str] = {}
        self._reserved = frozenset(reserved_ids)
        # profile name -> {version ref: the version cut for that profile's embedder} (``sized``)
        self._substitutes: dict[str, dict[str, Chunker]] = {}

    def register(self, chunker: Any, source: str = "direct") -> None:
        cid = getattr(chunker, "id", None)
        version = getattr(chunker, "version", None)
        if not isinstance(cid, str) or not cid:
            raise RegistryError(f"chunker {chunker!r} from {source} states no id")
        if not _ID_PATTERN.match(cid):
            raise RegistryError(f"chunker id {cid!r} from {source} must match [a-z][a-z0-9_]*")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise RegistryError(f"chunker {cid!r} from {source} states no integer version >= 1")
        if not callable(getattr(chunker, "chunk", None)):
            raise RegistryError(f"chunker {cid}@{version} from {source} has no chunk()")
        if cid in self._reserved:
            raise RegistryError(f"chunker id {cid!r} collides with a reader id")
        ref = f"{cid}@{version}"
        if ref in self._chunkers:
            raise RegistryError(f"{ref} is installed twice ({self._sources[ref]} and {source})")
        if not getattr(chunker, "opt_in", False):
            for other in self._chunkers.values():
                if other.id == cid and not getattr(other, "opt_in", False):
                    raise RegistryError(
                        f"{ref} from {source} and {chunker_ref(other)} are both default "
                        f"versions of {cid!r}; mark one opt_in"
                    )
        self._chunkers[ref] = chunker
        self._sources[ref] = source

    def register_entry_point(self, ep: EntryPoint) -> None:
        source = f"entry point {ep.name} = {ep.value}"
        try:
            loaded = ep.load()
        except Exception as exc:  # a package's broken entry point: say which, not a bare traceback
            package = f" of package {ep.dist.name}" if getattr(ep, "dist", None) else ""
            raise RegistryError(
                f"the chunker {source}{package} cannot be loaded: {type(exc).__name__}: {exc}"
            ) from exc
        for chunker in _instances(loaded):
            self.register(chunker, source=source)

    @classmethod
    def discover(
        cls,
        configs: Mapping[str, Mapping[str, Any]] | None = None,
        reserved_ids: Iterable[str] = (),
    ) -> ChunkerRegistry:
        """Every chunker installed under the entry-point group, built-ins included."""
        registry = cls(reserved_ids)
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
            registry.register_entry_point(ep)
        return registry.configured(configs or {}) if configs else registry

    def configured(self, configs: Mapping[str, Mapping[str, Any]]) -> ChunkerRegistry:
        """A copy whose chunkers named in ``configs`` (by id@version) carry that config."""
        unknown = set(configs) - set(self._chunkers)
        if unknown:
            raise RegistryError(f"configuration names chunkers that are not installed: {sorted(unknown)}")
        copy = ChunkerRegistry(self._reserved)
        for ref, chunker in self._chunkers.items():
            if ref in configs:
                chunker = type(chunker)(dict(configs[ref]))
                _check_settings_reach_hash(ref, configs[ref], chunker)
            copy._chunkers[ref] = chunker
            copy._sources[ref] = self._sources[ref]
        return copy

    def sized(self, sizings: Mapping[str, Mapping[str, Any]]) -> ChunkerRegistry:
        """A copy whose token-sized chunkers follow each profile's embedder. ``sizings`` holds,
        per profile name, the sizing of each such version it cuts with
        (``embedding.sizing.chunker_sizings``): None keeps the version, sized for the bundled
        MiniLM; another sizing registers the version cut for it (``sized_for``) under the
        sizing's ``variant_id``, opt-in, and puts it in the version's place in that profile's
        order (``order_for(..., profile=)``)."""
        copy = ChunkerRegistry(self._reserved)
        copy._chunkers, copy._sources = dict(self._chunkers), dict(self._sources)
        made: set[str] = set()  # each version, or variant, cut once however many profiles use it
        for profile, refs in sizings.items():
            for ref, sizing in refs.items():
                chunker = self._chunkers[ref]
                vid = chunker.id if sizing is None else sizing.variant_id(chunker.id)
                sized_ref = f"{vid}@{chunker.version}"
                if sized_ref not in made:
                    made.add(sized_ref)
                    sized = chunker.sized_for(sizing)  # None: checked against the bundled limit
                    if sizing is not None:
                        sized.id, sized.opt_in = vid, True
                        copy._sources[sized_ref] = f"{ref} cut for a {sizing.limit}-token embedder"
                    copy._chunkers[sized_ref] = sized
                if sizing is not None:
                    copy._substitutes.setdefault(profile, {})[ref] = copy._chunkers[sized_ref]
        return copy

    def __contains__(self, ref: str) -> bool:
        return ref in self._chunkers

    def __len__(self) -> int:
        return len(self._chunkers)

    def get(self, ref: str) -> Chunker:
        try:
            return self._chunkers[ref]
        except KeyError:
            raise RegistryError(
                f"no chunker {ref} is installed (installed: {', '.join(sorted(self._chunkers))})"
            ) from None

    def all(self) -> tuple[Chunker, ...]:
        """Every installed version: the default order first, then the opt-in ones."""
        defaults = self.default_order()
        opt_in = sorted(
            (c for c in self._chunkers.values() if getattr(c, "opt_in", False)),
            key=lambda c: (c.id, c.version),
        )
        return defaults + tuple(opt_in)

    def default_order(self) -> tuple[Chunker, ...]:
        """Third-party first, then built-in, then fallback; opt-in versions left out."""

        def group(c: Any) -> int:
            if getattr(c, "fallback", False):
                return 2
            return 1 if getattr(c, "builtin", False) else 0

        defaults = [c for c in self._chunkers.values() if not getattr(c, "opt_in", False)]
        return tuple(sorted(defaults, key=lambda c: (group(c), c.id, c.version)))

    def order_for(self, named: Sequence[str] = (), profile: str = "") -> tuple[Chunker, ...]:
        """Named versions lead in the given order; the default order stays behind them. For a
        ``profile``, a version cut for its embedder stands in the version's place (``sized``)."""
        lead = []
        for ref in named:
            parse_ref(ref)
            chunker = self.get(ref)
            if chunker not in lead:
                lead.append(chunker)
        order = tuple(lead) + tuple(c for c in self.default_order() if c not in lead)
        swap = self._substitutes.get(profile)
        return tuple(swap.get(chunker_ref(c), c) for c in order) if swap else order

    def info(self, chunker: Any) -> ChunkerInfo:
        ref = chunker_ref(chunker)
        media = getattr(chunker, "media_types", None)
        return ChunkerInfo(
            id=chunker.id,
            version=chunker.version,
            default=not getattr(chunker, "opt_in", False),
            builtin=bool(getattr(chunker, "builtin", False)),
            fallback=bool(getattr(chunker, "fallback", False)),
            media_types=tuple(sorted(media)) if media else None,
            summary=str(getattr(chunker, "summary", "") or ""),
            config_hash=config_hash(ref, stated_config(chunker)),
            source=self._sources.get(ref, "direct"),
        )

    def infos(self) -> tuple[ChunkerInfo, ...]:
        return tuple(self.info(c) for c in self.all())


def _instances(loaded: Any) -> list[Any]:
    """An entry point may name a chunker class, a chunker instance, or a provider
    (anything with ``chunkers()``) returning classes or instances."""
    provider = getattr(loaded, "chunkers", None)
    if callable(provider) and not hasattr(loaded, "chunk"):
        items = list(provider())
    else:
        items = [loaded]
    return [item() if isinstance(item, type) else item for item in items]
