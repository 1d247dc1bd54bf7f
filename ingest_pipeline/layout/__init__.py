"""Page layout shared by the PDF and OCR chunkers.

Everything works in *display space*: points, origin at the top-left of the page as
shown (crop box applied, ``/Rotate`` applied), y growing downward. Boxes are normalized
to [0, 1] only at the end, by the display size.

Modules: ``frames`` (display space of a page), ``lines`` (a located line and how
fragments merge into lines), ``pdfium_text`` (a page's lines from PDFium),
``reading_order`` (columns and rows), ``paragraphs`` (lines into paragraphs, running
headers and footers), ``ruled_tables`` (tables drawn with rules, pdf@3).
"""
