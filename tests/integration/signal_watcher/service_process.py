"""signal-watcher's real composition (`configure`) on a test schema named by YOVISION_TEST_SIGNAL_SCHEMA
(the service's own schema name is fixed to `signal`, which tests never use)."""

from __future__ import annotations

import dataclasses
import os
import sys

from signal_watcher.entrypoints.main import SPEC
from yovision_platform.web import main

if __name__ == "__main__":
    sys.exit(main(dataclasses.replace(SPEC, schema=os.environ["YOVISION_TEST_SIGNAL_SCHEMA"]), sys.argv[1:]))
