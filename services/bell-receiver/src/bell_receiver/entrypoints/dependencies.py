"""What the routes take from the app: the use cases and the signed batch endpoint's checks, put on
``app.state`` by `entrypoints.api.mount_api`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from bell_receiver.bootstrap import BellUseCases
from bell_receiver.service_layer.metrics import BellMetrics
from yovision_platform.audit_push import REQUEST_DEADLINE_SECONDS
from yovision_platform.security import KeyRing


@dataclass(frozen=True)
class BatchChecks:
    """How the signed batch endpoint checks a request: the verify ring, the clock the signature's
    timestamp is checked on, the request deadline, and the metrics it counts requests in."""

    keyring: KeyRing
    metrics: BellMetrics
    clock: Callable[[], float] = field(default=time.time)
    deadline_seconds: float = REQUEST_DEADLINE_SECONDS


def use_cases(request: Request) -> BellUseCases:
    found: BellUseCases = request.app.state.use_cases
    return found


def batch_checks(request: Request) -> BatchChecks:
    found: BatchChecks = request.app.state.batch_checks
    return found


UseCases = Annotated[BellUseCases, Depends(use_cases)]
Checks = Annotated[BatchChecks, Depends(batch_checks)]
