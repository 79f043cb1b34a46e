#!/usr/bin/env bash
# Install Debian's chromium for the browser tests (Playwright drives it; Playwright's own browser
# download is never used). Idempotent: does nothing when /usr/bin/chromium is already there.
set -euo pipefail

if [[ -x /usr/bin/chromium ]]; then
    echo "install-browser.sh: /usr/bin/chromium already installed"
    exit 0
fi

sudo=""
if [[ "$(id -u)" -ne 0 ]]; then
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq chromium >/dev/null
/usr/bin/chromium --version 2>/dev/null
