"""trainer (being written)."""
