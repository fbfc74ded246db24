# Shared helpers for infra/scripts/*.sh (sourced, not executed).
# shellcheck shell=bash
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
INFRA_DIR="$REPO_ROOT/infra"
LOCAL_DIR="$REPO_ROOT/.local"
RUN_DIR="$LOCAL_DIR/run"
LOG_DIR="$LOCAL_DIR/logs"
SECRETS_DIR="$LOCAL_DIR/secrets"
CACHE_DIR="$LOCAL_DIR/cache"
BIN_DIR="$LOCAL_DIR/bin"
# shellcheck source=../versions.env
source "$INFRA_DIR/versions.env"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

ensure_local_dirs() {
  mkdir -p "$RUN_DIR" "$LOG_DIR" "$CACHE_DIR" "$BIN_DIR" "$SECRETS_DIR"
  chmod 0700 "$SECRETS_DIR"
}

# Runs apt-get install for the given packages, with one apt-get update first per process.
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if [[ -z "${_APT_UPDATED:-}" ]]; then
    log "apt-get update"
    apt-get update -qq
    _APT_UPDATED=1
  fi
  log "apt-get install -y $*"
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# port_open HOST PORT -> 0 when something accepts TCP connections there.
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# pid_alive PIDFILE [CMDLINE_PART] -> 0 when the pid file names a live (non-zombie) process whose
# command line contains CMDLINE_PART (guards against a stale pid file whose pid was reused).
pid_alive() {
  local pid state
  [[ -f "$1" ]] || return 1
  pid="$(cat "$1")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  state="$(ps -o stat= -p "$pid" 2>/dev/null | tr -d " ")" || return 1
  [[ "$state" != Z* ]] || return 1
  [[ -z "${2:-}" ]] || tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$2"
}

# wait_until SECONDS DESCRIPTION COMMAND... -> polls COMMAND every 0.5 s, fails after SECONDS.
wait_until() {
  local timeout_s="$1" what="$2"; shift 2
  local deadline=$((SECONDS + timeout_s))
  until "$@"; do
    if ((SECONDS >= deadline)); then
      log "timed out after ${timeout_s}s waiting for $what"
      return 1
    fi
    sleep 0.5
  done
}

# start_server NAME PIDFILE DIR TIMEOUT_S READY COMMAND...: runs COMMAND in DIR in a session of its own,
# output appended to .local/logs/NAME.log, its pid in PIDFILE; waits until the command READY succeeds. Dies
# with the log's last lines when the process exits first or TIMEOUT_S passes. COMMAND must run bin/NAME.
start_server() {
  local name="$1" pidfile="$2" dir="$3" timeout_s="$4" ready="$5"
  shift 5
  (cd "$dir" && exec setsid "$@" </dev/null >>"$LOG_DIR/$name.log" 2>&1) &
  echo $! >"$pidfile"
  if ! wait_until "$timeout_s" "$name" _ready_or_dead "$pidfile" "bin/$name" "$ready" \
    || ! pid_alive "$pidfile" "bin/$name"; then
    tail -n 20 "$LOG_DIR/$name.log" >&2 || true
    die "$name did not start (see $LOG_DIR/$name.log)"
  fi
  log "$name: ready"
}
_ready_or_dead() { ! pid_alive "$1" "$2" || "$3"; }

# stop_pidfile NAME PIDFILE TIMEOUT_S [CMDLINE_PART]: SIGTERM, wait, then SIGKILL; removes the pid file.
stop_pidfile() {
  local name="$1" pidfile="$2" timeout_s="$3" pattern="${4:-}" pid
  if ! pid_alive "$pidfile" "$pattern"; then
    rm -f "$pidfile"
    return 0
  fi
  pid="$(cat "$pidfile")"
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_until "$timeout_s" "$name to exit" bash -c "! ps -o stat= -p $pid | grep -qv Z"; then
    log "$name did not exit in ${timeout_s}s: sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
  rm -f "$pidfile"
  log "$name stopped"
}

