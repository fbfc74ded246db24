"""Every refusal bell-receiver answers: `ServiceError`s with a stable code and their HTTP status.

The read APIs answer them (and a cursor no page handed out: the platform's `paging.InvalidCursor`) as the
platform's problem details (`yovision_platform.web`). The signed
batch endpoint (frozen contract sense-audit-relay-v1) answers an `AuditBatchRefused` in the contract's own
body, ``{"error": code}`` as ``application/json``, with the class's status and no further headers.
"""

from __future__ import annotations

from yovision_platform.audit_push import BatchErrorCode
from yovision_platform.errors import ServiceError


class NotificationNotFound(ServiceError):
    """The caller has no such notification (another user's ids are not revealed: never 403)."""

    code = "not_found"
    status = 404


class AuditBatchRefused(ServiceError):
    """A whole signed batch refused (never raised itself): each subclass's code is one of the contract's
    `BatchErrorCode`s."""

    @property
    def batch_code(self) -> BatchErrorCode:
        return BatchErrorCode(self.code)


class InvalidBatch(AuditBatchRefused):
    """A body that is not a batch: ``invalid_json`` (also for a ``Content-Type`` other than
    ``application/json``: the frozen contract declares no 415), ``invalid_envelope`` or
    ``batch_size_out_of_range``, per instance. An envelope refusal is stored as the nonce's receipt, so a
    replay gets the same answer."""

    status = 400

    def __init__(self, code: BatchErrorCode) -> None:
        super().__init__(code.value)


class BatchUnauthorized(AuditBatchRefused):
    """Any signature problem: one uniform answer (the reason goes to a metric only)."""

    code = "unauthorized"
    status = 401


class BatchRequestTimeout(AuditBatchRefused):
    """The body did not arrive within the request deadline."""

    code = "request_timeout"
    status = 408


class ReplayConflict(AuditBatchRefused):
    """The (key id, nonce) was used within the receipt lifetime for another request."""

    code = "replay_conflict"
    status = 409


class BatchBodyTooLarge(AuditBatchRefused):
    """More than `MAX_BODY_BYTES`, declared or streamed."""

    code = "body_too_large"
    status = 413


class BatchDeadlineExceeded(AuditBatchRefused):
    """Handling did not finish within the request deadline (nothing was stored)."""

    code = "deadline_exceeded"
    status = 503


class BatchUnavailable(AuditBatchRefused):
    """The database failed while handling the batch (nothing was stored)."""

    code = "unavailable"
    status = 503
