"""media-worker's real composition root on a test schema: `python serve_media.py serve`.

The service's ServiceSpec has the fixed schema `media`; tests never use it, so this runs the very same
`configure` hook with the schema named by YOVISION_TEST_MEDIA_SCHEMA.
"""

from __future__ import annotations

import dataclasses
import os
import sys

from media_worker.entrypoints.main import SPEC
from yovision_platform.web import main

if __name__ == "__main__":
    spec = dataclasses.replace(SPEC, schema=os.environ["YOVISION_TEST_MEDIA_SCHEMA"])
    sys.exit(main(spec, sys.argv[1:]))
