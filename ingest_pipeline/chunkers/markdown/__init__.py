"""markdown@1: structure-aware Markdown chunks with heading paths, packed to character limits.

The block structure is found by a line scanner that follows CommonMark's block rules for
everything that decides a chunk boundary at the top level (ATX and setext headings, fences,
indented code, ``$$`` math, HTML blocks, tables, thematic breaks, front matter, and the
extent of lists and block quotes). Where the extent of a list or block quote hinges on a
lazy continuation line, which only a real parse can settle, that region alone goes to
markdown-it-py (tables, dollar math and front matter enabled). A full markdown-it parse of
every document is several times slower than the whole chunker.

Modules: ``blocks`` (a block and the line rules that recognise one), ``scanner`` (the line
scanner), ``fallback`` (markdown-it-py for the regions the scanner hands over), ``text``
(plain text of inline Markdown, sentences), ``sections`` (headings to sections and header
paths, shared with headings@1), ``chunker`` (packing and pieces), ``validation`` (the
checks and metrics of SPEC C56-C61), ``filled`` (markdown@2: the seed's paragraph filling
and heading joining, C48 and C50).
"""

from ingest_pipeline.chunkers.markdown.chunker import MarkdownChunker
from ingest_pipeline.chunkers.markdown.config import MarkdownConfig
from ingest_pipeline.chunkers.markdown.filled import MarkdownFilledChunker

__all__ = ["MarkdownChunker", "MarkdownConfig", "MarkdownFilledChunker"]
