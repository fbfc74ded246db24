#!/usr/bin/env bash
# Runs the five services (infra/services.list) as background processes on the local stack.
# Usage: infra/scripts/services.sh up|down|status|logs [name...]
#        infra/scripts/services.sh exec <name> <command...>   (a command with the service's runtime env)
#        infra/scripts/services.sh targets <file>   (every instance's /metrics, for Prometheus's file_sd)
# Per instance: env from <env>/stack.env, <env>/env/<service>.env, then (instance i >= 2) the overlay
# <env>/env/<service>@<i>.env; `.venv/bin/<service> migrate` once per service, then `.venv/bin/<service>
# serve` in the background; pid in <env>/run/<instance>.pid, log in <env>/logs/<instance>.log.
# Instance 1 is named <service>; <service>@<i> runs when its overlay exists (`make secrets INSTANCES=2`
# writes them, with the instance's own port). A name given is a service (all its instances) or one
# instance (sense-reconciler@2).
# <env> is the environment folder: YOVISION_ENV_DIR, default .local (the stack of `make up`). The HTTP port
# of an instance is the <PREFIX>_HTTP_PORT of its env files, else the one in infra/services.list. The whole
# environment (no name given) includes its OpenID provider, when <env>/env/identity-provider.env exists.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ENV_DIR="${YOVISION_ENV_DIR:-$LOCAL_DIR}"
RUN_DIR="$ENV_DIR/run"
LOG_DIR="$ENV_DIR/logs"

SERVICE_START_TIMEOUT_S=60
SERVICE_STOP_TIMEOUT_S=30
MIGRATE_TIMEOUT_S=120
SERVICES_BIN_DIR="${SERVICES_BIN_DIR:-$REPO_ROOT/.venv/bin}" # overridable for testing this script

# No env file (no `make secrets` yet): no port, so the one of infra/services.list (pipefail made a missing
# file end the script with status 2 and no message).
http_port_of() { [[ -f "$1" ]] || return 0; sed -n 's/^[A-Z]*_HTTP_PORT=\([0-9]*\)$/\1/p' "$1" | tail -n 1; }

declare -A SERVICE_PORTS=() SERVICE_OF=() INSTANCES_OF=()
SERVICE_NAMES=()
while read -r name port _; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  SERVICE_NAMES+=("$name")
  env_port="$(http_port_of "$ENV_DIR/env/$name.env")"
  SERVICE_PORTS["$name"]="${env_port:-$port}"
  SERVICE_OF["$name"]="$name"
  INSTANCES_OF["$name"]="$name"
  while read -r overlay; do
    [[ -n "$overlay" ]] || continue
    instance="$(basename "$overlay" .env)"
    SERVICE_PORTS["$instance"]="$(http_port_of "$overlay")"
    SERVICE_OF["$instance"]="$name"
    INSTANCES_OF["$name"]+=" $instance"
  done < <(compgen -G "$ENV_DIR/env/$name@[0-9]*.env" | sort -V || true)
done <"$INFRA_DIR/services.list"

# instances NAME...: the instances the names mean (a service: all of its; an instance: itself)
instances() {
  local name
  for name in "$@"; do
    if [[ "${INSTANCES_OF[$name]:-}" ]]; then printf '%s\n' ${INSTANCES_OF[$name]}; else printf '%s\n' "$name"; fi
  done
}

# Instances with a pid file but no overlay any more (INSTANCES lowered): `down` still stops them.
stale_instances() {
  local name pidfile
  for name in "$@"; do
    [[ "${INSTANCES_OF[$name]:-}" ]] || continue
    for pidfile in "$RUN_DIR/$name"@*.pid; do
      [[ -f "$pidfile" ]] || continue
      [[ " ${INSTANCES_OF[$name]} " == *" $(basename "$pidfile" .pid) "* ]] || basename "$pidfile" .pid
    done
  done
}

