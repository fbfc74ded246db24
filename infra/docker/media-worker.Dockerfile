# syntax=docker/dockerfile:1
# media-worker image. Build from the repository root:
#   docker build -f infra/docker/media-worker.Dockerfile -t yovision/media-worker:dev .
# Runs `media-worker serve` by default; `migrate` and `check-config` are the other commands.
# Configuration: MEDIA_* environment variables (docs/services/media-worker.md); secrets are files, never env values.

FROM python:3.11-slim AS build
ARG UV_VERSION=0.13.8
RUN pip install --no-cache-dir --disable-pip-version-check "uv==${UV_VERSION}"
ENV UV_PROJECT_ENVIRONMENT=/app/.venv \
    UV_PYTHON_DOWNLOADS=never \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy
WORKDIR /src
# Third-party dependencies first: this layer changes only with uv.lock.
COPY pyproject.toml uv.lock ./
COPY libs/platform/pyproject.toml libs/platform/
COPY services/media-worker/pyproject.toml services/media-worker/
RUN uv sync --frozen --no-dev --no-install-workspace --package media-worker
# Then the workspace packages, installed as wheels (not editable) so /src is not needed at run time.
COPY libs/platform libs/platform
COPY services/media-worker services/media-worker
RUN uv sync --frozen --no-dev --no-editable --package media-worker

FROM python:3.11-slim

# ffmpeg/ffprobe produce the cover image, the 720p preview and the 10 s clip (Debian package, like the native path).
RUN apt-get update \
 && apt-get install -y --no-install-recommends ffmpeg \
 && rm -rf /var/lib/apt/lists/*
# Storage (sources, chunks, outputs) lives in /var/lib/yovision/media: mount a volume there (compose.yaml's
# media-data). The capability file is per container, in /run/yovision (a tmpfs under compose).
RUN groupadd --system --gid 10001 yovision \
 && useradd --system --uid 10001 --gid yovision --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin yovision \
 && install -d -o 10001 -g 10001 -m 0700 /var/lib/yovision/media /run/yovision
COPY --from=build /app/.venv /app/.venv
# The Avro contracts: the serde reads them from $YOVISION_SCHEMAS_DIR.
COPY schemas /app/schemas
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    YOVISION_SCHEMAS_DIR=/app/schemas \
    MEDIA_HTTP_HOST=0.0.0.0 \
    MEDIA_HTTP_PORT=18085 \
    MEDIA_STORAGE_DIR=/var/lib/yovision/media \
    MEDIA_CAPABILITY_FILE=/run/yovision/media-worker.capability
WORKDIR /app
USER 10001:10001
EXPOSE 18085
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ['MEDIA_HTTP_PORT'] + '/healthz', timeout=3)"
ENTRYPOINT ["media-worker"]
CMD ["serve"]
