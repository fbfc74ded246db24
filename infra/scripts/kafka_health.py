"""Exit 0 when the Kafka broker at argv[1] answers a metadata request within a few seconds."""

from __future__ import annotations

import asyncio
import sys

from aiokafka.admin import AIOKafkaAdminClient

HEALTH_TIMEOUT_S = 5.0


async def broker_answers_metadata(bootstrap: str) -> bool:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(HEALTH_TIMEOUT_S * 1000))
    try:
        await asyncio.wait_for(admin.start(), HEALTH_TIMEOUT_S)
        await asyncio.wait_for(admin.list_topics(), HEALTH_TIMEOUT_S)
        return True
    except Exception:
        return False
    finally:
        await admin.close()


if __name__ == "__main__":
    sys.exit(0 if asyncio.run(broker_answers_metadata(sys.argv[1])) else 1)