# The machine's cache of the servers and tools built from Go modules (MediaMTX, Jaeger, Prometheus,
# promtool, helm, k8s-validate): one binary per name and stamp (the pinned version, or a digest of the
# sources), shared by every clone of the project on this machine, so a fresh clone copies instead of
# building. Override with YOVISION_TOOL_CACHE; delete the folder to rebuild everything.
TOOL_CACHE_DIR="${YOVISION_TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/yovision/tools}"

# built_tool_current NAME STAMP -> 0 (and a log line) when .local/bin/NAME exists with the stamp file
# .local/bin/.NAME-STAMP, or when the machine's tool cache has that build (copied into .local/bin): the Go
# tools are built once per version and machine.
built_tool_current() {
  if [[ -x "$BIN_DIR/$1" && -f "$BIN_DIR/.$1-$2" ]]; then
    log "$1 $2 already built ($BIN_DIR/$1)"
    return 0
  fi
  if [[ -x "$TOOL_CACHE_DIR/$1-$2" ]]; then
    cp "$TOOL_CACHE_DIR/$1-$2" "$BIN_DIR/$1.tmp"
    mv "$BIN_DIR/$1.tmp" "$BIN_DIR/$1"
    rm -f "$BIN_DIR/.$1"-*
    touch "$BIN_DIR/.$1-$2"
    log "$1 $2 taken from the machine's tool cache ($TOOL_CACHE_DIR)"
    return 0
  fi
  command -v go >/dev/null || die "go is not installed (needed to build $1)"
  log "building $1 $2 (the first build takes a few minutes)"
  return 1
}

# install_built_tool NAME STAMP FILE: moves the freshly built FILE to .local/bin/NAME, stamps it, and keeps
# a copy in the machine's tool cache (written to a temporary name, then renamed: concurrent clones never
# see half a binary).
install_built_tool() {
  mv "$3" "$BIN_DIR/$1"
  rm -f "$BIN_DIR/.$1"-*
  touch "$BIN_DIR/.$1-$2"
  mkdir -p "$TOOL_CACHE_DIR"
  cp "$BIN_DIR/$1" "$TOOL_CACHE_DIR/$1-$2.tmp.$$"
  mv "$TOOL_CACHE_DIR/$1-$2.tmp.$$" "$TOOL_CACHE_DIR/$1-$2"
  log "$1 built: $BIN_DIR/$1 (cached in $TOOL_CACHE_DIR)"
}

# go_install_tool NAME STAMP PACKAGE@VERSION [GO INSTALL FLAGS...]: a static `go install` of a module's
# command through the Go module proxy, into .local/bin/NAME, skipped when that version is built already.
go_install_tool() {
  local name="$1" stamp="$2" package="$3" work
  shift 3
  built_tool_current "$name" "$stamp" && return 0
  work="$(mktemp -d)"
  (cd "$work" && CGO_ENABLED=0 GOBIN="$work" GOFLAGS=-mod=mod go install -trimpath "$@" "$package") \
    || { rm -rf "$work"; die "could not build $package"; }
  install_built_tool "$name" "$stamp" "$work/$(basename "${package%@*}")"
  rm -rf "$work"
}

# go_module_source MODULE VERSION -> prints a writable copy of the module's source in .local/cache,
# downloaded once through the Go module proxy (checked against sum.golang.org). For the servers that
# `go install module@version` cannot build: a module with a replace directive, or with files to add first.
go_module_source() {
  local module="$1" version="$2" src probe module_dir
  src="$CACHE_DIR/$(basename "$module")-src-$version"
  if [[ ! -f "$src/go.mod" ]]; then
    log "downloading $module@$version through the Go module proxy"
    probe="$(mktemp -d)"
    module_dir="$(cd "$probe" && GOFLAGS=-mod=mod go mod download -json "$module@$version" \
      | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    rm -rf "$probe"
    [[ -n "$module_dir" && -d "$module_dir" ]] || die "could not download $module@$version"
    rm -rf "$src.tmp"
    cp -r "$module_dir" "$src.tmp"
    chmod -R u+w "$src.tmp"
    mv "$src.tmp" "$src"
  fi
  printf '%s\n' "$src"
}
