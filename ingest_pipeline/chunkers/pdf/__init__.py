"""PDF chunkers, one module per version (``lines`` pdf@1, ``paragraphs`` pdf@2, ``tables``
pdf@3, ``passages`` pdf@4 with its packer ``packing``), over the PDFium page layer each is
given (``page_layer``)."""
