#!/bin/sh
# Builds the fleet example's image (examples/fleet/README.md): the static
# binaries hivelet (this repository) and nats-server (the
# github.com/nats-io/nats-server/v2 module pinned in go.mod), copied into one
# FROM scratch image. Nothing is pulled: no base image, no registry.
#
#   examples/fleet/build.sh            # image hivelet/fleet:local
#   IMAGE=my/fleet:dev examples/fleet/build.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
image=${IMAGE:-hivelet/fleet:local}
cd "$here/../.."
mkdir -p "$here/bin"
export CGO_ENABLED=0 GOOS=linux
go build -trimpath -ldflags='-s -w' -o "$here/bin/hivelet" ./cmd/hivelet
go build -trimpath -ldflags='-s -w' -o "$here/bin/nats-server" github.com/nats-io/nats-server/v2
# The classic builder: it needs no BuildKit component, and FROM scratch pulls
# nothing.
DOCKER_BUILDKIT=0 docker build -q -t "$image" "$here" >/dev/null
echo "built $image ($here/bin/hivelet, $here/bin/nats-server)"
