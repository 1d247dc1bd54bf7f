"""Built-in chunkers, one module per format. Importing this package imports no parser."""
