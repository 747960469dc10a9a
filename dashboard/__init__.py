"""dashboard (being written)."""
