# syntax=docker/dockerfile:1
#
# wazoo from source, in two stages: a Rust toolchain builds the binary (with
# the built-in recipe modules, which need the wasm32-unknown-unknown
# target), and a slim Debian image runs it as an unprivileged user.
#
#   docker build -t wazoo .
#   docker run -d --name wazoo -p 2181:2181 \
#       -v "$PWD/zoo.cfg:/conf/zoo.cfg:ro" -v wazoo-data:/data wazoo
#
# As the official `zookeeper` image: the configuration is /conf/zoo.cfg
# (mount your own over the default one), snapshots go to /data and the
# transaction log to /datalog, the user is uid 1000. See docs/OPERATIONS.md,
# "Running in a container".

ARG RUST_VERSION=1.95.0
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS build
ARG RUST_VERSION
WORKDIR /src
# The image's compiler (RUSTUP_TOOLCHAIN overrides the toolchain file's
# `stable`, which would otherwise fetch the newest); the wasm32 target is
# added explicitly so the build never falls back to a binary without the
# built-in recipes.
ENV RUSTUP_TOOLCHAIN=${RUST_VERSION}
COPY rust-toolchain.toml ./
RUN cargo --version && rustup target add wasm32-unknown-unknown
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p wazoo --bin wazoo \
    && install -m 0755 target/release/wazoo /usr/local/bin/wazoo \
    && /usr/local/bin/wazoo --version

FROM debian:${DEBIAN_RELEASE}-slim
RUN groupadd --system --gid 1000 wazoo \
    && useradd --system --uid 1000 --gid wazoo --home-dir /data \
        --no-create-home --shell /usr/sbin/nologin wazoo \
    && mkdir -p /conf /data /datalog \
    && chown wazoo:wazoo /data /datalog
COPY --from=build /usr/local/bin/wazoo /usr/local/bin/wazoo
COPY packaging/docker/zoo.cfg /conf/zoo.cfg
USER wazoo:wazoo
WORKDIR /data
VOLUME ["/data", "/datalog"]
# clients, quorum, election (accepted, unused), Prometheus metrics
EXPOSE 2181 2888 3888 7000 8080
ENV WAZOO_LOG=info
# wazoo stops cleanly on SIGTERM (`docker stop`): it closes the clients
# and the transaction log.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/wazoo"]
CMD ["serve", "--config", "/conf/zoo.cfg"]
