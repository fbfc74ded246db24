# Jaeger component of stack.sh (sourced): Jaeger v2 with in-memory storage (infra/jaeger/jaeger.yml). OTLP
# in on 127.0.0.1:14317 (gRPC) and :14318 (HTTP), the query API on :16686 (its gRPC on :16685), Jaeger's own
# metrics on :14269. Traces are lost when it stops.
# shellcheck shell=bash
JAEGER_PID="$RUN_DIR/jaeger.pid"
JAEGER_QUERY_URL="http://127.0.0.1:16686"
JAEGER_OTLP_GRPC="127.0.0.1:14317"
JAEGER_OTLP_HTTP_URL="http://127.0.0.1:14318"
JAEGER_PORTS=(14317 14318 16685 16686 14269)
JAEGER_START_TIMEOUT_S=30

jaeger_healthy() { curl -fsS -m 3 -o /dev/null "$JAEGER_QUERY_URL/api/services" 2>/dev/null; }

jaeger_up() {
  local port
  if pid_alive "$JAEGER_PID" bin/jaeger; then
    log "jaeger: already running (pid $(cat "$JAEGER_PID"))"
    return 0
  fi
  for port in "${JAEGER_PORTS[@]}"; do
    port_open 127.0.0.1 "$port" && die "jaeger: port $port is in use by a process this stack did not start"
  done
  "$INFRA_DIR/scripts/install-jaeger.sh"
  log "jaeger: starting $JAEGER_VERSION ($JAEGER_MODULE_VERSION), query on $JAEGER_QUERY_URL, OTLP on" \
    "$JAEGER_OTLP_GRPC (gRPC) and $JAEGER_OTLP_HTTP_URL (log: $LOG_DIR/jaeger.log)"
  start_server jaeger "$JAEGER_PID" "$LOCAL_DIR" "$JAEGER_START_TIMEOUT_S" jaeger_healthy \
    "$BIN_DIR/jaeger" --config "$INFRA_DIR/jaeger/jaeger.yml"
}

jaeger_down() { stop_pidfile jaeger "$JAEGER_PID" 15 bin/jaeger; }

jaeger_status() {
  if jaeger_healthy; then echo "jaeger    healthy  $JAEGER_QUERY_URL ($JAEGER_VERSION)"
  else echo "jaeger    down"; return 1; fi
}