# The environment's OpenID provider (ORY Hydra, yovision_platform.tools.identity_provider): up before the
# services, down after them; only when no service is named (restarting one service leaves it be).
identity_provider() {
  [[ -f "$ENV_DIR/env/identity-provider.env" ]] || return 0
  "$REPO_ROOT/.venv/bin/python" -m yovision_platform.tools.identity_provider "$1" "$ENV_DIR"
}

healthz() { curl -fsS -m 3 -o /dev/null "http://127.0.0.1:${SERVICE_PORTS[$1]}/healthz" 2>/dev/null; }

# Execs "$@" with the instance's environment (stack.env, its service's env file, then the instance's
# overlay) exported; with MIGRATE_ENV=1 also .local/env/<service>.migrate.env, which names the admin DSN:
# `serve` never gets it. Call it in a subshell or in the background: it replaces the calling shell.
exec_with_service_env() {
  local instance="$1" name="${SERVICE_OF[$1]}"; shift
  set -a
  # shellcheck disable=SC1090
  [[ "${MIGRATE_ENV:-0}" == 1 && -f "$ENV_DIR/env/$name.migrate.env" ]] && source "$ENV_DIR/env/$name.migrate.env"
  # shellcheck disable=SC1090,SC1091 # generated files
  [[ -f "$ENV_DIR/stack.env" ]] && source "$ENV_DIR/stack.env"
  # shellcheck disable=SC1090
  [[ -f "$ENV_DIR/env/$name.env" ]] && source "$ENV_DIR/env/$name.env"
  # shellcheck disable=SC1090
  [[ "$instance" != "$name" ]] && source "$ENV_DIR/env/$instance.env"
  set +a
  exec "$@"
}

service_migrate() {
  local name="$1" exe="$SERVICES_BIN_DIR/$1" logfile="$LOG_DIR/$1.log" rc=0
  [[ -x "$exe" ]] || { log "$name: FAILED: $exe not found (run make setup)"; return 1; }
  [[ -f "$ENV_DIR/env/$name.env" ]] || log "$name: note: no $ENV_DIR/env/$name.env (using stack.env only)"
  log "$name: migrate"
  (MIGRATE_ENV=1 exec_with_service_env "$name" timeout "$MIGRATE_TIMEOUT_S" "$exe" migrate >>"$logfile" 2>&1) || rc=$?
  if ((rc != 0)); then
    log "$name: FAILED: '$name migrate' exited $rc; last log lines:"
    tail -n 15 "$logfile" | sed 's/^/    /' >&2
    return 1
  fi
}

service_serve() {
  local name="$1" exe="$SERVICES_BIN_DIR/${SERVICE_OF[$1]}" pidfile="$RUN_DIR/$1.pid" logfile="$LOG_DIR/$1.log" pid rc=0
  log "$name: serve on 127.0.0.1:${SERVICE_PORTS[$name]} (log: $logfile)"
  exec_with_service_env "$name" setsid "$exe" serve </dev/null >>"$logfile" 2>&1 &
  pid=$!
  echo "$pid" >"$pidfile"
  if ! wait_until "$SERVICE_START_TIMEOUT_S" "$name /healthz" bash -c \
    "! kill -0 $pid 2>/dev/null || curl -fs -m 3 -o /dev/null http://127.0.0.1:${SERVICE_PORTS[$name]}/healthz"; then
    log "$name: FAILED: no healthy /healthz within ${SERVICE_START_TIMEOUT_S}s"
    return 1
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid" || rc=$?
    rm -f "$pidfile"
    log "$name: FAILED: '$name serve' exited $rc; last log lines:"
    tail -n 15 "$logfile" | sed 's/^/    /' >&2
    return 1
  fi
  log "$name: healthy"
}

