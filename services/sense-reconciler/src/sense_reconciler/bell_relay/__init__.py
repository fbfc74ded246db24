"""Sense → Bell signed audit relay (contract ``sense-audit-relay-v1``, SPEC section 4).

Off by default. :func:`~sense_reconciler.bell_relay.config.load_relay_config` validates the settings;
:class:`~sense_reconciler.bell_relay.worker.BellRelayWorker` claims ``device_operation_outbox`` rows under a
DB-clock lease, pushes them to Bell as one signed batch and records each item's outcome.
"""
