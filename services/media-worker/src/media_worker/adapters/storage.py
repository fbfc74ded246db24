"""`LocalStorage`: the storage port (sources, chunks and outputs) on a local folder.

Keys are relative paths made by this service only (`sources/<material>/source`, never caller input).
Every write goes to a unique `*.partial` file next to its target, is fsynced, then renamed into place, so a
reader never sees half a file and concurrent attempts never share a file. A failed write -- whatever ended
its body: a client disconnect, a read deadline, a cancellation, a refused size -- removes its own partial file
at once, and a failed `write_stream` also removes its key's folder when that is left empty (keys of
`write_stream` are unique per attempt, so no other writer shares it). Temporary folders of transcode attempts
(`work/<job>-<token>/`, `outputs/<material>/<token>/`) are listed and removed one attempt at a time
(`AttemptFolder`). Nothing here deletes a source: there is no operation that could.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path

from media_worker.domain.errors import InvalidUpload
from media_worker.domain.keys import OUTPUTS_FOLDER, WORK_FOLDER, canonical_uuid, work_folder_token
from media_worker.service_layer.ports import AttemptFolder, ChunkTarget, StoredFile

__all__ = ["COPY_BUFFER_BYTES", "FreeSpaceProbe", "LocalStorage"]

COPY_BUFFER_BYTES = 1024 * 1024

FreeSpaceProbe = Callable[[], int | None]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


class LocalStorage:
    """Files under `root`. `free_space_probe` returns free bytes or None when unknown (default: statvfs)."""

    def __init__(self, root: Path, free_space_probe: FreeSpaceProbe | None = None) -> None:
        self.root = root.resolve()
        self._probe = free_space_probe or self._disk_free

    def _disk_free(self) -> int | None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            return shutil.disk_usage(self.root).free
        except OSError:
            return None

    def free_bytes(self) -> int | None:
        return self._probe()

    def local_path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root):
            raise ValueError("storage key escapes the storage root")
        return path

    def work_dir(self, name: str) -> Path:
        path = self.local_path(f"{WORK_FOLDER}/{name}")
        path.mkdir(parents=True, exist_ok=True)
        return path

    async def remove_work_dir(self, name: str) -> None:
        await asyncio.to_thread(shutil.rmtree, self.local_path(f"{WORK_FOLDER}/{name}"), True)

    def has_file(self, key: str) -> bool:
        return self.local_path(key).is_file()

    def _subfolders(self, key: str) -> list[str]:
        try:
            return sorted(entry.name for entry in self.local_path(key).iterdir() if entry.is_dir())
        except FileNotFoundError:
            return []

    def work_folders(self) -> list[AttemptFolder]:
        """Every `work/<job>-<token>/` folder (other names are not ours and are left alone)."""
        folders = []
        for name in self._subfolders(WORK_FOLDER):
            token = work_folder_token(name)
            if token is not None:
                folders.append(AttemptFolder(f"{WORK_FOLDER}/{name}", token, None))
        return folders

    def output_folders(self, material_ids: Iterable[uuid.UUID] | None = None) -> list[AttemptFolder]:
        """The `outputs/<material>/<token>/` folders of `material_ids` (None: of every material)."""
        if material_ids is None:
            materials = [m for m in map(canonical_uuid, self._subfolders(OUTPUTS_FOLDER)) if m is not None]
        else:
            materials = list(material_ids)
        folders = []
        for material in materials:
            for name in self._subfolders(f"{OUTPUTS_FOLDER}/{material}"):
                token = canonical_uuid(name)
                if token is not None:
                    folders.append(AttemptFolder(f"{OUTPUTS_FOLDER}/{material}/{name}", token, material))
        return folders

    async def remove_attempt_folder(self, folder: AttemptFolder) -> None:
        """Remove one attempt's folder; only `work/` and `outputs/` folders qualify (never a source). An
        outputs folder's material folder goes too when left empty, so the caller of an outputs folder must
        be the material's only executor (hold its lock)."""
        if folder.key.split("/", 1)[0] not in (WORK_FOLDER, OUTPUTS_FOLDER):
            raise ValueError("not an attempt folder")
        path = self.local_path(folder.key)
        await asyncio.to_thread(shutil.rmtree, path, True)
        if folder.material_id is not None:
            with contextlib.suppress(OSError):  # another attempt's outputs are still there
                path.parent.rmdir()

    def _chunk_path(self, session_id: uuid.UUID, index: int) -> Path:
        return self.local_path(f"chunks/{session_id}/{index:06d}.chunk")

    def has_chunk(self, session_id: uuid.UUID, index: int) -> bool:
        return self._chunk_path(session_id, index).is_file()

    async def _write_partial(
        self, target: Path, body: AsyncIterator[bytes], limit_bytes: int | None = None
    ) -> tuple[Path, int, str]:
        """Stream `body` into a unique partial file next to `target`, fsynced; the caller renames it."""
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.{uuid.uuid4().hex}.partial")
        digest = hashlib.sha256()
        size = 0
        try:
            with partial.open("xb") as out:
                async for piece in body:
                    size += len(piece)
                    if limit_bytes is not None and size > limit_bytes:
                        raise InvalidUpload("chunk_size_mismatch")
                    digest.update(piece)
                    out.write(piece)
                out.flush()
                await asyncio.to_thread(os.fsync, out.fileno())
        except BaseException:
            _unlink_quietly(partial)
            raise
        return partial, size, digest.hexdigest()

    async def _commit(self, partial: Path, target: Path) -> None:
        os.replace(partial, target)
        await asyncio.to_thread(_fsync_dir, target.parent)

    async def write_chunk(self, chunk: ChunkTarget, body: AsyncIterator[bytes]) -> None:
        target = self._chunk_path(chunk.session_id, chunk.index)
        partial, size, sha = await self._write_partial(target, body, limit_bytes=chunk.size_bytes)
        try:
            if size != chunk.size_bytes:
                raise InvalidUpload("chunk_size_mismatch")
            if chunk.sha256 is not None and sha != chunk.sha256.lower():
                raise InvalidUpload("chunk_checksum_mismatch")
            await self._commit(partial, target)
        finally:
            _unlink_quietly(partial)

    async def merge_chunks(self, session_id: uuid.UUID, chunk_count: int, key: str) -> StoredFile:
        paths = [self._chunk_path(session_id, i) for i in range(chunk_count)]

        async def pieces() -> AsyncIterator[bytes]:
            for path in paths:
                with path.open("rb") as chunk:
                    while piece := await asyncio.to_thread(chunk.read, COPY_BUFFER_BYTES):
                        yield piece

        return await self.write_stream(key, pieces())

    async def remove_chunks(self, session_id: uuid.UUID) -> None:
        await asyncio.to_thread(shutil.rmtree, self.local_path(f"chunks/{session_id}"), True)

    async def write_stream(self, key: str, body: AsyncIterator[bytes]) -> StoredFile:
        target = self.local_path(key)
        try:
            partial, size, sha = await self._write_partial(target, body)
        except BaseException:
            with contextlib.suppress(OSError):  # not empty (or already gone): keep it
                target.parent.rmdir()
            raise
        try:
            await self._commit(partial, target)
        finally:
            _unlink_quietly(partial)
        return StoredFile(key, size, sha)

    async def put_file(self, local_file: Path, key: str) -> StoredFile:
        async def pieces() -> AsyncIterator[bytes]:
            with local_file.open("rb") as source:
                while piece := await asyncio.to_thread(source.read, COPY_BUFFER_BYTES):
                    yield piece

        return await self.write_stream(key, pieces())
