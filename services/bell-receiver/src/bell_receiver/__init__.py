"""bell-receiver: The global, immutable audit trail and notification inbox."""
