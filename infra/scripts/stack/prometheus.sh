# Prometheus component of stack.sh (sourced): the server on 127.0.0.1:19090 evaluating the project's alert
# rules (infra/prometheus/alerts.yml) every 5 s. It scrapes itself, Jaeger's own metrics, and the service
# instances listed in .local/prometheus/services.json (file-based discovery, re-read on change: `make up`
# writes it once the services run, with `infra/scripts/services.sh targets`). Its configuration is written
# at each start into .local/prometheus/prometheus.yml; its data (2 days, at most 512 MB) in
# .local/prometheus/data.
# shellcheck shell=bash
PROMETHEUS_PID="$RUN_DIR/prometheus.pid"
PROMETHEUS_PORT=19090
PROMETHEUS_URL="http://127.0.0.1:$PROMETHEUS_PORT"
PROMETHEUS_DIR="$LOCAL_DIR/prometheus"
PROMETHEUS_TARGETS_FILE="$PROMETHEUS_DIR/services.json"
PROMETHEUS_START_TIMEOUT_S=30

prometheus_write_config() {
  cat >"$PROMETHEUS_DIR/prometheus.yml.tmp" <<YAML
# Written by infra/scripts/stack/prometheus.sh at each start: edits are lost.
global:
  scrape_interval: 5s
  scrape_timeout: 4s
  evaluation_interval: 5s
rule_files:
  - $INFRA_DIR/prometheus/alerts.yml
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ["127.0.0.1:$PROMETHEUS_PORT"]
  - job_name: jaeger
    static_configs:
      - targets: ["127.0.0.1:14269"]
  # The job label of each target group is its service's name (the alert rules group by job).
  - job_name: services
    file_sd_configs:
      - files: ["$PROMETHEUS_TARGETS_FILE"]
        refresh_interval: 5s
YAML
  mv "$PROMETHEUS_DIR/prometheus.yml.tmp" "$PROMETHEUS_DIR/prometheus.yml"
}

prometheus_healthy() { curl -fsS -m 3 -o /dev/null "$PROMETHEUS_URL/-/ready" 2>/dev/null; }

prometheus_up() {
  if pid_alive "$PROMETHEUS_PID" bin/prometheus; then
    log "prometheus: already running (pid $(cat "$PROMETHEUS_PID"))"
    return 0
  fi
  port_open 127.0.0.1 "$PROMETHEUS_PORT" \
    && die "prometheus: port $PROMETHEUS_PORT is in use by a process this stack did not start"
  "$INFRA_DIR/scripts/install-prometheus.sh"
  mkdir -p "$PROMETHEUS_DIR/data"
  prometheus_write_config
  log "prometheus: starting $PROMETHEUS_VERSION on $PROMETHEUS_URL (log: $LOG_DIR/prometheus.log)"
  start_server prometheus "$PROMETHEUS_PID" "$PROMETHEUS_DIR" "$PROMETHEUS_START_TIMEOUT_S" prometheus_healthy \
    "$BIN_DIR/prometheus" --config.file="$PROMETHEUS_DIR/prometheus.yml" \
    --web.listen-address="127.0.0.1:$PROMETHEUS_PORT" --storage.tsdb.path="$PROMETHEUS_DIR/data" \
    --storage.tsdb.retention.time=2d --storage.tsdb.retention.size=512MB
}

prometheus_down() { stop_pidfile prometheus "$PROMETHEUS_PID" 30 bin/prometheus; }

prometheus_status() {
  if prometheus_healthy; then echo "prometheus healthy  $PROMETHEUS_URL ($PROMETHEUS_VERSION)"
  else echo "prometheus down"; return 1; fi
}
