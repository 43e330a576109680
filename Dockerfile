# syntax=docker/dockerfile:1
#
# The Sunset image: a static sunset binary on distroless, run as the nonroot
# user. hack/mkimage builds the same image without a container engine;
# test/image_test.go checks that the final stage below agrees with it.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) -t sunset .

# The builder runs on the build host's platform and cross-compiles, which is
# quick and needs no emulation for other architectures.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
ARG REVISION=
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=$VERSION -X main.revision=$REVISION" \
      -o /out/sunset ./cmd/sunset \
    && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=
LABEL org.opencontainers.image.source="https://github.com/kube-sunset/sunset" \
      org.opencontainers.image.title="sunset" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION"
COPY --from=build /out/sunset /usr/local/bin/sunset
# The data directory must exist and belong to the nonroot user before a
# volume is mounted there, so that a fresh named volume inherits the owner.
COPY --from=build --chown=65532:65532 /out/data /var/lib/sunset
ENV SUNSET_DATA_DIR=/var/lib/sunset
WORKDIR /var/lib/sunset
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/sunset", "serve"]
