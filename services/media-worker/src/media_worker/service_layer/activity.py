"""What this process is doing right now (uploads, merges, jobs) and whether it is draining."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from media_worker.domain.drain import ActiveWork
from media_worker.domain.errors import Draining

__all__ = ["Activity"]


@dataclass
class Activity:
    uploads: int = 0
    merges: int = 0
    jobs: int = 0
    draining: bool = False

    def snapshot(self) -> ActiveWork:
        return ActiveWork(jobs=self.jobs, uploads=self.uploads, merges=self.merges)

    def refuse_if_draining(self) -> None:
        if self.draining:
            raise Draining()

    @contextlib.contextmanager
    def upload(self) -> Iterator[None]:
        self.refuse_if_draining()
        self.uploads += 1
        try:
            yield
        finally:
            self.uploads -= 1

    @contextlib.contextmanager
    def merge(self) -> Iterator[None]:
        self.refuse_if_draining()
        self.merges += 1
        try:
            yield
        finally:
            self.merges -= 1

    @contextlib.contextmanager
    def job(self) -> Iterator[None]:
        self.jobs += 1
        try:
            yield
        finally:
            self.jobs -= 1
