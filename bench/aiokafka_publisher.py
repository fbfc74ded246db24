"""The relay's `TransactionalPublisher` on aiokafka, for the client comparison only (not shipped).

Same semantics as the shipped `ConfluentPublisher`: one transaction per batch under the shard's
transactional id, idempotent, acks=all, linger 5 ms. aiokafka's `send` is a coroutine, so `send` here only
collects the batch and `commit` sends it (awaiting each `send`, as aiokafka requires) and commits.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, ProducerFenced

from yovision_platform.messaging import (
    PRODUCER_MAX_BATCH_BYTES,
    PRODUCER_REQUEST_TIMEOUT_MS,
    Header,
    PublisherFactory,
    PublishError,
    PublishFailed,
    TransactionalPublisher,
)

__all__ = ["AiokafkaPublisher", "aiokafka_publisher_factory"]

AIOKAFKA_LINGER_MS = 5


class AiokafkaPublisher:
    def __init__(self, bootstrap: str, transactional_id: str, *, client_id: str) -> None:
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            client_id=client_id,
            transactional_id=transactional_id,
            enable_idempotence=True,
            acks="all",
            linger_ms=AIOKAFKA_LINGER_MS,
            request_timeout_ms=PRODUCER_REQUEST_TIMEOUT_MS,
            max_batch_size=PRODUCER_MAX_BATCH_BYTES,
        )
        self._batch: list[tuple[str, bytes, bytes, list[tuple[str, bytes]]]] = []

    async def start(self) -> None:
        try:
            await self._producer.start()
        except KafkaError:
            raise PublishFailed(PublishError.BROKER_UNAVAILABLE, fatal=True) from None

    def begin(self) -> None:
        self._batch = []

    def send(self, topic: str, value: bytes, key: bytes, headers: Sequence[Header]) -> None:
        encoded = [(name, v.encode() if isinstance(v, str) else v) for name, v in headers]
        self._batch.append((topic, value, key, encoded))

    async def commit(self) -> None:
        try:
            await self._producer.begin_transaction()
            for topic, value, key, headers in self._batch:
                await self._producer.send(topic, value, key=key, headers=headers)
            await self._producer.commit_transaction()
        except ProducerFenced:
            raise PublishFailed(PublishError.FENCED, fatal=True) from None
        except KafkaError:
            raise PublishFailed(PublishError.BROKER_UNAVAILABLE) from None

    async def abort(self) -> None:
        try:
            await self._producer.abort_transaction()
        except KafkaError:
            raise PublishFailed(PublishError.UNKNOWN, fatal=True) from None

    async def close(self) -> None:
        await self._producer.stop()


def aiokafka_publisher_factory(bootstrap: str, *, client_id: str) -> PublisherFactory:
    def factory(transactional_id: str) -> TransactionalPublisher:
        return AiokafkaPublisher(bootstrap, transactional_id, client_id=client_id)

    return factory
