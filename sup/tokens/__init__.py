"""API bearer tokens: created once, shown once, stored as a SHA-256 hash, revocable."""
