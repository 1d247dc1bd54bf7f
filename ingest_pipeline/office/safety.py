"""Guarded access to OOXML packages (DOCX, PPTX, XLSX): zip-bomb limits, no DTDs or
entity expansion, clear one-line errors for encrypted, legacy and corrupt files.

Every OOXML reader and chunker opens its bytes through :func:`open_package`.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
MiB = 1024 * 1024
_READ_BLOCK = 1 << 16
_DTD_MARKERS = tuple(
    m.encode(e) for m in ("<!DOCTYPE", "<!ENTITY") for e in ("ascii", "utf-16-le", "utf-16-be")
)
_MARKER_OVERLAP = max(len(m) for m in _DTD_MARKERS) - 1


class PackageError(Exception):
    """An OOXML document that cannot be opened; the message is a one-line reason."""


class MalformedPart(PackageError):
    """A part that is not well-formed XML (readers may do without an auxiliary one)."""


@dataclass(frozen=True)
class PackageLimits:
    """Ceilings on what one package may inflate to (bytes) and how many parts it has.

    A part read whole (``SafePackage.read``, ``xml``: a document body, a slide) is held in
    memory with its tree, so it has the tight ceilings: ``max_entry_bytes`` each and
    ``max_total_bytes`` together. A part streamed (``iterparse``: a worksheet, the shared
    strings), whose reader keeps memory flat (a sheet's cells have ``max_cells``), costs
    time rather than memory, so it may reach ``max_streamed_bytes``, which also bounds all a
    package inflates: a spreadsheet under its size limit inflates several times over, nearly
    all of it sheet XML.

    ``max_ratio`` applies to parts that inflate beyond ``ratio_floor_bytes``: a part
    smaller than that may compress as well as it likes.
    """

    max_total_bytes: int = 256 * MiB
    max_entry_bytes: int = 128 * MiB
    max_streamed_bytes: int = 1024 * MiB
    max_entries: int = 20_000
    max_ratio: float = 200.0
    ratio_floor_bytes: int = 8 * MiB
    max_cells: int = 5_000_000


DEFAULT_LIMITS = PackageLimits()


def ole2_reason(content: bytes) -> str:
    """Why an OLE2 (Compound File) container cannot be read as OOXML."""
    if "EncryptedPackage".encode("utf-16-le") in content or "EncryptionInfo".encode("utf-16-le") in content:
        return "encrypted OOXML (OLE2 container): password-protected document"
    return "legacy binary Office file (OLE2 container: .doc/.xls/.ppt) is not supported"


def safe_parser(**kwargs: Any):
    """An lxml parser that loads no DTD, expands no entity and refuses huge trees."""
    from lxml import etree

    return etree.XMLParser(
        resolve_entities=False,
        load_dtd=False,
        no_network=True,
        huge_tree=False,
        dtd_validation=False,
        **kwargs,
    )


def localname(element: Any) -> str:
    """The tag without its namespace (so Transitional and Strict names both match)."""
    tag = element.tag
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1]


def attr(element: Any, name: str, default: str | None = None) -> str | None:
    """An attribute by local name, whatever its namespace."""
    value = element.get(name)
    if value is not None:
        return value
    for key, value in element.attrib.items():
        if key.rsplit("}", 1)[-1] == name:
            return value
    return default


def rel_attr(element: Any, name: str = "id") -> str | None:
    """A relationship attribute (``r:id``, ``r:embed``, ...): namespaced, by local name."""
    for key, value in element.attrib.items():
        if key.startswith("{") and key.rsplit("}", 1)[-1] == name:
            return value
    return None


class SafePackage:
    """A zip package read under :class:`PackageLimits`; parts are read and parsed on
    demand, and every byte inflated counts against the total."""

    def __init__(self, content: bytes, limits: PackageLimits = DEFAULT_LIMITS, kind: str = "OOXML") -> None:
        self.limits = limits
        self.kind = kind
        self._inflated = 0  # every byte inflated
        self._whole = 0  # the bytes of the parts read whole
        if content.startswith(OLE2_MAGIC):
            raise PackageError(ole2_reason(content))
        if not content:
            raise PackageError("empty file (0 bytes)")
        if not content.startswith(b"PK"):
            raise PackageError(f"not an {kind} package: no zip signature")
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(content))
            infos = self._zip.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
            raise PackageError(f"corrupt package: {_one_line(exc)}") from None
        if len(infos) > limits.max_entries:
            raise PackageError(f"package has {len(infos)} parts, over the limit of {limits.max_entries}")
        declared = 0
        self._infos: dict[str, zipfile.ZipInfo] = {}
        for info in infos:  # the declared sizes; each read checks the bytes it really inflates
            if info.file_size > limits.max_streamed_bytes:
                raise PackageError(
                    f"zip bomb guard: part {info.filename} declares {info.file_size} bytes inflated, "
                    f"over the limit of {limits.max_streamed_bytes}"
                )
            declared += info.file_size
            self._check_ratio(info.filename, info.file_size, info.compress_size)
            self._infos[info.filename.lstrip("/")] = info
        if declared > limits.max_streamed_bytes:
            raise PackageError(
                f"zip bomb guard: parts declare {declared} bytes inflated in total, "
                f"over the limit of {limits.max_streamed_bytes}"
            )
        self._lower = {name.lower(): name for name in self._infos}
        self._rels: dict[str, dict[str, tuple[str, str, bool]]] = {}

    def _check_ratio(self, name: str, size: int, compressed: int) -> None:
        limits = self.limits
        if size > limits.ratio_floor_bytes and size > limits.max_ratio * max(compressed, 1):
            raise PackageError(
                f"zip bomb guard: part {name} inflates {size} bytes from {compressed} "
                f"(ratio over {limits.max_ratio:g})"
            )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._infos)

    def resolve(self, name: str) -> str | None:
        """The stored name of a part (zip names are case-sensitive, OPC names are not)."""
        name = name.lstrip("/")
        if name in self._infos:
            return name
        return self._lower.get(name.lower())

    def has(self, name: str) -> bool:
        return self.resolve(name) is not None

    def open_stream(self, name: str, whole: bool = False) -> Iterator[bytes]:
        """Yield the inflated bytes of a part in blocks, enforcing the limits as it goes:
        those of a part read ``whole``, or of a streamed one (``PackageLimits``)."""
        stored = self.resolve(name)
        if stored is None:
            raise PackageError(f"corrupt package: part {name} is missing")
        info = self._infos[stored]
        limits = self.limits
        part_limit = limits.max_entry_bytes if whole else limits.max_streamed_bytes
        read = 0
        try:
            with self._zip.open(info) as handle:
                while True:
                    block = handle.read(_READ_BLOCK)
                    if not block:
                        break
                    read += len(block)
                    self._inflated += len(block)
                    self._whole += len(block) if whole else 0
                    if read > part_limit:
                        raise PackageError(
                            f"zip bomb guard: part {stored} inflates beyond {part_limit} bytes"
                        )
                    if self._whole > limits.max_total_bytes:
                        raise PackageError(
                            f"zip bomb guard: the parts read whole inflate beyond "
                            f"{limits.max_total_bytes} bytes"
                        )
                    if self._inflated > limits.max_streamed_bytes:
                        raise PackageError(
                            f"zip bomb guard: package inflates beyond {limits.max_streamed_bytes} bytes"
                        )
                    self._check_ratio(stored, read, info.compress_size)
                    yield block
        except PackageError:
            raise
        except Exception as exc:  # BadZipFile, zlib errors, an unsupported compression method...
            raise PackageError(f"corrupt package: {_one_line(exc)}") from None

    def read(self, name: str) -> bytes:
        data = b"".join(self.open_stream(name, whole=True))
        if name.lower().endswith((".xml", ".rels", ".vml")):
            refuse_dtd(data, name)
        return data

    def xml(self, name: str):
        """Parse a part with the safe parser; PackageError on malformed XML."""
        from lxml import etree

        data = self.read(name)
        try:
            root = etree.fromstring(data, parser=safe_parser())
        except etree.XMLSyntaxError as exc:
            raise MalformedPart(f"malformed XML in part {name}: {_one_line(exc)}") from None
        if root is None:
            raise MalformedPart(f"empty XML part {name}")
        return root

    def optional_xml(self, name: str):
        """Like :meth:`xml` for an auxiliary part (styles, numbering, notes, charts):
        None when it is missing or malformed; safety refusals still raise."""
        if not self.has(name):
            return None
        try:
            return self.xml(name)
        except MalformedPart:
            return None

    def iterparse(self, name: str, tags: tuple[str, ...]):
        """Stream a part's elements (``tags`` as ``{*}local`` names) with end events.

        The caller clears the elements it has used so memory stays flat.
        """
        from lxml import etree

        head = _Head(self.open_stream(name), name)
        try:
            for _event, element in etree.iterparse(
                head,
                events=("end",),
                tag=tags,
                resolve_entities=False,
                load_dtd=False,
                no_network=True,
                huge_tree=False,
            ):
                yield element
        except etree.XMLSyntaxError as exc:
            raise MalformedPart(f"malformed XML in part {name}: {_one_line(exc)}") from None

    def verify(self) -> None:
        """Inflate every part once (CRC check, real sizes) and refuse DTDs in XML parts.

        Run before handing the bytes to a library that reads the whole package itself.
        """
        for name in self.names:
            if name.lower().endswith((".xml", ".rels", ".vml")):
                self.read(name)
            else:
                for _ in self.open_stream(name):
                    pass

    # -- OPC relationships -------------------------------------------------------

    def rels(self, part: str) -> dict[str, tuple[str, str, bool]]:
        """Relationships of ``part``: id -> (type, resolved target part, external)."""
        key = part.lstrip("/")
        if key in self._rels:
            return self._rels[key]
        self._rels[key] = self._read_rels(key)
        return self._rels[key]

    def _read_rels(self, part: str) -> dict[str, tuple[str, str, bool]]:
        directory, base = posixpath.split(part)
        rels_name = posixpath.join(directory, "_rels", base + ".rels")
        if not self.has(rels_name):
            return {}
        out: dict[str, tuple[str, str, bool]] = {}
        for rel in self.xml(rels_name):
            if localname(rel) != "Relationship":
                continue
            rid = rel.get("Id") or ""
            target = rel.get("Target") or ""
            external = (rel.get("TargetMode") or "").lower() == "external"
            if not external:
                if target.startswith("/"):
                    target = target.lstrip("/")
                else:
                    target = posixpath.normpath(posixpath.join(directory, target))
            out[rid] = (rel.get("Type") or "", target, external)
        return out

    def main_part(self) -> str:
        """The package's main document part (from the root relationships)."""
        for rtype, target, external in self.rels("").values():
            if not external and rtype.endswith("/officeDocument"):
                if self.has(target):
                    return self.resolve(target) or target
                raise PackageError(f"corrupt package: main part {target} is missing")
        raise PackageError(f"not an {self.kind} package: no officeDocument relationship")


class _Head:
    """A file-like object over a block iterator that refuses a DTD anywhere in the part."""

    def __init__(self, blocks: Iterator[bytes], name: str) -> None:
        self._blocks = blocks
        self._name = name
        self._buffer = b""
        self._tail = b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) < size:
            block = next(self._blocks, None)
            if block is None:
                break
            # Every block is scanned, with the end of the previous one so a marker split
            # across two blocks is still seen.
            refuse_dtd(self._tail + block, self._name)
            self._tail = block[-_MARKER_OVERLAP:]
            self._buffer += block
        if size < 0:
            data, self._buffer = self._buffer, b""
        else:
            data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data


def refuse_dtd(data: bytes, name: str) -> None:
    """OOXML parts never carry a DTD; one that does is refused (entity expansion). The
    whole part is scanned: a prolog may be any length before its DOCTYPE."""
    if any(marker in data for marker in _DTD_MARKERS):
        raise PackageError(
            f"refused XML part {name}: it declares a DTD/entities (possible entity-expansion attack)"
        )


def open_package(content: bytes, limits: PackageLimits = DEFAULT_LIMITS, kind: str = "OOXML") -> SafePackage:
    return SafePackage(content, limits, kind)


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())
