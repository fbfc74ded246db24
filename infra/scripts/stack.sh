#!/usr/bin/env bash
# The local infrastructure without Docker: PostgreSQL, Kafka, MediaMTX, Jaeger, Prometheus as background
# processes.
# Usage: infra/scripts/stack.sh up|down|status|logs|env [pg] [kafka] [mediamtx] [jaeger] [prometheus]
#        (default: all five; `make test` starts only pg kafka mediamtx)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=stack/pg.sh
source "$INFRA_DIR/scripts/stack/pg.sh"
# shellcheck source=stack/kafka.sh
source "$INFRA_DIR/scripts/stack/kafka.sh"
# shellcheck source=stack/mediamtx.sh
source "$INFRA_DIR/scripts/stack/mediamtx.sh"
# shellcheck source=stack/jaeger.sh
source "$INFRA_DIR/scripts/stack/jaeger.sh"
# shellcheck source=stack/prometheus.sh
source "$INFRA_DIR/scripts/stack/prometheus.sh"

ALL_COMPONENTS=(pg kafka mediamtx jaeger prometheus)
STACK_ENV="$LOCAL_DIR/stack.env"

write_stack_env() {
  cat >"$STACK_ENV" <<ENV
YOVISION_PG_ADMIN_DSN_FILE=$PG_DSN_FILE
YOVISION_KAFKA_BOOTSTRAP=$(kafka_bootstrap)
YOVISION_KAFKA_BROKERS=$KAFKA_BROKERS
YOVISION_MEDIAMTX_API_URL=$MEDIAMTX_API_URL
YOVISION_MEDIAMTX_CREDENTIALS_FILE=$MEDIAMTX_CREDENTIALS_FILE
ENV
  # The trace store and Prometheus only while they run: `make doctor` checks and reads what is named here.
  if pid_alive "$JAEGER_PID" bin/jaeger; then echo "YOVISION_JAEGER_QUERY_URL=$JAEGER_QUERY_URL" >>"$STACK_ENV"; fi
  if pid_alive "$PROMETHEUS_PID" bin/prometheus; then echo "YOVISION_PROMETHEUS_URL=$PROMETHEUS_URL" >>"$STACK_ENV"; fi
}

usage() { echo "usage: $0 up|down|status|logs|env [pg] [kafka] [mediamtx] [jaeger] [prometheus]" >&2; exit 2; }

main() {
  local action="${1:-}" failed=0 c
  [[ -n "$action" ]] || usage
  shift
  local components=("$@")
  ((${#components[@]})) || components=("${ALL_COMPONENTS[@]}")
  for c in "${components[@]}"; do
    [[ " ${ALL_COMPONENTS[*]} " == *" $c "* ]] || die "unknown component '$c' (known: ${ALL_COMPONENTS[*]})"
  done
  ensure_local_dirs
  case "$action" in
    up)
      for c in "${components[@]}"; do "${c}_up"; done
      write_stack_env
      log "stack up: ${components[*]} (env: $STACK_ENV)" ;;
    down)
      # Reverse order: Prometheus, Jaeger, MediaMTX and Kafka before the database.
      for ((i = ${#components[@]} - 1; i >= 0; i--)); do "${components[i]}_down"; done
      log "stack down: ${components[*]}" ;;
    status)
      for c in "${components[@]}"; do "${c}_status" || failed=1; done
      return "$failed" ;;
    logs)
      for c in "${components[@]}"; do
        [[ "$c" == pg ]] && c=postgres
        echo "==> $LOG_DIR/$c.log <=="
        tail -n "${LOG_LINES:-30}" "$LOG_DIR/$c.log" 2>/dev/null || echo "(no log yet)"
      done ;;
    env) write_stack_env; cat "$STACK_ENV" ;;
    *) usage ;;
  esac
}

main "$@"
