"""Files, versions and the commit protocol."""
