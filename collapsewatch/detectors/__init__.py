"""detectors (being written)."""
