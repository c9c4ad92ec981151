#!/bin/sh
# Builds the example image hivelet/web:local (FROM scratch + a static Go
# binary; no registry involved) and the static directory web.hcl mounts.
set -eu
cd "$(dirname "$0")"
CGO_ENABLED=0 go build -o web .
DOCKER_BUILDKIT=0 docker build -q -t hivelet/web:local .
rm -f web
if [ ! -d /srv/web/static ]; then
  mkdir -p /srv/web/static && echo "hello" > /srv/web/static/index.txt
fi
echo "built hivelet/web:local"
