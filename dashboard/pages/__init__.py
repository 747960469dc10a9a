"""pages (being written)."""
