# MediaMTX component of stack.sh (sourced): only the Control API, on 127.0.0.1:19997, authenticated.
# The API user's credentials (one "user:password" line) are generated once into
# .local/secrets/mediamtx-api.credentials; MediaMTX gets the user and only the password's SHA-256 through
# its MTX_AUTHINTERNALUSERS_0_* environment overrides (infra/mediamtx/mediamtx.yml names the user slot).
# shellcheck shell=bash
MEDIAMTX_PID="$RUN_DIR/mediamtx.pid"
MEDIAMTX_API_URL="http://127.0.0.1:19997"
MEDIAMTX_CREDENTIALS_FILE="$SECRETS_DIR/mediamtx-api.credentials"
MEDIAMTX_API_USER="yovision-api"
MEDIAMTX_START_TIMEOUT_S=20

mediamtx_ensure_credentials() {
  [[ -s "$MEDIAMTX_CREDENTIALS_FILE" ]] && return 0
  (umask 077 && printf '%s:%s\n' "$MEDIAMTX_API_USER" "$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
    >"$MEDIAMTX_CREDENTIALS_FILE")
  log "mediamtx: API credentials written to $MEDIAMTX_CREDENTIALS_FILE"
}

# curl reads the credentials from a config on stdin: never on a command line (visible in ps).
mediamtx_curl() {
  local credentials
  credentials="$(cat "$MEDIAMTX_CREDENTIALS_FILE" 2>/dev/null)" || return 1
  printf 'user = "%s"\n' "$credentials" | curl -K - -fsS -m 3 -o /dev/null "$@" 2>/dev/null
}

mediamtx_healthy() { mediamtx_curl "$MEDIAMTX_API_URL/v3/config/paths/list?itemsPerPage=1"; }

mediamtx_up() {
  mediamtx_ensure_credentials
  if pid_alive "$MEDIAMTX_PID" bin/mediamtx; then
    log "mediamtx: already running (pid $(cat "$MEDIAMTX_PID"))"
    return 0
  fi
  port_open 127.0.0.1 19997 && die "mediamtx: port 19997 is in use by a process this stack did not start"
  "$INFRA_DIR/scripts/install-mediamtx.sh"
  mkdir -p "$LOCAL_DIR/mediamtx"
  local user password_hash
  user="$(cut -d: -f1 "$MEDIAMTX_CREDENTIALS_FILE")"
  password_hash="sha256:$(cut -d: -f2- "$MEDIAMTX_CREDENTIALS_FILE" | tr -d '\n' | openssl dgst -sha256 -binary | base64)"
  log "mediamtx: starting $MEDIAMTX_VERSION, API on $MEDIAMTX_API_URL for $user (log: $LOG_DIR/mediamtx.log)"
  # In the server's environment only, never on a command line (visible in ps).
  MTX_AUTHINTERNALUSERS_0_USER="$user" MTX_AUTHINTERNALUSERS_0_PASS="$password_hash" \
    start_server mediamtx "$MEDIAMTX_PID" "$LOCAL_DIR/mediamtx" "$MEDIAMTX_START_TIMEOUT_S" mediamtx_healthy \
    "$BIN_DIR/mediamtx" "$INFRA_DIR/mediamtx/mediamtx.yml"
}

mediamtx_down() { stop_pidfile mediamtx "$MEDIAMTX_PID" 15 bin/mediamtx; }

mediamtx_status() {
  if mediamtx_healthy; then echo "mediamtx  healthy  $MEDIAMTX_API_URL ($MEDIAMTX_VERSION)"
  else echo "mediamtx  down"; return 1; fi
}
