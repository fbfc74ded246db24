#!/usr/bin/env bash
# The console's front-end assets (htmx; axe-core for the browser tests) from the npm registry at the versions
# pinned in services/console/package-lock.json (`npm ci`); nothing is fetched from a CDN at run time.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
console_dir="$REPO_ROOT/services/console"
command -v npm >/dev/null || die "npm is not installed: needed for the console's assets (apt-get install npm)"
stamp="$console_dir/node_modules/.package-lock.json"
if [[ -f "$stamp" && "$stamp" -nt "$console_dir/package-lock.json" ]]; then
  log "console assets present (services/console/node_modules)"
else
  log "npm ci (services/console)"
  (cd "$console_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
