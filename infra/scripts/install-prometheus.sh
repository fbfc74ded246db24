#!/usr/bin/env bash
# Builds the Prometheus server from its Go module (the pin of promtool, infra/versions.env) into
# .local/bin/prometheus, or copies that build from the machine's tool cache. Built without the
# `builtinassets` tag: the web UI's assets are not in the binary, the HTTP API (/api/v1/...) is complete.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_local_dirs

go_install_tool prometheus "$PROMETHEUS_MODULE_VERSION" \
  "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_MODULE_VERSION" \
  "-ldflags=-X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION"
