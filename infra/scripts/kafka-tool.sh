#!/usr/bin/env bash
# Kafka's own console tools, from the same jars as the broker (.local/kafka/libs).
# Usage: infra/scripts/kafka-tool.sh <tool> [args...]
#   tools: topics, console-consumer, console-producer, consumer-groups, get-offsets, metadata-quorum, storage
# --bootstrap-server (the stack's list from .local/stack.env, else 127.0.0.1:19092) is added when the
# arguments name none; console-consumer reads read_committed unless --isolation-level is given.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

tool="${1:-}"
[[ -n "$tool" ]] || { sed -n '2,5p' "$0" >&2; exit 2; }
shift
case "$tool" in
  topics) main_class=org.apache.kafka.tools.TopicCommand ;;
  console-consumer) main_class=org.apache.kafka.tools.consumer.ConsoleConsumer ;;
  console-producer) main_class=org.apache.kafka.tools.ConsoleProducer ;;
  consumer-groups) main_class=org.apache.kafka.tools.consumer.group.ConsumerGroupCommand ;;
  get-offsets) main_class=org.apache.kafka.tools.GetOffsetShell ;;
  metadata-quorum) main_class=org.apache.kafka.tools.MetadataQuorumCommand ;;
  storage) main_class=kafka.tools.StorageTool ;;
  *) die "unknown tool '$tool' (topics, console-consumer, console-producer, consumer-groups, get-offsets, metadata-quorum, storage)" ;;
esac

libs="$LOCAL_DIR/kafka/libs"
[[ -d "$libs" ]] || "$INFRA_DIR/scripts/install-kafka.sh"

args=("$@")
if [[ "$tool" != storage && " $* " != *" --bootstrap-server "* && " $* " != *" --bootstrap-controller "* ]]; then
  bootstrap="${YOVISION_KAFKA_BOOTSTRAP:-$(sed -n 's/^YOVISION_KAFKA_BOOTSTRAP=//p' "$LOCAL_DIR/stack.env" 2>/dev/null)}"
  args=(--bootstrap-server "${bootstrap:-127.0.0.1:19092}" "${args[@]}")
fi
# The outbox relays publish in Kafka transactions: by default show only committed messages, as every consumer
# of the project reads them (pass --isolation-level read_uncommitted to see aborted batches too).
if [[ "$tool" == console-consumer && " $* " != *" --isolation-level "* ]]; then
  args+=(--isolation-level read_committed)
fi
exec java -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
  -Dlog4j2.configurationFile="$INFRA_DIR/kafka/tools-log4j2.xml" -cp "$libs/*" "$main_class" "${args[@]}"
