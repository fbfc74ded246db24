"""A sample video for tests and benchmarks: ffmpeg's lavfi test source encoded as H.264 (yuv420p)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def make_sample_video(path: Path, *, seconds: int, size: str, rate: int) -> Path:
    """`seconds` of the test pattern at `size` (e.g. "640x360"), `rate` frames a second, written to `path`."""
    subprocess.run(
        [
            "ffmpeg",
            "-nostdin",
            "-loglevel",
            "error",
            "-f",
            "lavfi",
            "-i",
            f"testsrc=duration={seconds}:size={size}:rate={rate}",
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-pix_fmt",
            "yuv420p",
            str(path),
        ],
        check=True,
    )
    return path
