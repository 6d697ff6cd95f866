#!/usr/bin/env bash
# Browser tooling for the docs and viewer tests, from the project's own files:
# Debian's chromium (+ chromedriver) for mermaid-cli and the timeline viewer's
# browser test, and the npm packages pinned in package-lock.json. No browser is
# downloaded by npm (PUPPETEER_SKIP_DOWNLOAD) or by Playwright: both drive
# /usr/bin/chromium (tools/puppeteer-config.json, tests/test_view_browser.py).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver
fi
PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund
