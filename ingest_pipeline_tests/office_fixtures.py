"""Office documents the tests build themselves: python-pptx, python-docx and openpyxl,
plus XML edits through zipfile for what those libraries cannot write."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable

EMU_PER_INCH = 914400


def png_bytes(
    color: tuple[int, int, int] = (200, 30, 30), size: tuple[int, int] = (8, 6), fmt: str = "PNG"
) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format=fmt)
    return buffer.getvalue()


def rewrite_zip(content: bytes, edit: Callable[[str, bytes], tuple[str, bytes] | None]) -> bytes:
    """A copy of a zip package with each entry passed through ``edit`` (None drops it)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(content)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            result = edit(info.filename, src.read(info.filename))
            if result is not None:
                dst.writestr(result[0], result[1])
    return out.getvalue()


def replace_in_part(content: bytes, part: str, old: str, new: str, count: int = 1) -> bytes:
    def edit(name: str, data: bytes):
        if name == part:
            text = data.decode("utf-8")
            assert old in text, f"{old!r} not in {part}"
            return name, text.replace(old, new, count).encode("utf-8")
        return name, data

    return rewrite_zip(content, edit)


def read_part(content: bytes, part: str) -> str:
    with zipfile.ZipFile(io.BytesIO(content)) as zf:
        return zf.read(part).decode("utf-8")


def save_pptx(prs) -> bytes:
    buffer = io.BytesIO()
    prs.save(buffer)
    return buffer.getvalue()


def save_docx(doc) -> bytes:
    buffer = io.BytesIO()
    doc.save(buffer)
    return buffer.getvalue()


def save_xlsx(wb) -> bytes:
    buffer = io.BytesIO()
    wb.save(buffer)
    return buffer.getvalue()


def drop_xfrm(sp_xml: str) -> str:
    return re.sub(r"<a:xfrm>.*?</a:xfrm>|<a:xfrm/>", "", sp_xml, flags=re.S)
