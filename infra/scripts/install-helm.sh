#!/usr/bin/env bash
# Builds Helm from its Go module (pinned in infra/versions.env) into .local/bin/helm. Used by `make test` only
# (tests/deploy/ lints and renders infra/helm/yovision with it); `make up` never needs it. Why Helm 4 and not
# Helm 3: docs/decisions.md, "Helm 4, built from its Go module".
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_local_dirs

# -X version: `helm version` reports the release instead of the module's "v4.3" default; -s -w: no symbols.
go_install_tool helm "$HELM_VERSION" "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" \
  "-ldflags=-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
