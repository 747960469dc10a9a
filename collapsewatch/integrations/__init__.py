"""integrations (being written)."""
