#!/usr/bin/env bash
# redis-server from Debian, for tests/test_redis_database.py: `ortmem verify --database redis://...` keeps a
# campaign's failures in Hypothesis' Redis example database; the test starts its own server on a free
# loopback port and stops it. Idempotent: nothing to do when redis-server is already installed.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! command -v redis-server >/dev/null; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends redis-server
fi
redis-server --version
