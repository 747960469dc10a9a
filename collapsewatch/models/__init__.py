"""models (being written)."""
