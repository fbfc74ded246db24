"""Messaging: the transactional outbox and its outbox relay, Kafka clients, topic names,
Avro events and the idempotent consumer.

The modules below are private; import the names listed in ``__all__`` from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from yovision_platform._exports import lazy_exports

if TYPE_CHECKING:
    from yovision_platform.messaging._avro import CONTAINER_SCHEMAS_DIR as CONTAINER_SCHEMAS_DIR
    from yovision_platform.messaging._avro import FINGERPRINT_ALGORITHM as FINGERPRINT_ALGORITHM
    from yovision_platform.messaging._avro import RELEASED_DIR_NAME as RELEASED_DIR_NAME
    from yovision_platform.messaging._avro import SAMPLES_DIR_NAME as SAMPLES_DIR_NAME
    from yovision_platform.messaging._avro import SCHEMA_FILE_SUFFIX as SCHEMA_FILE_SUFFIX
    from yovision_platform.messaging._avro import SCHEMAS_DIR_ENV as SCHEMAS_DIR_ENV
    from yovision_platform.messaging._avro import SINGLE_OBJECT_MAGIC as SINGLE_OBJECT_MAGIC
    from yovision_platform.messaging._avro import AvroSerde as AvroSerde
    from yovision_platform.messaging._avro import DecodedEvent as DecodedEvent
    from yovision_platform.messaging._avro import DecodeError as DecodeError
    from yovision_platform.messaging._avro import EventContractError as EventContractError
    from yovision_platform.messaging._avro import InvalidEventError as InvalidEventError
    from yovision_platform.messaging._avro import MalformedEventError as MalformedEventError
    from yovision_platform.messaging._avro import NotSingleObjectError as NotSingleObjectError
    from yovision_platform.messaging._avro import SchemaLoadError as SchemaLoadError
    from yovision_platform.messaging._avro import SchemaMismatchError as SchemaMismatchError
    from yovision_platform.messaging._avro import SchemaRegistry as SchemaRegistry
    from yovision_platform.messaging._avro import SchemaVersion as SchemaVersion
    from yovision_platform.messaging._avro import UnknownEventTypeError as UnknownEventTypeError
    from yovision_platform.messaging._avro import UnknownSchemaError as UnknownSchemaError
    from yovision_platform.messaging._avro import build_schema_versions as build_schema_versions
    from yovision_platform.messaging._avro import default_schemas_dir as default_schemas_dir
    from yovision_platform.messaging._avro import load_released_versions as load_released_versions
    from yovision_platform.messaging._avro import read_released_documents as read_released_documents
    from yovision_platform.messaging._avro import read_schema_documents as read_schema_documents
    from yovision_platform.messaging._avro import released_file_name as released_file_name
    from yovision_platform.messaging._avro import schema_fingerprint as schema_fingerprint
    from yovision_platform.messaging._avro_fields import NAMED_TYPES as NAMED_TYPES
    from yovision_platform.messaging._avro_fields import PRIMITIVE_TYPES as PRIMITIVE_TYPES
    from yovision_platform.messaging._avro_fields import first_invalid_field as first_invalid_field
    from yovision_platform.messaging._consumer import ConsumeOutcome as ConsumeOutcome
    from yovision_platform.messaging._consumer import ConsumerMetrics as ConsumerMetrics
    from yovision_platform.messaging._consumer import EventRejected as EventRejected
    from yovision_platform.messaging._consumer import IdempotentConsumer as IdempotentConsumer
    from yovision_platform.messaging._consumer import InboundEvent as InboundEvent
    from yovision_platform.messaging._consumer import PositionRestoringListener as PositionRestoringListener
    from yovision_platform.messaging._consumer import stored_positions as stored_positions
    from yovision_platform.messaging._events import CATALOG_FILE_NAME as CATALOG_FILE_NAME
    from yovision_platform.messaging._events import HEADER_EVENT_ID as HEADER_EVENT_ID
    from yovision_platform.messaging._events import HEADER_EVENT_TYPE as HEADER_EVENT_TYPE
    from yovision_platform.messaging._events import HEADER_SOURCE_SYSTEM as HEADER_SOURCE_SYSTEM
    from yovision_platform.messaging._events import SOURCE_SYSTEMS as SOURCE_SYSTEMS
    from yovision_platform.messaging._events import CatalogEntry as CatalogEntry
    from yovision_platform.messaging._events import EventCatalog as EventCatalog
    from yovision_platform.messaging._events import EventRecord as EventRecord
    from yovision_platform.messaging._events import TopicSpec as TopicSpec
    from yovision_platform.messaging._events import build_event as build_event
    from yovision_platform.messaging._events import catalog_for as catalog_for
    from yovision_platform.messaging._events import default_catalog as default_catalog
    from yovision_platform.messaging._events import new_envelope as new_envelope
    from yovision_platform.messaging._kafka import PRODUCER_MAX_BATCH_BYTES as PRODUCER_MAX_BATCH_BYTES
    from yovision_platform.messaging._kafka import PRODUCER_REQUEST_TIMEOUT_MS as PRODUCER_REQUEST_TIMEOUT_MS
    from yovision_platform.messaging._kafka import KafkaAccessRefused as KafkaAccessRefused
    from yovision_platform.messaging._kafka import TopicUnavailable as TopicUnavailable
    from yovision_platform.messaging._kafka import admin_client as admin_client
    from yovision_platform.messaging._kafka import create_consumer as create_consumer
    from yovision_platform.messaging._kafka import fetch_end_offsets as fetch_end_offsets
    from yovision_platform.messaging._kafka import partition_for_key as partition_for_key
    from yovision_platform.messaging._kafka import plain_consumer as plain_consumer
    from yovision_platform.messaging._kafka import seek_to_start as seek_to_start
    from yovision_platform.messaging._kafka import start_client as start_client
    from yovision_platform.messaging._kafka import start_producer as start_producer
    from yovision_platform.messaging._kafka_replication import (
        CLUSTER_REPLICATION_FACTOR as CLUSTER_REPLICATION_FACTOR,
    )
    from yovision_platform.messaging._kafka_replication import PartitionReplicas as PartitionReplicas
    from yovision_platform.messaging._kafka_replication import Replication as Replication
    from yovision_platform.messaging._kafka_replication import read_leaders as read_leaders
    from yovision_platform.messaging._kafka_replication import read_replication as read_replication
    from yovision_platform.messaging._kafka_security import PLAINTEXT as PLAINTEXT
    from yovision_platform.messaging._kafka_security import SASL_USERNAME_MAX_CHARS as SASL_USERNAME_MAX_CHARS
    from yovision_platform.messaging._kafka_security import KafkaConnection as KafkaConnection
    from yovision_platform.messaging._kafka_security import KafkaSecurity as KafkaSecurity
    from yovision_platform.messaging._kafka_security import KafkaTarget as KafkaTarget
    from yovision_platform.messaging._kafka_security import SaslMechanism as SaslMechanism
    from yovision_platform.messaging._kafka_security import SecurityProtocol as SecurityProtocol
    from yovision_platform.messaging._kafka_security import kafka_connection as kafka_connection
    from yovision_platform.messaging._kafka_security import kafka_security as kafka_security
    from yovision_platform.messaging._naming import KAFKA_PREFIX_PATTERN as KAFKA_PREFIX_PATTERN
    from yovision_platform.messaging._naming import KafkaNames as KafkaNames
    from yovision_platform.messaging._outbox import MAX_MESSAGE_BYTES as MAX_MESSAGE_BYTES
    from yovision_platform.messaging._outbox import OUTBOX_SHARDS as OUTBOX_SHARDS
    from yovision_platform.messaging._outbox import Outbox as Outbox
    from yovision_platform.messaging._outbox import OutboxMessage as OutboxMessage
    from yovision_platform.messaging._outbox import notify_channel as notify_channel
    from yovision_platform.messaging._outbox import outbox_shard as outbox_shard
    from yovision_platform.messaging._outbox_windows import OutboxWindows as OutboxWindows
    from yovision_platform.messaging._outbox_windows import WindowBatch as WindowBatch
    from yovision_platform.messaging._outbox_windows import WindowPosition as WindowPosition
    from yovision_platform.messaging._outbox_windows import WindowReader as WindowReader
    from yovision_platform.messaging._outbox_windows import unpassed_count_sql as unpassed_count_sql
    from yovision_platform.messaging._processed_events import (
        PROCESSED_EVENTS_RETENTION_DAYS_DEFAULT as PROCESSED_EVENTS_RETENTION_DAYS_DEFAULT,
    )
    from yovision_platform.messaging._processed_events import ProcessedEventsPruner as ProcessedEventsPruner
    from yovision_platform.messaging._processed_events import PruneRound as PruneRound
    from yovision_platform.messaging._processed_events import TopicRetention as TopicRetention
    from yovision_platform.messaging._processed_events import (
        describe_topic_retention as describe_topic_retention,
    )
    from yovision_platform.messaging._processed_events import retention_refusal as retention_refusal
    from yovision_platform.messaging._relay import OUTBOX_TABLE as OUTBOX_TABLE
    from yovision_platform.messaging._relay import RELAY_BATCH_MAX_ROWS as RELAY_BATCH_MAX_ROWS
    from yovision_platform.messaging._relay import OutboxRelay as OutboxRelay
    from yovision_platform.messaging._relay import OutboxRelayConfig as OutboxRelayConfig
    from yovision_platform.messaging._relay import OutboxRelayMetrics as OutboxRelayMetrics
    from yovision_platform.messaging._relay import OutboxShardsMismatch as OutboxShardsMismatch
    from yovision_platform.messaging._relay import executor_for as executor_for
    from yovision_platform.messaging._relay import transactional_id as transactional_id
    from yovision_platform.messaging._shard_cursors import MAX_BACKOFF_EXPONENT as MAX_BACKOFF_EXPONENT
    from yovision_platform.messaging._shard_cursors import CursorFenced as CursorFenced
    from yovision_platform.messaging._shard_cursors import ShardCursors as ShardCursors
    from yovision_platform.messaging._shard_cursors import ShardLease as ShardLease
    from yovision_platform.messaging._shard_cursors import assigned_shards as assigned_shards
    from yovision_platform.messaging._txn_producer import KAFKA_PARTITIONER as KAFKA_PARTITIONER
    from yovision_platform.messaging._txn_producer import ConfluentPublisher as ConfluentPublisher
    from yovision_platform.messaging._txn_producer import Header as Header
    from yovision_platform.messaging._txn_producer import PublisherFactory as PublisherFactory
    from yovision_platform.messaging._txn_producer import PublishError as PublishError
    from yovision_platform.messaging._txn_producer import PublishFailed as PublishFailed
    from yovision_platform.messaging._txn_producer import TransactionalPublisher as TransactionalPublisher
    from yovision_platform.messaging._txn_producer import (
        confluent_publisher_factory as confluent_publisher_factory,
    )

__all__ = [
    "CATALOG_FILE_NAME",
    "CLUSTER_REPLICATION_FACTOR",
    "CONTAINER_SCHEMAS_DIR",
    "FINGERPRINT_ALGORITHM",
    "HEADER_EVENT_ID",
    "HEADER_EVENT_TYPE",
    "HEADER_SOURCE_SYSTEM",
    "KAFKA_PARTITIONER",
    "KAFKA_PREFIX_PATTERN",
    "MAX_BACKOFF_EXPONENT",
    "MAX_MESSAGE_BYTES",
    "NAMED_TYPES",
    "OUTBOX_SHARDS",
    "OUTBOX_TABLE",
    "PLAINTEXT",
    "PRIMITIVE_TYPES",
    "PROCESSED_EVENTS_RETENTION_DAYS_DEFAULT",
    "PRODUCER_MAX_BATCH_BYTES",
    "PRODUCER_REQUEST_TIMEOUT_MS",
    "RELAY_BATCH_MAX_ROWS",
    "RELEASED_DIR_NAME",
    "SAMPLES_DIR_NAME",
    "SASL_USERNAME_MAX_CHARS",
    "SCHEMAS_DIR_ENV",
    "SCHEMA_FILE_SUFFIX",
    "SINGLE_OBJECT_MAGIC",
    "SOURCE_SYSTEMS",
    "AvroSerde",
    "CatalogEntry",
    "ConfluentPublisher",
    "ConsumeOutcome",
    "ConsumerMetrics",
    "CursorFenced",
    "DecodeError",
    "DecodedEvent",
    "EventCatalog",
    "EventContractError",
    "EventRecord",
    "EventRejected",
    "Header",
    "IdempotentConsumer",
    "InboundEvent",
    "InvalidEventError",
    "KafkaAccessRefused",
    "KafkaConnection",
    "KafkaNames",
    "KafkaSecurity",
    "KafkaTarget",
    "MalformedEventError",
    "NotSingleObjectError",
    "Outbox",
    "OutboxMessage",
    "OutboxRelay",
    "OutboxRelayConfig",
    "OutboxRelayMetrics",
    "OutboxShardsMismatch",
    "OutboxWindows",
    "PartitionReplicas",
    "PositionRestoringListener",
    "ProcessedEventsPruner",
    "PruneRound",
    "PublishError",
    "PublishFailed",
    "PublisherFactory",
    "Replication",
    "SaslMechanism",
    "SchemaLoadError",
    "SchemaMismatchError",
    "SchemaRegistry",
    "SchemaVersion",
    "SecurityProtocol",
    "ShardCursors",
    "ShardLease",
    "TopicRetention",
    "TopicSpec",
    "TopicUnavailable",
    "TransactionalPublisher",
    "UnknownEventTypeError",
    "UnknownSchemaError",
    "WindowBatch",
    "WindowPosition",
    "WindowReader",
    "admin_client",
    "assigned_shards",
    "build_event",
    "build_schema_versions",
    "catalog_for",
    "confluent_publisher_factory",
    "create_consumer",
    "default_catalog",
    "default_schemas_dir",
    "describe_topic_retention",
    "executor_for",
    "fetch_end_offsets",
    "first_invalid_field",
    "kafka_connection",
    "kafka_security",
    "load_released_versions",
    "new_envelope",
    "notify_channel",
    "outbox_shard",
    "partition_for_key",
    "plain_consumer",
    "read_leaders",
    "read_released_documents",
    "read_replication",
    "read_schema_documents",
    "released_file_name",
    "retention_refusal",
    "schema_fingerprint",
    "seek_to_start",
    "start_client",
    "start_producer",
    "stored_positions",
    "transactional_id",
    "unpassed_count_sql",
]

__getattr__ = lazy_exports(__name__, __file__)
