# Kafka component of stack.sh (sourced): a single-node KRaft broker+controller from .local/kafka/libs, or
# with KAFKA_BROKERS=3 a cluster of three combined nodes (yovision_platform.tools.kafka_cluster, data in
# .local/kafka/cluster). Node 1 of the cluster takes the single broker's ports, so the two modes never run
# at once: `up` in one mode stops the other first; each keeps its own data.
# shellcheck shell=bash
KAFKA_HOME="$LOCAL_DIR/kafka"
KAFKA_PID="$RUN_DIR/kafka.pid"
KAFKA_HOST=127.0.0.1
KAFKA_PORT=19092
KAFKA_BROKERS="${KAFKA_BROKERS:-1}"
KAFKA_CLUSTER_DIR="$KAFKA_HOME/cluster"
[[ "$KAFKA_BROKERS" =~ ^[13]$ ]] || die "KAFKA_BROKERS must be 1 or 3 (got '$KAFKA_BROKERS')"
KAFKA_START_TIMEOUT_S=90
KAFKA_JAVA_OPTS=(-Xms256m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:ParallelGCThreads=2
  -XX:ConcGCThreads=1 -XX:CICompilerCount=2 -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true)

kafka_java() {
  java "${KAFKA_JAVA_OPTS[@]}" -Dlog4j2.configurationFile="$INFRA_DIR/kafka/tools-log4j2.xml" \
    -cp "$KAFKA_HOME/libs/*" "$@"
}

kafka_render_config() {
  mkdir -p "$KAFKA_HOME/data"
  sed "s|@KAFKA_DATA_DIR@|$KAFKA_HOME/data|" "$INFRA_DIR/kafka/server.properties" >"$KAFKA_HOME/server.properties"
}

# Same shape as `kafka-storage.sh random-uuid` (16 random bytes, base64url, no padding), without a JVM start.
kafka_random_cluster_id() {
  local id="-"
  while [[ "$id" == -* ]]; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
  done
  printf '%s\n' "$id"
}

kafka_format_storage() {
  [[ -f "$KAFKA_HOME/data/meta.properties" ]] && return 0
  [[ -s "$KAFKA_HOME/cluster.id" ]] || kafka_random_cluster_id >"$KAFKA_HOME/cluster.id"
  log "kafka: formatting storage (cluster id $(cat "$KAFKA_HOME/cluster.id"), standalone controller)"
  kafka_java kafka.tools.StorageTool format --standalone --ignore-formatted \
    -t "$(cat "$KAFKA_HOME/cluster.id")" -c "$KAFKA_HOME/server.properties" >/dev/null
}

kafka_cluster_tool() {
  "$REPO_ROOT/.venv/bin/python" -m yovision_platform.tools.kafka_cluster "$1" --dir "$KAFKA_CLUSTER_DIR" \
    --nodes 3 --base-port "$KAFKA_PORT" --kafka-home "$KAFKA_HOME" --config "$INFRA_DIR/kafka/server.properties"
}

kafka_cluster_running() { compgen -G "$KAFKA_CLUSTER_DIR/node-*/kafka.pid" >/dev/null; }

# The bootstrap list of the mode this stack runs in (the cluster's when it runs, whatever KAFKA_BROKERS says).
kafka_bootstrap() {
  if ((KAFKA_BROKERS == 3)) || kafka_cluster_running; then
    echo "$KAFKA_HOST:$KAFKA_PORT,$KAFKA_HOST:$((KAFKA_PORT + 100)),$KAFKA_HOST:$((KAFKA_PORT + 200))"
  else echo "$KAFKA_HOST:$KAFKA_PORT"; fi
}

kafka_up() {
  if ((KAFKA_BROKERS == 3)); then kafka_cluster_up; return; fi
  if kafka_cluster_running; then
    log "kafka: stopping the three-broker cluster (switching to one broker; the cluster's data is kept)"
    kafka_cluster_tool down
  fi
  if pid_alive "$KAFKA_PID" kafka.Kafka; then
    log "kafka: already running (pid $(cat "$KAFKA_PID"))"
    return 0
  fi
  port_open "$KAFKA_HOST" "$KAFKA_PORT" && die "kafka: port $KAFKA_PORT is in use by a process this stack did not start"
  port_open "$KAFKA_HOST" 19093 && die "kafka: port 19093 is in use by a process this stack did not start"
  "$INFRA_DIR/scripts/install-kafka.sh"
  kafka_render_config
  kafka_format_storage
  log "kafka: starting $KAFKA_VERSION on $KAFKA_HOST:$KAFKA_PORT (log: $LOG_DIR/kafka.log)"
  setsid java "${KAFKA_JAVA_OPTS[@]}" -Dkafka.logs.dir="$LOG_DIR" \
    -Dlog4j2.configurationFile="$INFRA_DIR/kafka/log4j2.xml" \
    -cp "$KAFKA_HOME/libs/*" kafka.Kafka "$KAFKA_HOME/server.properties" \
    </dev/null >>"$LOG_DIR/kafka.out" 2>&1 &
  echo $! >"$KAFKA_PID"
  if ! wait_until "$KAFKA_START_TIMEOUT_S" "kafka to accept connections" kafka_ready_or_dead; then
    tail -n 20 "$LOG_DIR/kafka.out" "$LOG_DIR/kafka.log" >&2 || true
    die "kafka did not start (see $LOG_DIR/kafka.log and kafka.out)"
  fi
  pid_alive "$KAFKA_PID" kafka.Kafka || { tail -n 20 "$LOG_DIR/kafka.out" >&2; die "kafka exited during start-up"; }
  log "kafka: ready"
}

# True when the broker answers a metadata request, or when the process died (so waiting stops early).
kafka_ready_or_dead() { ! pid_alive "$KAFKA_PID" kafka.Kafka || kafka_healthy; }

kafka_healthy() {
  port_open "$KAFKA_HOST" "$KAFKA_PORT" || return 1
  [[ -x "$REPO_ROOT/.venv/bin/python" ]] || return 0 # before the venv exists, the open port must do
  "$REPO_ROOT/.venv/bin/python" "$INFRA_DIR/scripts/kafka_health.py" "$KAFKA_HOST:$KAFKA_PORT" 2>/dev/null
}

kafka_cluster_up() {
  if pid_alive "$KAFKA_PID" kafka.Kafka; then
    log "kafka: stopping the single broker (switching to three; its data is kept)"
    stop_pidfile kafka "$KAFKA_PID" 60 kafka.Kafka
  fi
  "$INFRA_DIR/scripts/install-kafka.sh"
  log "kafka: starting a three-broker cluster ($KAFKA_VERSION) on $(kafka_bootstrap) (logs: $KAFKA_CLUSTER_DIR/node-*/logs)"
  kafka_cluster_tool up >/dev/null || die "the Kafka cluster did not start (see $KAFKA_CLUSTER_DIR/node-*/logs)"
  log "kafka: cluster ready"
}

kafka_down() {
  stop_pidfile kafka "$KAFKA_PID" 60 kafka.Kafka
  if kafka_cluster_running; then kafka_cluster_tool down; fi
}

kafka_status() {
  if kafka_cluster_running; then kafka_cluster_tool status; return; fi
  if kafka_healthy; then echo "kafka     healthy  $KAFKA_HOST:$KAFKA_PORT ($KAFKA_VERSION)"
  else echo "kafka     down"; return 1; fi
}
