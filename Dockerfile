# syntax=docker/dockerfile:1
#
# seedd container image: a Radicle seed node (`seedd`) and its admin CLI (`seedctl`).
#
#   docker build -t seedd:0.1.0 .
#   docker run -d --name seedd --read-only --tmpfs /tmp -v seedd-data:/var/lib/seedd \
#     -p 8776:8776 -p 8080:8080 -p 127.0.0.1:9776:9776 seedd:0.1.0
#   docker exec seedd seedd id                          # the node id (z6Mk…)
#   docker stop -t 40 seedd                             # seedd drains clones for 25 s
#
# Two stages: a pinned official Rust builder and a small Debian runtime. CI cannot pull the
# Rust image, so it builds the same runtime stage from host-built binaries with
# docker/Dockerfile.prebuilt; everything from "FROM debian:bookworm-slim AS runtime" down must
# stay identical in both files except the one `COPY … /usr/local/bin/` line
# (scripts/check-packaging.sh checks that).

FROM rust:1.95-bookworm AS builder
# RocksDB's bindings are generated with bindgen, which needs libclang.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends libclang-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The cache mounts keep the crates.io downloads and the RocksDB build between image builds.
# Debug info is stripped (symbols stay, so backtraces still name functions).
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p seedd -p seedctl \
 && install -d /out \
 && objcopy --strip-debug target/release/seedd /out/seedd \
 && objcopy --strip-debug target/release/seedctl /out/seedctl

FROM debian:bookworm-slim AS runtime
# git: seedd spawns `git upload-pack` for every clone (and `git fetch` to replicate).
# libstdc++6: RocksDB. tini (PID 1) forwards SIGTERM to seedd only (seedd then drains in-flight
# clones and ends its git children itself) and reaps orphaned git processes. curl: the
# HEALTHCHECK. Versions come from the Debian release and its security updates (not pinned).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl git libstdc++6 tini \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 seedd \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
      --home-dir /var/lib/seedd --shell /usr/sbin/nologin seedd \
 && install -d -o 10001 -g 10001 -m 0700 /var/lib/seedd \
 && install -d -m 0755 /etc/seedd
COPY docker/seedd.toml /etc/seedd/seedd.toml
COPY --from=builder /out/seedd /out/seedctl /usr/local/bin/
# SEEDD_CONFIG is read by `seedd run`, `seedd id` and `seedd config print`. Single keys are
# overridden with SEEDD_<SECTION>__<KEY> (these win over the file); none are set here so that
# a mounted config file is never silently overridden by the image.
ENV SEEDD_CONFIG=/etc/seedd/seedd.toml
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="seedd" \
      org.opencontainers.image.description="Radicle seed node: Radicle p2p, anonymous git clone over HTTP(S), admin API" \
      org.opencontainers.image.licenses="MIT OR Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="docker.io/library/debian:bookworm-slim"
# Everything seedd writes: keys, storage, RocksDB index, git's empty HOME, the admin token.
# The root filesystem can be read-only (`--read-only --tmpfs /tmp`).
VOLUME ["/var/lib/seedd"]
WORKDIR /var/lib/seedd
USER 10001:10001
# 8776 Radicle p2p, 8080 git over HTTP(S), 9776 admin (/metrics, /healthz, /readyz, /api/v1).
EXPOSE 8776 8080 9776
# Follows the admin port when SEEDD_ADMIN__LISTEN is set (e.g. 127.0.0.1:19776).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["/bin/sh", "-c", "a=${SEEDD_ADMIN__LISTEN:-:9776}; curl -fsS -o /dev/null --max-time 4 http://127.0.0.1:${a##*:}/healthz || exit 1"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["seedd", "run"]
