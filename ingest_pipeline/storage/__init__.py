"""The storage root's data: the only code that names a lake table, a SQL view or a LanceDB table."""
