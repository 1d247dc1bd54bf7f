"""PDF chunkers, one module per version, over a shared PDFium page layer."""
