"""Adapters: PostgreSQL repositories and the MediaMTX HTTP client."""
