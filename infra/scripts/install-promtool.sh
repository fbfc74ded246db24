#!/usr/bin/env bash
# Builds Prometheus's promtool from its Go module (pinned in infra/versions.env) into .local/bin/promtool.
# Used by `make test` to check and unit-test the alert rules in infra/prometheus/. The module's versions are
# v0.<major*100+minor>.<patch> for Prometheus v<major>.<minor>.<patch> (v0.316.0 is Prometheus 3.16.0).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_local_dirs

binary="$BIN_DIR/promtool"
stamp="$BIN_DIR/.promtool-$PROMETHEUS_MODULE_VERSION"
if [[ -x "$binary" && -f "$stamp" ]]; then
  log "promtool $PROMETHEUS_MODULE_VERSION already built ($binary)"
  exit 0
fi
command -v go >/dev/null || die "go is not installed (needed to build promtool)"

log "building promtool $PROMETHEUS_MODULE_VERSION (go install; the first build takes a few minutes)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && CGO_ENABLED=0 GOBIN="$work" GOFLAGS=-mod=mod go install -trimpath \
  "-ldflags=-X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION" \
  "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_MODULE_VERSION")
mv "$work/promtool" "$binary"
rm -f "$BIN_DIR"/.promtool-*
touch "$stamp"
log "promtool built: $binary ($("$binary" --version 2>&1 | head -n 1))"
