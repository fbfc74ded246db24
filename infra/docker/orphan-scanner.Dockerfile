# syntax=docker/dockerfile:1
# orphan-scanner image. Build from the repository root:
#   docker build -f infra/docker/orphan-scanner.Dockerfile -t yovision/orphan-scanner:dev .
# Runs `orphan-scanner serve` by default; `migrate` and `check-config` are the other commands, and the
# operator CLI `sense-orphan report|apply` is on PATH (run it with the service's ORPHAN_* environment).
# Configuration: ORPHAN_* environment variables (docs/services/orphan-scanner.md); secrets are files, never env values.

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
COPY services/orphan-scanner/pyproject.toml services/orphan-scanner/
RUN uv sync --frozen --no-dev --no-install-workspace --package orphan-scanner
# Then the workspace packages, installed as wheels (not editable) so /src is not needed at run time.
COPY libs/platform libs/platform
COPY services/orphan-scanner services/orphan-scanner
RUN uv sync --frozen --no-dev --no-editable --package orphan-scanner

FROM python:3.11-slim
RUN groupadd --system --gid 10001 yovision \
 && useradd --system --uid 10001 --gid yovision --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin yovision
COPY --from=build /app/.venv /app/.venv
# The Avro contracts: the serde reads them from $YOVISION_SCHEMAS_DIR.
COPY schemas /app/schemas
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    YOVISION_SCHEMAS_DIR=/app/schemas \
    ORPHAN_HTTP_HOST=0.0.0.0 \
    ORPHAN_HTTP_PORT=18082
WORKDIR /app
USER 10001:10001
EXPOSE 18082
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ['ORPHAN_HTTP_PORT'] + '/healthz', timeout=3)"
ENTRYPOINT ["orphan-scanner"]
CMD ["serve"]
