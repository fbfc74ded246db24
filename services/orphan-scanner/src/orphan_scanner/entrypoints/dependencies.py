"""What the routes take from the app: the use cases, put on ``app.state`` by `entrypoints.api.mount_api`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from orphan_scanner.bootstrap import OrphanUseCases


def use_cases(request: Request) -> OrphanUseCases:
    found: OrphanUseCases = request.app.state.use_cases
    return found


UseCases = Annotated[OrphanUseCases, Depends(use_cases)]
