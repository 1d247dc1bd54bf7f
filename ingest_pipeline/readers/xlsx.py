"""The XLSX/XLSM reader: a page per sheet, its text taken row by row from the sheet XML as
``office.xlsx`` streams it (no cells kept); OLE2 containers (encrypted OOXML, legacy
Office) refused with a clear reason."""

from __future__ import annotations

from ingest_pipeline import media_types as mt
from ingest_pipeline.contract import PageOutput
from ingest_pipeline.office.safety import PackageError, ole2_reason
from ingest_pipeline.office.xlsx import load_sheets
from ingest_pipeline.readers.base import ReadOptions


class XlsxReader:
    """A page per sheet (chartsheets included, as blank pages), text = the used cells."""

    id = "xlsx_sheets"
    version = 1
    media_types = frozenset({mt.XLSX, mt.XLSM})

    def read(self, content: bytes, media_type: str, options: ReadOptions) -> tuple[PageOutput, ...]:
        ref = f"{self.id}@{self.version}"
        sheets = load_sheets(content, cells=False)
        pages = []
        for sheet in sheets:
            if sheet.error:
                pages.append(
                    PageOutput(page=sheet.index + 1, status="failed", reader=ref, reason=sheet.error)
                )
                continue
            text = sheet.text()
            reason = f"sheet {sheet.name!r} ({sheet.kind}, {sheet.state})"
            if text.strip():
                pages.append(
                    PageOutput(page=sheet.index + 1, status="read", reader=ref, text=text, reason=reason)
                )
            else:
                pages.append(
                    PageOutput(page=sheet.index + 1, status="blank", reader=ref, text="", reason=reason)
                )
        return tuple(pages)


class Ole2Reader:
    """Refuses OLE2 containers with a clear reason (encrypted OOXML or legacy Office)."""

    id = "ole2_refusal"
    version = 1
    media_types = frozenset({mt.OLE2})

    def read(self, content: bytes, media_type: str, options: ReadOptions) -> tuple[PageOutput, ...]:
        raise PackageError(ole2_reason(content))
