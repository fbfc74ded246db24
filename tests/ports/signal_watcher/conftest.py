"""The PostgreSQL fixtures of signal-watcher's integration tests (a migrated schema, a runtime pool, a key
ring), its local HTTP fixture server and the probe confinement fence (autouse), for the contract suites
here."""

from tests.support.signal_watcher_fixtures import (
    cipher,
    fixture_server,
    pool,
    probes_stay_confined,
    signal_db,
)

__all__ = ["cipher", "fixture_server", "pool", "probes_stay_confined", "signal_db"]
