#!/usr/bin/env bash
# Debian packages the stack needs (PostgreSQL server, ffmpeg/ffprobe, curl, Java, Maven, Chromium, npm);
# installs what is missing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

missing=()
compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null || missing+=(postgresql)
command -v ffmpeg >/dev/null && command -v ffprobe >/dev/null || missing+=(ffmpeg)
command -v curl >/dev/null || missing+=(curl)
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || missing+=(maven)
# The console's browser tests drive Debian's Chromium by its path (Playwright's own download cannot work here).
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
command -v npm >/dev/null || missing+=(npm)
# Debian's Go is too old for MediaMTX: a Go >= 1.26 toolchain must already be on PATH.
command -v go >/dev/null || die "go (>= 1.26) is not installed: needed to build MediaMTX"
if ((${#missing[@]})); then
  apt_install "${missing[@]}"
else
  log "system packages present (postgresql, ffmpeg, curl, java, mvn, chromium, npm)"
fi
