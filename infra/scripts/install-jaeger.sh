#!/usr/bin/env bash
# Builds Jaeger v2 (an OpenTelemetry collector distribution: the stack's trace server) from its Go module
# (pinned in infra/versions.env) into .local/bin/jaeger, or copies that build from the machine's tool cache.
# `go install module@version` cannot work: the module's go.mod has a replace directive. So: fetch the module
# source through the Go module proxy and `go build` its cmd/jaeger with the module's own go.sum. The UI
# assets (an npm build of the jaeger-ui submodule) are not in the module: the binary serves Jaeger's
# placeholder page at /, the query API (/api/...) is complete.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_local_dirs

built_tool_current jaeger "$JAEGER_MODULE_VERSION" && exit 0
src="$(go_module_source github.com/jaegertracing/jaeger "$JAEGER_MODULE_VERSION")"
(cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath \
  -ldflags "-s -w -X github.com/jaegertracing/jaeger/internal/version.latestVersion=v$JAEGER_VERSION" \
  -o "$BIN_DIR/jaeger.tmp" ./cmd/jaeger)
install_built_tool jaeger "$JAEGER_MODULE_VERSION" "$BIN_DIR/jaeger.tmp"
