#!/usr/bin/env bash
# Makes .venv from the machine's Python 3.11 with a pinned uv (never downloads a Python build).
# uv itself is pip-installed into .local/tools/uv-venv (a venv of that same interpreter).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_local_dirs

find_python() {
  local candidate exe
  for candidate in python3.11 python3; do
    command -v "$candidate" >/dev/null || continue
    # Resolve pyenv-style shims to the real interpreter.
    exe="$("$candidate" -c 'import sys; print(sys.executable if sys.version_info[:2] == (3, 11) else "")' 2>/dev/null)" \
      || continue
    [[ -n "$exe" ]] && { printf '%s\n' "$exe"; return 0; }
  done
  return 1
}

python_exe="$(find_python)" || die "no Python 3.11 found as python3.11 or python3 (the project needs 3.11)"
tools_venv="$LOCAL_DIR/tools/uv-venv"
uv="$tools_venv/bin/uv"
if [[ ! -x "$uv" || "$("$uv" --version 2>/dev/null | awk '{print $2}')" != "$UV_VERSION" ]]; then
  log "installing uv==$UV_VERSION into $tools_venv (from $python_exe)"
  rm -rf "$tools_venv"
  "$python_exe" -m venv "$tools_venv"
  "$tools_venv/bin/pip" install -q --disable-pip-version-check "uv==$UV_VERSION"
fi

export UV_PYTHON_DOWNLOADS=never
sync_args=(sync --python "$python_exe")
[[ -f "$REPO_ROOT/uv.lock" ]] && sync_args+=(--frozen)
log "uv ${sync_args[*]}"
cd "$REPO_ROOT"
"$uv" "${sync_args[@]}"
