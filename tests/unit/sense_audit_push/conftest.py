"""The audit push's use-case tests run on the same fakes and manual clock as sense-reconciler's."""

from __future__ import annotations

from tests.unit.sense_reconciler.conftest import clock, sense

__all__ = ["clock", "sense"]
