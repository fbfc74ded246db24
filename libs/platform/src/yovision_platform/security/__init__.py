"""Security: HMAC signing, encryption at rest and its key rotation, secret redaction.

The modules below are private; import the names listed in ``__all__`` from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from yovision_platform._exports import lazy_exports

if TYPE_CHECKING:
    from yovision_platform.security._encryption import AES_KEY_BYTES as AES_KEY_BYTES
    from yovision_platform.security._encryption import NONCE_BYTES as NONCE_BYTES
    from yovision_platform.security._encryption import EncryptionKeyRing as EncryptionKeyRing
    from yovision_platform.security._encryption import EncryptionSettings as EncryptionSettings
    from yovision_platform.security._encryption import SecretUnreadable as SecretUnreadable
    from yovision_platform.security._key_rotation import (
        ROTATION_BATCH_ROWS_DEFAULT as ROTATION_BATCH_ROWS_DEFAULT,
    )
    from yovision_platform.security._key_rotation import ROTATION_MAX_PASSES as ROTATION_MAX_PASSES
    from yovision_platform.security._key_rotation import RotationReport as RotationReport
    from yovision_platform.security._key_rotation import SecretField as SecretField
    from yovision_platform.security._key_rotation import SecretRow as SecretRow
    from yovision_platform.security._key_rotation import SecretRowStore as SecretRowStore
    from yovision_platform.security._key_rotation import rotate_keys as rotate_keys
    from yovision_platform.security._key_rotation import rotate_keys_command as rotate_keys_command
    from yovision_platform.security._key_rotation import rotation_exit_code as rotation_exit_code
    from yovision_platform.security._redaction import REDACTED as REDACTED
    from yovision_platform.security._redaction import SecretRegistry as SecretRegistry
    from yovision_platform.security._redaction import default_registry as default_registry
    from yovision_platform.security._redaction import is_sensitive_field_name as is_sensitive_field_name
    from yovision_platform.security._redaction import redact_exception as redact_exception
    from yovision_platform.security._redaction import redact_field as redact_field
    from yovision_platform.security._redaction import redact_text as redact_text
    from yovision_platform.security._redaction import redact_value as redact_value
    from yovision_platform.security._redaction import register_secret as register_secret
    from yovision_platform.security._signing import HEADER_KEY_ID as HEADER_KEY_ID
    from yovision_platform.security._signing import HEADER_NONCE as HEADER_NONCE
    from yovision_platform.security._signing import HEADER_SIGNATURE as HEADER_SIGNATURE
    from yovision_platform.security._signing import HEADER_TIMESTAMP as HEADER_TIMESTAMP
    from yovision_platform.security._signing import KEY_ID_PATTERN as KEY_ID_PATTERN
    from yovision_platform.security._signing import MAX_CLOCK_SKEW_SECONDS as MAX_CLOCK_SKEW_SECONDS
    from yovision_platform.security._signing import MIN_KEY_BYTES as MIN_KEY_BYTES
    from yovision_platform.security._signing import NONCE_RECEIPT_TTL_SECONDS as NONCE_RECEIPT_TTL_SECONDS
    from yovision_platform.security._signing import SIGNATURE_SCHEME as SIGNATURE_SCHEME
    from yovision_platform.security._signing import KeyRing as KeyRing
    from yovision_platform.security._signing import SignatureError as SignatureError
    from yovision_platform.security._signing import SignatureRejectReason as SignatureRejectReason
    from yovision_platform.security._signing import SigningKey as SigningKey
    from yovision_platform.security._signing import VerifiedRequest as VerifiedRequest
    from yovision_platform.security._signing import body_digest_hex as body_digest_hex
    from yovision_platform.security._signing import canonical_string as canonical_string
    from yovision_platform.security._signing import compute_signature_hex as compute_signature_hex
    from yovision_platform.security._signing import load_key_file as load_key_file
    from yovision_platform.security._signing import new_nonce as new_nonce
    from yovision_platform.security._signing import sign_request as sign_request
    from yovision_platform.security._signing import verify_request as verify_request

__all__ = [
    "AES_KEY_BYTES",
    "HEADER_KEY_ID",
    "HEADER_NONCE",
    "HEADER_SIGNATURE",
    "HEADER_TIMESTAMP",
    "KEY_ID_PATTERN",
    "MAX_CLOCK_SKEW_SECONDS",
    "MIN_KEY_BYTES",
    "NONCE_BYTES",
    "NONCE_RECEIPT_TTL_SECONDS",
    "REDACTED",
    "ROTATION_BATCH_ROWS_DEFAULT",
    "ROTATION_MAX_PASSES",
    "SIGNATURE_SCHEME",
    "EncryptionKeyRing",
    "EncryptionSettings",
    "KeyRing",
    "RotationReport",
    "SecretField",
    "SecretRegistry",
    "SecretRow",
    "SecretRowStore",
    "SecretUnreadable",
    "SignatureError",
    "SignatureRejectReason",
    "SigningKey",
    "VerifiedRequest",
    "body_digest_hex",
    "canonical_string",
    "compute_signature_hex",
    "default_registry",
    "is_sensitive_field_name",
    "load_key_file",
    "new_nonce",
    "redact_exception",
    "redact_field",
    "redact_text",
    "redact_value",
    "register_secret",
    "rotate_keys",
    "rotate_keys_command",
    "rotation_exit_code",
    "sign_request",
    "verify_request",
]

__getattr__ = lazy_exports(__name__, __file__)
