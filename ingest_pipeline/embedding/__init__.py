"""The embedding model and what sizes chunks by its tokens."""
