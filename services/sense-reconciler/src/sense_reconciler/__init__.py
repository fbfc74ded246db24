"""sense-reconciler: Keeps MediaMTX path configuration converged with each camera's desired state."""
