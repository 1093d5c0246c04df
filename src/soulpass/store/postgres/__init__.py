"""The PostgreSQL backend (issue 14): accounts, versions, records and documents with a validity
range, sandboxes and session events in one database. Only ``soulpass.store`` imports it; it needs
the ``postgres`` extra (psycopg 3, psycopg-pool)."""
