"""bell-receiver as a real process on a test's own schema, topics and consumer group.

`python bell_process.py serve|migrate|check-config`; env as the real service (prefix BELL_) plus
YOVISION_TEST_BELL_SCHEMA, YOVISION_TEST_BELL_TOPICS (comma-separated) and YOVISION_TEST_BELL_GROUP.
"""

from __future__ import annotations

import os
import sys

from bell_receiver.entrypoints.main import build_spec
from yovision_platform.web import main

if __name__ == "__main__":
    spec = build_spec(
        os.environ["YOVISION_TEST_BELL_SCHEMA"],
        topics=os.environ["YOVISION_TEST_BELL_TOPICS"].split(","),
        consumer_group=os.environ["YOVISION_TEST_BELL_GROUP"],
    )
    sys.exit(main(spec))
