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

src="$(go_module_source github.com/bluenviron/mediamtx "$MEDIAMTX_VERSION")"

printf '%s' "$MEDIAMTX_VERSION" >"$src/internal/core/VERSION"
printf '%s\n' '/* HLS web player not bundled in this build: only the Control API is used. */' \
  >"$src/internal/servers/hls/hls.min.js"

(cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -buildvcs=false -o "$binary.tmp" .)
install_built_tool mediamtx "$MEDIAMTX_VERSION" "$binary.tmp"
