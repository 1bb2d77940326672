# The approval service as a container image: the `countersign` binary alone, run as a non-root user.
#
#   docker build -t countersign .
#   docker run --rm -p 8080:8080 -v countersign-data:/data \
#       -v "$PWD/countersign.toml:/etc/countersign.toml:ro" countersign \
#       serve --listen 0.0.0.0:8080 --data-dir /data --config /etc/countersign.toml
#
# Two stages. A Rust toolchain builds the release binary; the runtime is distroless: glibc and
# libgcc (all the binary links: `ldd target/release/countersign`), no shell, no package manager.
# The service key, the database and the audit log live in /data (a volume, owned by the runtime
# user). Give a config whose `origins` are the address approvers open: a container's listen
# address (0.0.0.0) is never one (docs/OPERATIONS.md).
#
# The images are arguments so a mirror can stand in for the registries: .ci/steps/container.sh
# builds this file on a machine that reaches no registry, with a runtime base made by mmdebstrap
# and a binary built outside (BINARY_STAGE).
ARG RUST_IMAGE=docker.io/library/rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot
# The stage that holds /out: `build` below, or an image with a binary built elsewhere.
ARG BINARY_STAGE=build

FROM ${RUST_IMAGE} AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p countersign-cli --bin countersign \
    && install -D -m 0755 target/release/countersign /out/countersign \
    && install -d -m 0700 /out/data

FROM ${BINARY_STAGE} AS binary

FROM ${RUNTIME_IMAGE} AS runtime
COPY --from=binary /out/countersign /usr/local/bin/countersign
# An empty directory owned by the runtime user: a new volume mounted here inherits it.
COPY --from=binary --chown=65532:65532 /out/data /data
# distroless's `nonroot`; numeric, so the runtime needs no /etc/passwd entry.
USER 65532:65532
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/countersign"]
CMD ["serve", "--listen", "0.0.0.0:8080", "--data-dir", "/data"]
