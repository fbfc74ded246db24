"""The per-service Dockerfiles of infra/docker/, read as text: build-stage COPY sources, the final stage's
ENV, USER, HEALTHCHECK and ENTRYPOINT, and the `uv sync` that installs the service."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from tests.deploy.chart import REPO_ROOT

__all__ = ["Dockerfile", "dockerfile"]

DOCKER_DIR = REPO_ROOT / "infra" / "docker"


@dataclass(frozen=True)
class Dockerfile:
    path: Path
    stages: tuple[tuple[tuple[str, str], ...], ...]  # per FROM: (instruction, arguments)

    def instructions(self, stage: int, name: str) -> list[str]:
        return [args for instruction, args in self.stages[stage] if instruction == name]

    @property
    def build_stage(self) -> int:
        """The stage `FROM ... AS build`, which installs the service with uv."""
        (index,) = [i for i, stage in enumerate(self.stages) if stage[0][1].endswith(" AS build")]
        return index

    @property
    def context_sources(self) -> list[str]:
        """Every path any stage copies from the build context (not from another stage)."""
        sources = []
        for stage in range(len(self.stages)):
            for args in self.instructions(stage, "COPY"):
                if not args.startswith("--from"):
                    sources += args.split()[:-1]
        return sources

    @property
    def final_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for args in self.instructions(-1, "ENV"):
            for token in shlex.split(args):
                key, _, value = token.partition("=")
                env[key] = value
        return env

    @property
    def build_copies(self) -> list[tuple[str, str]]:
        """(source, destination) of the build stage's COPY instructions (the build context it uses)."""
        copies = []
        for args in self.instructions(self.build_stage, "COPY"):
            *sources, destination = args.split()
            copies += [(source, destination) for source in sources if not source.startswith("--")]
        return copies

    @property
    def final_uv_sync(self) -> list[str]:
        (command,) = [
            a for a in self.instructions(self.build_stage, "RUN") if "uv sync" in a and "--no-editable" in a
        ]
        return shlex.split(command)


def _logical_lines(text: str) -> list[str]:
    lines, current = [], ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    return lines


def dockerfile(service: str) -> Dockerfile:
    path = DOCKER_DIR / f"{service}.Dockerfile"
    stages: list[list[tuple[str, str]]] = []
    for line in _logical_lines(path.read_text()):
        match = re.match(r"([A-Z]+)\s+(.*)", line)
        assert match is not None, line
        instruction, args = match.groups()
        if instruction == "FROM":
            stages.append([])
        stages[-1].append((instruction, args))
    return Dockerfile(path, tuple(tuple(stage) for stage in stages))
