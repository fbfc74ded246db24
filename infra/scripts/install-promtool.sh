#!/usr/bin/env bash
# Builds Prometheus's promtool from its Go module (pinned in infra/versions.env) into .local/bin/promtool.
# Used by `make test` to check and unit-test the alert rules in infra/prometheus/. The module's versions are
# v0.<major*100+minor>.<patch> for Prometheus v<major>.<minor>.<patch> (v0.316.0 is Prometheus 3.16.0).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_local_dirs

go_install_tool promtool "$PROMETHEUS_MODULE_VERSION" \
  "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_MODULE_VERSION" \
  "-ldflags=-X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION"
