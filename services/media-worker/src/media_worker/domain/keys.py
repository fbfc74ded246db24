"""Storage keys: relative paths made by this service only, never from caller input."""

from __future__ import annotations

import uuid

__all__ = [
    "OUTPUTS_FOLDER",
    "WORK_FOLDER",
    "canonical_uuid",
    "output_key",
    "source_key",
    "work_folder_name",
    "work_folder_token",
]

WORK_FOLDER = "work"
OUTPUTS_FOLDER = "outputs"
UUID_CHARS = 36


def source_key(material_id: uuid.UUID) -> str:
    return f"sources/{material_id}/source"


def output_key(material_id: uuid.UUID, token: uuid.UUID, file_name: str) -> str:
    """Where one attempt (lease `token`) stores an output of `material_id`."""
    return f"{OUTPUTS_FOLDER}/{material_id}/{token}/{file_name}"


def work_folder_name(job_id: uuid.UUID, token: uuid.UUID) -> str:
    """The ffmpeg work folder (under `work/`) of one attempt (lease `token`) of `job_id`."""
    return f"{job_id}-{token}"


def canonical_uuid(text: str) -> uuid.UUID | None:
    """The UUID that `text` spells in its canonical form; None for anything else (not a name of ours)."""
    try:
        value = uuid.UUID(text)
    except ValueError:
        return None
    return value if str(value) == text else None


def work_folder_token(name: str) -> uuid.UUID | None:
    """The attempt token of a work folder name `<job>-<token>`; None for a name that is not one."""
    job, dash, token = name[:UUID_CHARS], name[UUID_CHARS : UUID_CHARS + 1], name[UUID_CHARS + 1 :]
    if dash != "-" or canonical_uuid(job) is None:
        return None
    return canonical_uuid(token)
