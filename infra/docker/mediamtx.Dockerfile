# syntax=docker/dockerfile:1
# MediaMTX with the project's config (Control API only) and a healthcheck. Build from the repository root:
#   docker build -f infra/docker/mediamtx.Dockerfile --build-arg MEDIAMTX_IMAGE_TAG=1.20.1 -t yovision/mediamtx .
# The official image is FROM scratch (no shell, no HTTP client), so its static binary is copied onto alpine,
# whose busybox wget runs the healthcheck. MEDIAMTX_IMAGE_TAG is infra/versions.env's MEDIAMTX_VERSION
# without the leading "v" (infra/docker/make-secrets.sh writes it to .local/docker/compose.env).
ARG MEDIAMTX_IMAGE_TAG=1.20.1
FROM bluenviron/mediamtx:${MEDIAMTX_IMAGE_TAG} AS mediamtx

FROM alpine:3.24
RUN addgroup -S -g 10002 mediamtx && adduser -S -D -H -u 10002 -G mediamtx -h /var/lib/mediamtx mediamtx \
 && mkdir -p /var/lib/mediamtx && chown mediamtx:mediamtx /var/lib/mediamtx
COPY --from=mediamtx /mediamtx /usr/local/bin/mediamtx
COPY infra/docker/mediamtx.yml /etc/mediamtx/mediamtx.yml
WORKDIR /var/lib/mediamtx
USER 10002:10002
EXPOSE 9997
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=6 \
  CMD wget -q -O /dev/null http://127.0.0.1:9997/v3/paths/list || exit 1
ENTRYPOINT ["/usr/local/bin/mediamtx", "/etc/mediamtx/mediamtx.yml"]
