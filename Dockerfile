# totoc serving image. Multi-stage: the builder compiles totoc and runs the same scripts CI runs
# (scripts/fetch-onnxruntime.sh, and with BAKE_CONFIG scripts/build-artifacts.sh); the runtime stage is a slim
# Debian with the ONNX Runtime library, the totoc binary and, optionally, a baked engine, run as a non-root user.
#
#   docker build -t totoc .                                   # engine mounted at /models/engine at run time
#   docker run -p 8080:8080 -p 8081:8081 -v $PWD/engine:/models/engine:ro totoc
#   docker build --build-arg BAKE_CONFIG=configs/tiny.yaml -t totoc:tiny .   # engine baked into the image
#
# No container runtime exists on the machines totoc is developed on: what this file runs is tested through the
# scripts it calls (tests/integration/deploy.rs) and its arguments against the real CLI (src/deploy_check.rs).
# The workspace's rust-version (Cargo.toml); src/deploy_check.rs keeps them equal.
ARG RUST_VERSION=1.92
FROM rust:${RUST_VERSION}-bookworm AS builder
ARG BAKE_CONFIG=""
ARG CHECKPOINT_ROOT=checkpoints
RUN apt-get update && apt-get install -y --no-install-recommends python3-pip && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked && install -m 0755 target/release/totoc /usr/local/bin/totoc
RUN TOTOC_ORT_DIR=/opt/onnxruntime scripts/fetch-onnxruntime.sh
# Bake an engine: the checkpoint the config names must be in the build context (repository or CHECKPOINT_ROOT).
RUN mkdir -p /models/engine && if [ -n "$BAKE_CONFIG" ]; then \
      TOTOC_ORT_LIB=/opt/onnxruntime/libonnxruntime.so scripts/build-artifacts.sh --config "$BAKE_CONFIG" \
        --checkpoint-root "$CHECKPOINT_ROOT" --out /artifacts --target cpu --totoc /usr/local/bin/totoc \
      && cp -a "/artifacts/$(basename "$BAKE_CONFIG" .yaml)/engine-cpu/." /models/engine/; \
    fi

FROM debian:bookworm-slim AS runtime
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates libgomp1 \
    && rm -rf /var/lib/apt/lists/* && useradd --system --uid 10001 --no-create-home totoc
COPY --from=builder /opt/onnxruntime /opt/onnxruntime
COPY --from=builder /usr/local/bin/totoc /usr/local/bin/totoc
COPY --from=builder --chown=10001:10001 /models /models
ENV TOTOC_ORT_LIB=/opt/onnxruntime/libonnxruntime.so
USER 10001
EXPOSE 8080 8081
ENTRYPOINT ["totoc"]
CMD ["serve", "--engine", "/models/engine", "--addr", "0.0.0.0:8080", "--grpc-addr", "0.0.0.0:8081"]