# Migrations one after another (they may share database-wide objects such as roles), once per service,
# then all `serve` processes at once.
services_up() {
  local name failed=0 to_start=() migrated=" " refused=" "
  local -A starters=()
  for name in $(instances "$@"); do
    local service="${SERVICE_OF[$name]}"
    if pid_alive "$RUN_DIR/$name.pid" "$service"; then
      log "$name: already running (pid $(cat "$RUN_DIR/$name.pid"))"
    elif [[ "$refused" == *" $service "* ]]; then
      failed=1
    elif [[ "$migrated" == *" $service "* ]] || service_migrate "$service"; then
      migrated+="$service "
      to_start+=("$name")
    else
      refused+="$service "
      failed=1
    fi
  done
  for name in "${to_start[@]}"; do
    service_serve "$name" &
    starters["$name"]=$!
  done
  for name in "${to_start[@]}"; do wait "${starters[$name]}" || failed=1; done
  ((failed == 0)) || log "services up: some services FAILED (see above)"
  return "$failed"
}

# write_targets FILE: Prometheus's file-based discovery of every instance (one target group per service,
# labelled job=<service>), written to a temporary name then renamed: Prometheus never reads half a file.
write_targets() {
  local file="$1" name instance sep="" targets
  mkdir -p "$(dirname "$file")"
  {
    printf '[\n'
    for name in "${SERVICE_NAMES[@]}"; do
      targets=""
      for instance in $(instances "$name"); do
        targets+="${targets:+, }\"127.0.0.1:${SERVICE_PORTS[$instance]}\""
      done
      printf '%s  {"targets": [%s], "labels": {"job": "%s"}}' "$sep" "$targets" "$name"
      sep=$',\n'
    done
    printf '\n]\n'
  } >"$file.tmp"
  mv "$file.tmp" "$file"
  log "prometheus targets: $file"
}

main() {
  local action="${1:-}" failed=0 name
  [[ -n "$action" ]] || { sed -n '2,4p' "$0" >&2; exit 2; }
  shift
  if [[ "$action" == exec ]]; then
    name="${1:-}"
    [[ -n "$name" && -n "${SERVICE_PORTS[$name]:-}" ]] || die "exec: unknown service or instance '${name}' (see infra/services.list)"
    shift
    (($#)) || die "exec: no command given"
    exec_with_service_env "$name" "$@"
  fi
  if [[ "$action" == targets ]]; then
    [[ -n "${1:-}" ]] || die "targets: no file given"
    write_targets "$1"
    return 0
  fi
  local names=("$@") whole=0
  ((${#names[@]})) || { names=("${SERVICE_NAMES[@]}"); whole=1; }
  for name in "${names[@]}"; do
    [[ -n "${SERVICE_PORTS[$name]:-}" ]] || die "unknown service or instance '$name' (see infra/services.list)"
  done
  ensure_local_dirs
  case "$action" in
    up)
      if ((whole)); then identity_provider up || { log "identity-provider: FAILED"; return 1; }; fi
      services_up "${names[@]}" || failed=1 ;;
    down)
      # In parallel: each service gets its own graceful-shutdown window.
      for name in $(instances "${names[@]}") $(stale_instances "${names[@]}"); do
        stop_pidfile "$name" "$RUN_DIR/$name.pid" "$SERVICE_STOP_TIMEOUT_S" "${name%@*}" &
      done
      wait
      if ((whole)); then identity_provider down || failed=1; fi ;;
    status)
      if ((whole)); then identity_provider status || failed=1; fi
      for name in $(instances "${names[@]}"); do
        if healthz "$name"; then printf '%-19s healthy  http://127.0.0.1:%s/healthz\n' "$name" "${SERVICE_PORTS[$name]}"
        else printf '%-19s down\n' "$name"; failed=1; fi
      done ;;
    logs)
      for name in $(instances "${names[@]}"); do
        echo "==> $LOG_DIR/$name.log <=="
        tail -n "${LOG_LINES:-30}" "$LOG_DIR/$name.log" 2>/dev/null || echo "(no log yet)"
      done ;;
    *) die "unknown action '$action' (up|down|status|logs|exec|targets)" ;;
  esac
  return "$failed"
}

main "$@"
