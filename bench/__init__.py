"""Benchmarks of the platform's outbox relay, outbox writes and fenced leases on the real local stack.

Run with ``make bench`` (or ``.venv/bin/python -m bench``); see docs/benchmarks.md for what each figure means.
Every run creates its own schema ``bench_<hex>`` (and roles) and topic ``bench.<hex>.v1`` and drops them at
the end. Not part of the test suite: nothing here asserts, it measures and prints.
"""
