# PostgreSQL component of stack.sh (sourced): a throwaway cluster in .local/pg/data on 127.0.0.1:55432,
# run as the `postgres` system user (initdb refuses root).
# shellcheck shell=bash
PG_HOST=127.0.0.1
PG_PORT=55432
PG_DATABASE=yovision
PG_DATA="$LOCAL_DIR/pg/data"
PG_PASSWORD_FILE="$SECRETS_DIR/pg-superuser.password"
PG_DSN_FILE="$SECRETS_DIR/pg-admin.dsn"
PG_START_TIMEOUT_S=60
PG_SOCKET_DIR="$RUN_DIR/pg"
# A unix socket path must stay under ~107 bytes; a deep checkout falls back to a per-checkout /tmp dir.
if ((${#PG_SOCKET_DIR} > 80)); then
  PG_SOCKET_DIR="/tmp/yovision-pg-$(printf '%s' "$REPO_ROOT" | sha256sum | cut -c1-12)"
fi

pg_bin_dir() {
  local dir
  dir="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)"
  [[ -n "$dir" && -x "$dir/pg_ctl" ]] || return 1
  printf '%s\n' "$dir"
}

pg_ensure_installed() {
  pg_bin_dir >/dev/null && return 0
  log "pg: PostgreSQL server not installed: installing Debian's postgresql package"
  apt_install postgresql
  pg_bin_dir >/dev/null || die "pg: no /usr/lib/postgresql/<version>/bin/pg_ctl after installing postgresql"
}

as_postgres() { runuser -u postgres -- "$@"; }

# The postgres user must reach its data, socket and log dirs: give o+x (traverse only) to ancestors lacking it.
pg_make_paths_traversable() {
  local target dir
  for target in "$PG_DATA" "$PG_SOCKET_DIR/x" "$LOG_DIR/postgres.log"; do
    dir="$(dirname "$target")"
    while [[ "$dir" != "/" ]]; do
      if [[ -d "$dir" && "$(stat -c %A "$dir")" != *[xt] ]]; then
        log "pg: chmod o+x $dir (so the postgres user can reach it)"
        chmod o+x "$dir"
      fi
      dir="$(dirname "$dir")"
    done
  done
}

pg_write_password() {
  [[ -s "$PG_PASSWORD_FILE" ]] && return 0
  (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$PG_PASSWORD_FILE")
  chmod 0600 "$PG_PASSWORD_FILE"
}

pg_init_cluster() {
  local bin="$1" pwfile
  [[ -f "$PG_DATA/PG_VERSION" ]] && return 0
  log "pg: initdb $PG_DATA"
  rm -rf "$PG_DATA"
  mkdir -p "$PG_DATA"
  chown postgres:postgres "$PG_DATA"
  chmod 0700 "$PG_DATA"
  pwfile="$(mktemp)"
  cp "$PG_PASSWORD_FILE" "$pwfile"
  chown postgres "$pwfile"
  as_postgres "$bin/initdb" -D "$PG_DATA" -U postgres --pwfile="$pwfile" --auth-local=peer \
    --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  echo "include_if_exists = 'postgresql.local.conf'" >>"$PG_DATA/postgresql.conf"
}

pg_write_settings() {
  cat >"$PG_DATA/postgresql.local.conf" <<CONF
# Written by infra/scripts/stack.sh on every start.
listen_addresses = '$PG_HOST'
port = $PG_PORT
unix_socket_directories = '$PG_SOCKET_DIR'
password_encryption = scram-sha-256
max_connections = 200
shared_buffers = 128MB
work_mem = 4MB
maintenance_work_mem = 64MB
effective_cache_size = 512MB
max_wal_size = 512MB
timezone = 'UTC'
log_timezone = 'UTC'
log_line_prefix = '%m [%p] %q%u@%d '
CONF
  chown postgres:postgres "$PG_DATA/postgresql.local.conf"
}

pg_psql() { as_postgres "$(pg_bin_dir)/psql" -h "$PG_SOCKET_DIR" -p "$PG_PORT" -U postgres -XqtA "$@"; }

pg_ensure_database() {
  if [[ "$(pg_psql -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DATABASE'")" != 1 ]]; then
    log "pg: creating database $PG_DATABASE"
    pg_psql -d postgres -c "CREATE DATABASE $PG_DATABASE"
  fi
  (umask 077 && printf 'postgresql://postgres:%s@%s:%s/%s\n' "$(cat "$PG_PASSWORD_FILE")" \
    "$PG_HOST" "$PG_PORT" "$PG_DATABASE" >"$PG_DSN_FILE")
  chmod 0600 "$PG_DSN_FILE"
}

pg_up() {
  local bin
  pg_ensure_installed
  bin="$(pg_bin_dir)"
  if pg_healthy; then
    log "pg: already running"
  else
    port_open "$PG_HOST" "$PG_PORT" && die "pg: port $PG_PORT is in use by a process this stack did not start"
    pg_write_password
    mkdir -p "$LOCAL_DIR/pg" "$PG_SOCKET_DIR"
    chown postgres:postgres "$LOCAL_DIR/pg" "$PG_SOCKET_DIR"
    touch "$LOG_DIR/postgres.log"
    chown postgres "$LOG_DIR/postgres.log"
    pg_make_paths_traversable
    pg_init_cluster "$bin"
    pg_write_settings
    log "pg: starting $("$bin/postgres" --version | awk '{print $3}') on $PG_HOST:$PG_PORT (log: $LOG_DIR/postgres.log)"
    as_postgres "$bin/pg_ctl" -D "$PG_DATA" -l "$LOG_DIR/postgres.log" -w -t "$PG_START_TIMEOUT_S" start >/dev/null \
      || { tail -n 20 "$LOG_DIR/postgres.log" >&2; die "pg did not start (see $LOG_DIR/postgres.log)"; }
    head -n 1 "$PG_DATA/postmaster.pid" >"$RUN_DIR/pg.pid"
  fi
  pg_ensure_database
  log "pg: ready"
}

pg_healthy() {
  local bin
  bin="$(pg_bin_dir)" || return 1
  [[ -f "$PG_DATA/postmaster.pid" ]] || return 1
  "$bin/pg_isready" -q -h "$PG_HOST" -p "$PG_PORT" -t 3 || return 1
  [[ "$(pg_psql -d postgres -c 'SELECT 1' 2>/dev/null)" == 1 ]]
}

pg_down() {
  local bin pid
  bin="$(pg_bin_dir)" || return 0
  if [[ -f "$PG_DATA/postmaster.pid" ]]; then
    pid="$(head -n 1 "$PG_DATA/postmaster.pid")"
    log "pg: stopping (pid $pid)"
    as_postgres "$bin/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 stop >/dev/null || true
    # pg_ctl returns once postmaster.pid is gone; the process itself exits a moment later.
    if ! wait_until 10 "postmaster $pid to exit" bash -c "! ps -o stat= -p $pid | grep -qv Z"; then
      log "pg: postmaster $pid still alive after pg_ctl stop: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    log "pg: stopped"
  fi
  rm -f "$RUN_DIR/pg.pid"
}

pg_status() {
  if pg_healthy; then echo "pg        healthy  $PG_HOST:$PG_PORT/$PG_DATABASE"
  else echo "pg        down"; return 1; fi
}
