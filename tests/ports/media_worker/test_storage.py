"""The storage port: a write is all or nothing whatever ends its body, chunks must match their layout size
and checksum, and attempts' temporary folders are listed and removed one at a time (never a source).

`LocalStorage`'s own guarantees below the port (fsync, rename, the empty folders it removes) are proven in
tests/integration/media_worker."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from media_worker.adapters.memory import MemoryStorage
from media_worker.adapters.storage import LocalStorage
from media_worker.domain.errors import InvalidUpload
from media_worker.domain.keys import output_key, source_key, work_folder_name
from media_worker.service_layer.ports import AttemptFolder, ChunkTarget, Storage


def write_file(path: Path, data: bytes) -> None:
    path.write_bytes(data)


class BodyFailed(Exception):
    pass


@dataclass
class StorageUnderTest:
    storage: Storage
    entries: Callable[[], list[str]]  # the key of every file the storage holds, partial ones included
    write_work_file: Callable[[Path, bytes], None]  # what a transcoder writes into a work folder


async def body_of(
    *pieces: bytes, then_fail: bool = False, read: list[int] | None = None
) -> AsyncIterator[bytes]:
    for piece in pieces:
        if read is not None:
            read.append(len(piece))
        yield piece
    if then_fail:
        raise BodyFailed


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class StorageContract:
    """Its test classes provide the `under_test` fixture."""

    async def test_a_stream_is_stored_with_its_size_and_digest(self, under_test: StorageUnderTest) -> None:
        key = source_key(uuid.uuid4())
        stored = await under_test.storage.write_stream(key, body_of(b"abc", b"def"))
        assert (stored.key, stored.size_bytes, stored.sha256) == (key, 6, sha256(b"abcdef"))
        assert under_test.storage.has_file(key)
        assert under_test.entries() == [key]

    async def test_a_stream_whose_body_fails_leaves_nothing(self, under_test: StorageUnderTest) -> None:
        key = source_key(uuid.uuid4())
        with pytest.raises(BodyFailed):
            await under_test.storage.write_stream(key, body_of(b"abc", then_fail=True))
        assert not under_test.storage.has_file(key)
        assert under_test.entries() == []

    async def test_a_chunk_of_its_exact_size_is_stored(self, under_test: StorageUnderTest) -> None:
        session = uuid.uuid4()
        storage = under_test.storage
        await storage.write_chunk(ChunkTarget(session, 0, 4), body_of(b"ab", b"cd"))
        checked = sha256(b"ef").upper()
        await storage.write_chunk(ChunkTarget(session, 1, 2, checked), body_of(b"ef"))
        assert (
            storage.has_chunk(session, 0),
            storage.has_chunk(session, 1),
            storage.has_chunk(session, 2),
        ) == (
            True,
            True,
            False,
        )

    @pytest.mark.parametrize(
        ("pieces", "checksum", "code"),
        [
            ((b"abc",), None, "chunk_size_mismatch"),
            ((b"abcde",), None, "chunk_size_mismatch"),
            ((b"abcd",), sha256(b"other"), "chunk_checksum_mismatch"),
        ],
    )
    async def test_a_chunk_that_does_not_match_is_refused_and_leaves_nothing(
        self, under_test: StorageUnderTest, pieces: tuple[bytes, ...], checksum: str | None, code: str
    ) -> None:
        session = uuid.uuid4()
        with pytest.raises(InvalidUpload) as refused:
            await under_test.storage.write_chunk(ChunkTarget(session, 0, 4, checksum), body_of(*pieces))
        assert refused.value.code == code
        assert not under_test.storage.has_chunk(session, 0)
        assert under_test.entries() == []

    async def test_a_chunk_is_refused_at_its_first_byte_too_many(self, under_test: StorageUnderTest) -> None:
        read: list[int] = []
        with pytest.raises(InvalidUpload):
            await under_test.storage.write_chunk(
                ChunkTarget(uuid.uuid4(), 0, 4), body_of(b"abcde", b"never read", read=read)
            )
        assert read == [5]

    async def test_a_chunk_whose_body_fails_leaves_nothing(self, under_test: StorageUnderTest) -> None:
        with pytest.raises(BodyFailed):
            await under_test.storage.write_chunk(
                ChunkTarget(uuid.uuid4(), 0, 4), body_of(b"ab", then_fail=True)
            )
        assert under_test.entries() == []

    async def test_chunks_merge_in_order_and_are_removed_per_session(
        self, under_test: StorageUnderTest
    ) -> None:
        session, other = uuid.uuid4(), uuid.uuid4()
        storage = under_test.storage
        for index, data in ((1, b"22"), (0, b"old"), (0, b"11"), (2, b"3")):
            await storage.write_chunk(ChunkTarget(session, index, len(data)), body_of(data))
        await storage.write_chunk(ChunkTarget(other, 0, 1), body_of(b"x"))
        key = source_key(uuid.uuid4())
        merged = await storage.merge_chunks(session, 3, key)
        assert (merged.size_bytes, merged.sha256) == (5, sha256(b"11223"))
        await storage.remove_chunks(session)
        assert [storage.has_chunk(session, i) for i in range(3)] == [False, False, False]
        assert storage.has_chunk(other, 0) and storage.has_file(key)

    async def test_work_files_are_stored_as_outputs_and_listed_per_attempt(
        self, under_test: StorageUnderTest
    ) -> None:
        storage = under_test.storage
        job, token, material = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        name = work_folder_name(job, token)
        work = storage.work_dir(name)
        under_test.write_work_file(work / "cover.jpg", b"jpeg")
        storage.work_dir("not-an-attempt")
        assert storage.work_folders() == [AttemptFolder(f"work/{name}", token, None)]
        key = output_key(material, token, "cover.jpg")
        stored = await storage.put_file(work / "cover.jpg", key)
        assert (stored.key, stored.size_bytes, stored.sha256) == (key, 4, sha256(b"jpeg"))
        folder = AttemptFolder(f"outputs/{material}/{token}", token, material)
        assert storage.output_folders() == [folder]
        assert storage.output_folders([material]) == [folder]
        assert storage.output_folders([uuid.uuid4()]) == []
        await storage.remove_work_dir(name)
        assert storage.work_folders() == []
        assert storage.has_file(key)
        assert under_test.entries() == [key]

    async def test_an_attempt_folder_is_removed_and_a_source_never(
        self, under_test: StorageUnderTest
    ) -> None:
        storage = under_test.storage
        material, dead, kept = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        work = storage.work_dir(work_folder_name(uuid.uuid4(), dead))
        under_test.write_work_file(work / "preview.mp4", b"partial")
        for token in (dead, kept):
            await storage.write_stream(output_key(material, token, "cover.jpg"), body_of(b"jpeg"))
        source = source_key(material)
        await storage.write_stream(source, body_of(b"source"))
        for folder in [*storage.work_folders(), *storage.output_folders([material])]:
            if folder.token == dead:
                await storage.remove_attempt_folder(folder)
        assert storage.work_folders() == []
        assert storage.output_folders() == [AttemptFolder(f"outputs/{material}/{kept}", kept, material)]
        with pytest.raises(ValueError, match="not an attempt folder"):
            await storage.remove_attempt_folder(AttemptFolder(f"sources/{material}", dead, material))
        assert sorted(under_test.entries()) == sorted([output_key(material, kept, "cover.jpg"), source])

    @pytest.mark.parametrize("key", ["../outside", "sources/../../outside", "/etc/passwd"])
    def test_a_key_outside_the_storage_is_refused(self, under_test: StorageUnderTest, key: str) -> None:
        with pytest.raises(ValueError, match="escapes the storage root"):
            under_test.storage.local_path(key)


class TestLocalStorage(StorageContract):
    @pytest.fixture
    def under_test(self, tmp_path: Path) -> StorageUnderTest:
        storage = LocalStorage(tmp_path / "storage")

        def entries() -> list[str]:
            return sorted(str(p.relative_to(storage.root)) for p in storage.root.rglob("*") if p.is_file())

        return StorageUnderTest(storage, entries, write_file)


class TestMemoryStorage(StorageContract):
    @pytest.fixture
    def under_test(self, tmp_path: Path) -> StorageUnderTest:
        storage = MemoryStorage()
        return StorageUnderTest(storage, lambda: sorted(storage.files), storage.write_local)
