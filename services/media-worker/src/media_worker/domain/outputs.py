"""What a transcode produces (cover, 720p preview, 10 s clip) and how an attempt can end without them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OUTPUTS", "OUTPUT_BY_KIND", "RETRYABLE_FAILURES", "Aborted", "Output", "TranscodeFailure"]


@dataclass(frozen=True)
class Output:
    kind: str  # cover | preview_720p | clip_10s (the event and API vocabulary)
    file_name: str
    media_type: str
    progress_after: int  # percent reached when this output is done


OUTPUTS: tuple[Output, ...] = (
    Output("cover", "cover.jpg", "image/jpeg", 10),
    Output("preview_720p", "preview.mp4", "video/mp4", 70),
    Output("clip_10s", "clip.mp4", "video/mp4", 95),
)
OUTPUT_BY_KIND = {output.kind: output for output in OUTPUTS}

# Failures that another attempt may not repeat (a missing or crashing tool), as `TranscodeFailed.retryable`.
RETRYABLE_FAILURES = frozenset({"ffmpeg_failed", "ffmpeg_missing", "ffprobe_missing", "ffprobe_failed"})


class TranscodeFailure(Exception):
    """A definite failure of this attempt, with a stable code (never a tool's text): `ffmpeg_missing`,
    `ffprobe_missing`, `ffmpeg_failed`, `ffprobe_failed`, `source_missing`, `<kind>_missing`,
    `<kind>_invalid`."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class Aborted(Exception):
    """The run was stopped from outside (lease lost or shutdown); the child was killed."""
