"""Handlers: one transaction per command, writing state, audit fact, outbox events and due row together."""
