"""Run orphan-scanner as a real process on a test schema (ORPHAN_TEST_SCHEMA), never the real `orphan`:
`python -m ...orphan_process serve` for the service, `... cli <args>` for `sense-orphan`."""

from __future__ import annotations

import dataclasses
import os
import sys

from orphan_scanner.entrypoints import cli
from orphan_scanner.entrypoints.main import SPEC
from yovision_platform.web import main

if __name__ == "__main__":
    spec = dataclasses.replace(SPEC, schema=os.environ["ORPHAN_TEST_SCHEMA"])
    if sys.argv[1:2] == ["cli"]:
        cli.SPEC = spec  # type: ignore[attr-defined]
        sys.exit(cli.main(sys.argv[2:]))
    sys.exit(main(spec, sys.argv[1:]))
