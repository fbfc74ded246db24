"""Run sense-reconciler as a real process on a test schema (SENSE_TEST_SCHEMA), never the real `sense`."""

from __future__ import annotations

import dataclasses
import os
import sys

from sense_reconciler.entrypoints.main import SPEC
from yovision_platform.web import main

if __name__ == "__main__":
    sys.exit(main(dataclasses.replace(SPEC, schema=os.environ["SENSE_TEST_SCHEMA"])))
