"""The transcoder port, with the storage it reads and writes: real ffmpeg/ffprobe on a small generated clip
in a local folder, and the fake on the in-memory storage. Each output renders and verifies in order; a
source that is no video, a missing source, an abort, a missing or broken output end with the same
outcome on both."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from media_worker.adapters.ffmpeg import FfmpegTools
from media_worker.adapters.memory import MemoryMediaTools, MemoryStorage
from media_worker.adapters.storage import LocalStorage
from media_worker.domain.keys import output_key, source_key, work_folder_name
from media_worker.domain.outputs import OUTPUT_BY_KIND, OUTPUTS, Aborted, TranscodeFailure
from media_worker.service_layer.ports import MediaTools, Storage
from tests.support.media_worker_fixtures import make_test_video


@dataclass
class TranscoderUnderTest:
    transcoder: MediaTools
    storage: Storage
    write_work_file: Callable[[Path, bytes], None]
    without_ffmpeg: MediaTools  # the same adapter where ffmpeg is not installed


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A 2 s 320x240 MP4 from ffmpeg's test source."""
    path = make_test_video(tmp_path_factory.mktemp("clip") / "clip.mp4", seconds=2, size="320x240", rate=15)
    return path.read_bytes()


async def stored_source(storage: Storage, data: bytes) -> Path:
    async def body() -> AsyncIterator[bytes]:
        yield data

    key = source_key(uuid.uuid4())
    await storage.write_stream(key, body())
    return storage.local_path(key)


def work_folder(storage: Storage) -> Path:
    return storage.work_dir(work_folder_name(uuid.uuid4(), uuid.uuid4()))


def write_file(path: Path, data: bytes) -> None:
    path.write_bytes(data)


class TranscoderContract:
    """Its test classes provide the `under_test` fixture."""

    async def test_every_output_of_a_video_renders_verifies_and_is_stored(
        self, under_test: TranscoderUnderTest, clip: bytes
    ) -> None:
        storage, transcoder = under_test.storage, under_test.transcoder
        source, work, material, token = (
            await stored_source(storage, clip),
            work_folder(storage),
            uuid.uuid4(),
            uuid.uuid4(),
        )
        for output in OUTPUTS:
            target = work / output.file_name
            await transcoder.render(source, output, target, asyncio.Event())
            await transcoder.verify(output, target)
            stored = await storage.put_file(target, output_key(material, token, output.file_name))
            assert stored.size_bytes > 0
        assert [f.token for f in storage.output_folders([material])] == [token]

    @pytest.mark.parametrize("source_data", [b"\x00\x00\x00\x18not a video at all", None])
    async def test_a_source_that_is_no_video_or_missing_fails_the_render(
        self, under_test: TranscoderUnderTest, source_data: bytes | None
    ) -> None:
        storage = under_test.storage
        if source_data is None:
            source = storage.local_path(source_key(uuid.uuid4()))
        else:
            source = await stored_source(storage, source_data)
        with pytest.raises(TranscodeFailure) as failed:
            await under_test.transcoder.render(
                source, OUTPUT_BY_KIND["cover"], work_folder(storage) / "cover.jpg", asyncio.Event()
            )
        assert failed.value.code == "ffmpeg_failed"

    async def test_an_aborted_render_raises_aborted(
        self, under_test: TranscoderUnderTest, clip: bytes
    ) -> None:
        storage = under_test.storage
        source, abort = await stored_source(storage, clip), asyncio.Event()
        abort.set()
        with pytest.raises(Aborted):
            await under_test.transcoder.render(
                source, OUTPUT_BY_KIND["preview_720p"], work_folder(storage) / "p.mp4", abort
            )

    @pytest.mark.parametrize("kind", [output.kind for output in OUTPUTS])
    async def test_a_missing_or_broken_output_fails_its_verification(
        self, under_test: TranscoderUnderTest, kind: str
    ) -> None:
        output, work = OUTPUT_BY_KIND[kind], work_folder(under_test.storage)
        with pytest.raises(TranscodeFailure) as missing:
            await under_test.transcoder.verify(output, work / output.file_name)
        assert missing.value.code == f"{kind}_missing"
        under_test.write_work_file(work / output.file_name, b"garbage\n")
        with pytest.raises(TranscodeFailure) as broken:
            await under_test.transcoder.verify(output, work / output.file_name)
        assert broken.value.code == f"{kind}_invalid"

    async def test_without_ffmpeg_a_render_fails_with_its_own_code(
        self, under_test: TranscoderUnderTest, clip: bytes
    ) -> None:
        source = await stored_source(under_test.storage, clip)
        with pytest.raises(TranscodeFailure) as failed:
            await under_test.without_ffmpeg.render(
                source,
                OUTPUT_BY_KIND["cover"],
                work_folder(under_test.storage) / "cover.jpg",
                asyncio.Event(),
            )
        assert failed.value.code == "ffmpeg_missing"


class TestFfmpegTranscoder(TranscoderContract):
    @pytest.fixture
    def under_test(self, tmp_path: Path) -> TranscoderUnderTest:
        return TranscoderUnderTest(
            FfmpegTools(),
            LocalStorage(tmp_path / "storage"),
            write_file,
            FfmpegTools(str(tmp_path / "no-such-ffmpeg")),
        )


class TestMemoryMediaTools(TranscoderContract):
    @pytest.fixture
    def under_test(self, tmp_path: Path) -> TranscoderUnderTest:
        storage = MemoryStorage()
        without_ffmpeg = MemoryMediaTools(storage)
        without_ffmpeg.missing_tool = True
        return TranscoderUnderTest(MemoryMediaTools(storage), storage, storage.write_local, without_ffmpeg)
