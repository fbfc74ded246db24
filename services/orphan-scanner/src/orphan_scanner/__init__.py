"""orphan-scanner: Finds MediaMTX paths no device claims; read-only reports and a gated, confirmed apply."""
