#!/usr/bin/env bash
# Prepare this machine for the HTML report test (tests/batch/test_report.py): Debian's chromium,
# run headless. Idempotent. It never fails the CI: when chromium cannot be installed it says why
# and exits 0, and the browser tests skip with a visible reason.
set -u

say() { echo "setup-chromium: $*"; }

for name in chromium chromium-browser google-chrome; do
    if command -v "$name" >/dev/null 2>&1; then
        say "$name already installed: $("$name" --version 2>/dev/null | head -n 1)"
        exit 0
    fi
done

say "installing chromium (log: /tmp/setup-chromium-apt.log)"
if { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } \
    >/tmp/setup-chromium-apt.log 2>&1; then
    say "installed: $(chromium --version 2>/dev/null | head -n 1)"
else
    say "apt-get install chromium failed (see /tmp/setup-chromium-apt.log); the HTML rendering tests will skip"
fi
exit 0
