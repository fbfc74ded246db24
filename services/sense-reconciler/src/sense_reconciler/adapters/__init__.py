"""Adapters of the ports: PostgreSQL stores and unit of work, the MediaMTX and Bell HTTP clients, and the
in-memory fakes (`memory`)."""
