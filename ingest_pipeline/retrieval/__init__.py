"""Retrieval quality: question sets, metrics and baselines."""
