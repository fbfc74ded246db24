# MediaMTX component of stack.sh (sourced): only the Control API, on 127.0.0.1:19997.
# shellcheck shell=bash
MEDIAMTX_PID="$RUN_DIR/mediamtx.pid"
MEDIAMTX_API_URL="http://127.0.0.1:19997"
MEDIAMTX_START_TIMEOUT_S=20

mediamtx_healthy() { curl -fsS -m 3 -o /dev/null "$MEDIAMTX_API_URL/v3/paths/list" 2>/dev/null; }
mediamtx_ready_or_dead() { ! pid_alive "$MEDIAMTX_PID" bin/mediamtx || mediamtx_healthy; }

mediamtx_up() {
  if pid_alive "$MEDIAMTX_PID" bin/mediamtx; then
    log "mediamtx: already running (pid $(cat "$MEDIAMTX_PID"))"
    return 0
  fi
  port_open 127.0.0.1 19997 && die "mediamtx: port 19997 is in use by a process this stack did not start"
  "$INFRA_DIR/scripts/install-mediamtx.sh"
  mkdir -p "$LOCAL_DIR/mediamtx"
  log "mediamtx: starting $MEDIAMTX_VERSION, API on $MEDIAMTX_API_URL (log: $LOG_DIR/mediamtx.log)"
  (cd "$LOCAL_DIR/mediamtx" && exec setsid "$BIN_DIR/mediamtx" "$INFRA_DIR/mediamtx/mediamtx.yml" \
    </dev/null >>"$LOG_DIR/mediamtx.log" 2>&1) &
  echo $! >"$MEDIAMTX_PID"
  if ! wait_until "$MEDIAMTX_START_TIMEOUT_S" "mediamtx API" mediamtx_ready_or_dead || ! pid_alive "$MEDIAMTX_PID" bin/mediamtx; then
    tail -n 20 "$LOG_DIR/mediamtx.log" >&2 || true
    die "mediamtx did not start (see $LOG_DIR/mediamtx.log)"
  fi
  log "mediamtx: ready"
}

mediamtx_down() { stop_pidfile mediamtx "$MEDIAMTX_PID" 15 bin/mediamtx; }

mediamtx_status() {
  if mediamtx_healthy; then echo "mediamtx  healthy  $MEDIAMTX_API_URL ($MEDIAMTX_VERSION)"
  else echo "mediamtx  down"; return 1; fi
}
