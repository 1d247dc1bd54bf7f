"""Compatibility only: the page layout lives in ``ingest_pipeline.layout`` now.

Kept for the passages branch (chunkers/passage.py, pdf@4), which was written against
this module and has not landed yet; new code imports from ``layout/``. Remove this file
once nothing imports ``ingest_pipeline.pdf_layout``. The ruled-table names are not
re-exported: they are ``layout.ruled_tables.RuledTable``/``RuledCell`` now.
"""

from ingest_pipeline.layout.frames import DEFAULT_DPI, DPI_ENV, PageFrame, page_frame  # noqa: F401
from ingest_pipeline.layout.lines import Line, clean_text  # noqa: F401
from ingest_pipeline.layout.paragraphs import Paragraph, join_lines, paragraphs, running_lines  # noqa: F401
from ingest_pipeline.layout.pdfium_text import extract_lines, page_text  # noqa: F401
from ingest_pipeline.layout.reading_order import column_gutters, order_lines  # noqa: F401
