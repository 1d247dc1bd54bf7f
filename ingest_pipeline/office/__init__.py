"""The document models of Office files, read from their packages with lxml: Word sections
(``docx``), slides (``pptx``), worksheets (``xlsx``) and the charts in them (``charts``).

The page readers turn a model into pages; the Office chunkers cut the same model into
pieces, so both see one reading of the package.
"""
