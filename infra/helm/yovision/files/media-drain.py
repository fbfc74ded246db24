"""preStop hook of media-worker: drain this instance, then wait until it reports it is safe to stop.

Runs inside the media-worker container (`python media-drain.py --timeout-seconds N`), with the container's
own environment: it mints a short-lived operator token (permission ``media:drain``, audience
``media-worker``) with the instance's JWT key file, sends ``POST /internal/drain`` to the instance on
127.0.0.1 and polls ``GET /internal/drain`` until ``safe_to_stop`` is true
(docs/runbooks/draining-a-worker.md).

Exit 0 once drained. Exit 1 when the timeout passes first or the state stays unknown: "unknown means not
drained". Either way the kubelet then sends SIGTERM, and the worker hands a running job back with a fenced
release, so nothing is lost; the pod's terminationGracePeriodSeconds covers the timeout plus the shutdown.
Prints only the drain reports (no token, no key).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

from yovision_platform.auth import TokenVerifier

AUDIENCE = "media-worker"
PERMISSION = "media:drain"
SUBJECT = "kubelet-prestop"
POLL_SECONDS = 2.0
REQUEST_TIMEOUT_SECONDS = 5.0


def _request(method: str, url: str, token: str) -> dict[str, object] | None:
    # S310: the URL is always http://127.0.0.1:<port>/internal/drain, built by main()
    request = urllib.request.Request(url, method=method, headers={"Authorization": f"Bearer {token}"})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as response:  # noqa: S310
            report = json.load(response)
    except (OSError, ValueError):  # unreachable, timed out, HTTP error, not JSON: unknown state
        return None
    return report if isinstance(report, dict) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="media-drain", description=__doc__.splitlines()[0])
    parser.add_argument("--timeout-seconds", type=float, required=True)
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.timeout_seconds
    verifier = TokenVerifier.from_key_file(
        os.environ["MEDIA_AUTH_JWT_KEY_FILE"],
        "MEDIA_AUTH_JWT_KEY_FILE",
        issuer=os.environ["MEDIA_AUTH_JWT_ISSUER"],
        audience=AUDIENCE,
    )
    token = verifier.mint(SUBJECT, [PERMISSION], ttl_seconds=int(args.timeout_seconds) + 60)
    url = f"http://127.0.0.1:{os.environ['MEDIA_HTTP_PORT']}/internal/drain"
    report = _request("POST", url, token)
    while True:
        print(json.dumps({"drain": report}), flush=True)
        if report is not None and report.get("safe_to_stop") is True:
            return 0
        if time.monotonic() + POLL_SECONDS > deadline:
            return 1
        time.sleep(POLL_SECONDS)
        report = _request("GET", url, token) if report is not None else _request("POST", url, token)


if __name__ == "__main__":
    sys.exit(main())
