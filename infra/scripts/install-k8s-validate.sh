#!/usr/bin/env bash
# Builds infra/k8s-validate (strict decoding of Kubernetes manifests with the real API types, see its main.go)
# into .local/bin/k8s-validate. Its dependencies come through the Go module proxy at the versions of the
# committed go.mod/go.sum (-mod=readonly: a missing or changed sum fails the build). Used by `make test` only.
# The stamp is a digest of the sources, so a change to the program rebuilds it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_local_dirs

src="$INFRA_DIR/k8s-validate"
digest="$(cd "$src" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-16)"
built_tool_current k8s-validate "$digest" && exit 0
(cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -o "$BIN_DIR/k8s-validate.tmp" .)
install_built_tool k8s-validate "$digest" "$BIN_DIR/k8s-validate.tmp"
