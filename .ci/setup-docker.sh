#!/usr/bin/env bash
# Prepare this machine for the sandbox tests: Docker's daemon (for the docker backend),
# debootstrap (to build the small test image: no registry can be reached here) and bubblewrap
# (the local backend's mount and network namespaces). Idempotent. It never fails the CI: when
# something cannot be set up it says why and exits 0, and the tests that need it skip with a
# visible reason.
set -u

say() { echo "setup-docker: $*"; }

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
if ((${#missing[@]})); then
    say "installing ${missing[*]}"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } \
        >/tmp/setup-docker-apt.log 2>&1; then
        say "apt-get install ${missing[*]} failed (log: /tmp/setup-docker-apt.log); the tests that need them will skip"
    fi
fi

command -v bwrap >/dev/null 2>&1 && say "bubblewrap: $(bwrap --version)" \
    || say "bubblewrap missing: the local sandbox runs without mount/network namespaces"

if docker info >/dev/null 2>&1; then
    say "docker daemon already running"
    exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
    say "dockerd is not installed; docker tests will skip"
    exit 0
fi

say "starting dockerd (log: /tmp/dockerd.log)"
nohup dockerd >/tmp/dockerd.log 2>&1 </dev/null &
for _ in $(seq 1 60); do
    if docker info >/dev/null 2>&1; then
        say "docker daemon is up ($(docker version --format '{{.Server.Version}}' 2>/dev/null))"
        exit 0
    fi
    sleep 1
done
say "dockerd did not answer within 60 s; last lines of /tmp/dockerd.log:"
tail -n 20 /tmp/dockerd.log 2>/dev/null | sed 's/^/    /'
say "docker tests will skip"
exit 0
