# syntax=docker/dockerfile:1
#
# The trainyard image: `trainyard serve` as the Helm chart and the plain
# manifests run it (deploy/helm/trainyard, deploy/manifests).
#
#   docker build -t trainyard:0.1.0 .                # the runtime image
#   docker build --target check .                    # also run CI's checks
#
# The build stage makes the same --locked release build as CI (.ci/run
# builds and runs `cargo run --locked --release --bin trainyard`). The
# `check` stage runs .ci/run's toolchain-only checks verbatim: formatting,
# clippy, and the README's test command; tests that need kubectl,
# kubernetes-validate, the Helm library or ../shared data print SKIPPED
# there, as .ci/run explains. tests/tests/deploy.rs keeps these commands in
# step with .ci/run.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin trainyard \
    && cp target/release/trainyard /trainyard

FROM build AS check
RUN rustup component add rustfmt clippy
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo fmt --all --check \
    && cargo clippy --workspace --all-targets --locked -- -D warnings \
    && cargo test --workspace --locked

# glibc and libgcc only, no shell, no package manager; user 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="trainyard" \
      org.opencontainers.image.description="Trainyard: a gang-aware batch scheduler for GPU clusters on Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /trainyard /trainyard
USER 65532:65532
# /metrics, /healthz and /readyz (service.httpAddress).
EXPOSE 8080
ENTRYPOINT ["/trainyard"]
CMD ["serve", "--config", "/etc/trainyard/config.yaml"]
