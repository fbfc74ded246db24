#!/usr/bin/env bash
# Builds ORY Hydra (the stack's OpenID provider) from its Go module into .local/bin/hydra. The version is the
# `tool` of infra/hydra/go.mod (`go get -tool github.com/ory/hydra/v2@<version>` there), its dependencies
# those of the committed go.sum (-mod=readonly: a missing or changed sum fails the build). The stamp is a
# digest of that module, so a new version or dependency rebuilds it. Without cgo: the stack's Hydra runs
# on PostgreSQL only (SQLite would need cgo).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_local_dirs

src="$INFRA_DIR/hydra"
HYDRA_VERSION="$(sed -n 's|^[[:space:]]*github.com/ory/hydra/v2 \(v[^ ]*\).*|\1|p' "$src/go.mod")"
[[ -n "$HYDRA_VERSION" ]] || die "infra/hydra/go.mod requires no github.com/ory/hydra/v2"
digest="$(cd "$src" && cat go.mod go.sum | sha256sum | cut -c1-16)"
built_tool_current hydra "$HYDRA_VERSION-$digest" && exit 0
(cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath \
  -ldflags "-s -w -X github.com/ory/hydra/v2/driver/config.Version=$HYDRA_VERSION" \
  -o "$BIN_DIR/hydra.tmp" github.com/ory/hydra/v2)
install_built_tool hydra "$HYDRA_VERSION-$digest" "$BIN_DIR/hydra.tmp"
