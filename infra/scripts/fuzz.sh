#!/usr/bin/env bash
# `make fuzz`: the API contracts (schemathesis, every check, on every service) and the property tests
# against the real MediaMTX, on a fresh random seed with more examples than `make test` runs.
#   SEED=n      replay a run (the seed is printed first, and again with any failure)
#   EXAMPLES=n  schemathesis examples per operation and phase (default 100)
# The services run in an isolated environment with the watcher probe confined to loopback and resolving
# names from the hosts file only (SIGNAL_PROBE_ONLY_NETWORKS, SIGNAL_PROBE_RESOLVER; see
# yovision_platform.tools.environment): no request, nor any DNS query, leaves the machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

seed="${SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
examples="${EXAMPLES:-100}"
[[ "$seed" =~ ^[0-9]+$ ]] || die "SEED must be a non-negative integer"
[[ "$examples" =~ ^[1-9][0-9]*$ ]] || die "EXAMPLES must be a positive integer"
replay="make fuzz SEED=$seed EXAMPLES=$examples"
log "fuzz: seed $seed, $examples examples per operation (replay: $replay)"

bash infra/scripts/stack.sh up pg kafka mediamtx
rc=0
YOVISION_STACK_STARTED=1 YOVISION_FUZZ_SEED="$seed" YOVISION_FUZZ_EXAMPLES="$examples" \
  YOVISION_HYPOTHESIS_PROFILE=fuzz \
  .venv/bin/pytest -q -p no:cacheprovider --hypothesis-seed="$seed" \
  tests/e2e/test_api_contracts.py tests/ports/sense_reconciler/test_source_uri_acceptance.py || rc=$?
if [[ $rc != 0 ]]; then
  log "fuzz: FAILED with seed $seed (each finding above has its curl line); replay: $replay"
else
  log "fuzz: seed $seed clean"
fi
exit $rc
