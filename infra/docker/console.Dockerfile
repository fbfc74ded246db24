# syntax=docker/dockerfile:1
# console image. Build from the repository root:
#   docker build -f infra/docker/console.Dockerfile -t yovision/console:dev .
# Runs `console serve` by default (`check-config` validates; `migrate` is a no-op: no database).
# Configuration: CONSOLE_* environment variables (docs/services/console.md); secrets are files, never env values.
# It calls the five services over HTTPS (plain http only on loopback): see docs/runbooks/deploying-to-kubernetes.md.

# The front-end assets it serves itself (htmx), at the versions of package-lock.json; no dev dependency.
FROM node:22-slim AS assets
WORKDIR /src
COPY services/console/package.json services/console/package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --loglevel=error

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
COPY services/console/pyproject.toml services/console/
RUN uv sync --frozen --no-dev --no-install-workspace --package console
# Then the workspace packages, installed as wheels (not editable) so /src is not needed at run time.
COPY libs/platform libs/platform
COPY services/console services/console
RUN uv sync --frozen --no-dev --no-editable --package console

FROM python:3.11-slim
RUN groupadd --system --gid 10001 yovision \
 && useradd --system --uid 10001 --gid yovision --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin yovision
COPY --from=build /app/.venv /app/.venv
COPY --from=assets /src/node_modules /app/assets
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    CONSOLE_ASSETS_DIR=/app/assets \
    CONSOLE_HTTP_HOST=0.0.0.0 \
    CONSOLE_HTTP_PORT=18080
WORKDIR /app
USER 10001:10001
EXPOSE 18080
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ['CONSOLE_HTTP_PORT'] + '/healthz', timeout=3)"
ENTRYPOINT ["console"]
CMD ["serve"]
