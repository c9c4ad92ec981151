#!/bin/sh
# Builds the example image hivelet/web:local (FROM scratch + a static Go
# binary; no registry involved). Needs no root: only Docker access (the
# file it serves is a template of web.hcl, rendered by the agent).
set -eu
cd "$(dirname "$0")"
CGO_ENABLED=0 go build -o web .
DOCKER_BUILDKIT=0 docker build -q -t hivelet/web:local .
rm -f web
echo "built hivelet/web:local"
