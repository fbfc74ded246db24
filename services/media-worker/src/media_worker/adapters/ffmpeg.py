"""The transcoder port on ffmpeg and ffprobe child processes: the three outputs, their verification, and
abortable runs.

Children die with this process (PR_SET_PDEATHSIG on Linux), so a killed worker leaves no live ffmpeg behind,
and `run` kills its child as soon as `abort` is set (a lost lease). ffmpeg's output text never leaves this
module: failures carry only a stable code.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from media_worker.domain.outputs import Aborted, Output, TranscodeFailure

__all__ = ["FFMPEG_ARGS", "FfmpegTools", "render_argv"]

PREVIEW_HEIGHT_PX = 720
CLIP_SECONDS = 10
CLIP_DURATION_TOLERANCE_SECONDS = 0.5
PROBE_TIMEOUT_SECONDS = 30.0
_PR_SET_PDEATHSIG = 1
_H264_720P = (
    "-vf",
    f"scale=-2:{PREVIEW_HEIGHT_PX}",
    "-c:v",
    "libx264",
    "-preset",
    "veryfast",
    "-pix_fmt",
    "yuv420p",
    "-c:a",
    "aac",
    "-movflags",
    "+faststart",
)
# ffmpeg's output options per output kind (the input and target file are added around them).
FFMPEG_ARGS: dict[str, tuple[str, ...]] = {
    "cover": ("-frames:v", "1", "-q:v", "3"),
    "preview_720p": _H264_720P,
    "clip_10s": ("-t", str(CLIP_SECONDS), *_H264_720P),
}


def render_argv(ffmpeg_path: str, source: Path, output: Output, target: Path) -> list[str]:
    """The ffmpeg command that renders `output` of `source` into `target`."""
    return [
        ffmpeg_path,
        "-nostdin",
        "-hide_banner",
        "-loglevel",
        "error",
        "-y",
        "-i",
        str(source),
        *FFMPEG_ARGS[output.kind],
        str(target),
    ]


def _non_empty_file(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class FfmpegTools:
    def __init__(self, ffmpeg_path: str = "ffmpeg", ffprobe_path: str = "ffprobe") -> None:
        self.ffmpeg_path = ffmpeg_path
        self.ffprobe_path = ffprobe_path

    async def _spawn(self, argv: Sequence[str], missing_code: str) -> asyncio.subprocess.Process:
        try:
            return await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError):
            raise TranscodeFailure(missing_code) from None

    async def render(self, source: Path, output: Output, target: Path, abort: asyncio.Event) -> None:
        """Run ffmpeg for one output; kill it when `abort` is set (then raise Aborted)."""
        proc = await self._spawn(render_argv(self.ffmpeg_path, source, output, target), "ffmpeg_missing")
        waiter = asyncio.ensure_future(proc.wait())
        aborter = asyncio.ensure_future(abort.wait())
        try:
            await asyncio.wait({waiter, aborter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            aborter.cancel()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        if abort.is_set():
            raise Aborted()
        if proc.returncode != 0:
            raise TranscodeFailure("ffmpeg_failed")

    async def probe(self, path: Path) -> dict[str, Any]:
        argv = [
            self.ffprobe_path,
            "-v",
            "error",
            "-print_format",
            "json",
            "-show_format",
            "-show_streams",
            str(path),
        ]
        proc = await self._spawn(argv, "ffprobe_missing")
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), PROBE_TIMEOUT_SECONDS)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise TranscodeFailure("ffprobe_failed") from None
        if proc.returncode != 0:
            return {}
        try:
            parsed: dict[str, Any] = json.loads(out)
        except ValueError:
            return {}
        return parsed

    async def verify(self, output: Output, path: Path) -> None:
        """The output exists and ffprobe sees what it must be; TranscodeFailure(<kind>_invalid) otherwise."""
        if not await asyncio.to_thread(_non_empty_file, path):
            raise TranscodeFailure(f"{output.kind}_missing")
        info = await self.probe(path)
        video = [s for s in info.get("streams", []) if s.get("codec_type") == "video"]
        if not video or not video[0].get("width") or not video[0].get("height"):
            raise TranscodeFailure(f"{output.kind}_invalid")
        if output.kind == "cover":
            return
        if int(video[0]["height"]) != PREVIEW_HEIGHT_PX:
            raise TranscodeFailure(f"{output.kind}_invalid")
        try:
            duration = float(info.get("format", {}).get("duration", "0"))
        except ValueError:
            duration = 0.0
        if duration <= 0:
            raise TranscodeFailure(f"{output.kind}_invalid")
        if output.kind == "clip_10s" and duration > CLIP_SECONDS + CLIP_DURATION_TOLERANCE_SECONDS:
            raise TranscodeFailure(f"{output.kind}_invalid")
