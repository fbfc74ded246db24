#!/usr/bin/env bash
# Builds the MediaMTX server from its Go module (pinned in infra/versions.env) into .local/bin/mediamtx, or
# copies the build of that version from the machine's tool cache (lib.sh, TOOL_CACHE_DIR).
# `go install module@version` cannot work: the module has a replace directive, and two embedded files
# (internal/core/VERSION, internal/servers/hls/hls.min.js) are made by `go generate`, which downloads
# from the internet. So: fetch the module source through the Go module proxy, write those two files
# ourselves (the HLS player is unused: only the Control API is enabled), and `go build`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_local_dirs

built_tool_current mediamtx "$MEDIAMTX_VERSION" && exit 0
binary="$BIN_DIR/mediamtx"

module="github.com/bluenviron/mediamtx"
src="$CACHE_DIR/mediamtx-src-$MEDIAMTX_VERSION"
if [[ ! -f "$src/go.mod" ]]; then
  log "downloading $module@$MEDIAMTX_VERSION through the Go module proxy"
  probe="$(mktemp -d)"
  module_dir="$(cd "$probe" && GOFLAGS=-mod=mod go mod download -json "$module@$MEDIAMTX_VERSION" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  rm -rf "$probe"
  [[ -n "$module_dir" && -d "$module_dir" ]] || die "could not download $module@$MEDIAMTX_VERSION"
  rm -rf "$src.tmp"
  cp -r "$module_dir" "$src.tmp"
  chmod -R u+w "$src.tmp"
  mv "$src.tmp" "$src"
fi

printf '%s' "$MEDIAMTX_VERSION" >"$src/internal/core/VERSION"
printf '%s\n' '/* HLS web player not bundled in this build: only the Control API is used. */' \
  >"$src/internal/servers/hls/hls.min.js"

(cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -buildvcs=false -o "$binary.tmp" .)
install_built_tool mediamtx "$MEDIAMTX_VERSION" "$binary.tmp"
