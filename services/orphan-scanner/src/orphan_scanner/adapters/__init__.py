"""Database, Kafka and MediaMTX adapters of orphan-scanner."""
