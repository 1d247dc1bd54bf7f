"""Document records: what a document is (title, organisation, period, kind, language, pages),
read from its own bytes, with where each field was read; and matching a query against them."""
