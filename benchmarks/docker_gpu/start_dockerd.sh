#!/usr/bin/env bash
# Start a Docker daemon on a machine with root and no network (the lent GPU machines) from the
# Debian .debs fetch_debs.sh carried. Nothing is installed system-wide: the packages are unpacked
# (dpkg -x) under $DOCKER_PREFIX; dockerd runs with what a microVM allows (no iptables, no bridge,
# no userland proxy; cgroupfs) on the first storage driver that really runs a container (overlay2,
# else vfs), checked by running tini from a one-file image imported on the spot (nothing pulled).
# Idempotent: a daemon that already answers on the socket is kept. Ends with `docker info`.
#
# Usage: bash benchmarks/docker_gpu/start_dockerd.sh [DEBS_DIR]    (default: .gl/docker)
#        bash benchmarks/docker_gpu/start_dockerd.sh --stop        (stop the daemon it started)
# Then:  source "$DOCKER_PREFIX/env.sh"   (PATH to the carried docker CLI, DOCKER_HOST if not default)
#
# Environment (defaults): DOCKER_PREFIX (/opt/kernel-agent-docker), DOCKER_DATA_ROOT
# (/var/lib/docker), DOCKER_EXEC_ROOT (/var/run/docker), DOCKER_SOCK (/var/run/docker.sock),
# DOCKER_STORAGE_DRIVERS ("overlay2 vfs"), DOCKER_WAIT_S (60), DOCKERD_LOG ($DOCKER_PREFIX/dockerd.log).
# Exit status: 0 when a daemon answers and ran the probe container, 1 otherwise (the log's tail
# and what was tried are printed).
set -uo pipefail

prefix=${DOCKER_PREFIX:-/opt/kernel-agent-docker}
data_root=${DOCKER_DATA_ROOT:-/var/lib/docker}
exec_root=${DOCKER_EXEC_ROOT:-/var/run/docker}
sock=${DOCKER_SOCK:-/var/run/docker.sock}
drivers=${DOCKER_STORAGE_DRIVERS:-overlay2 vfs}
wait_s=${DOCKER_WAIT_S:-60}
log=${DOCKERD_LOG:-$prefix/dockerd.log}
root="$prefix/root"
pidfile="$exec_root/kernel-agent-dockerd.pid"
probe_image=kernel-agent-probe:tini

say() { echo "start_dockerd: $*"; }
die() {
    say "FAILED: $*"
    exit 1
}

stop() {
    if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        local pid
        pid=$(cat "$pidfile")
        say "stopping dockerd $pid"
        kill "$pid"
        for _ in $(seq 1 30); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 1
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$pidfile"
}

if [ "${1:-}" = "--stop" ]; then
    stop
    exit 0
fi
debs=${1:-.gl/docker}

[ "$(id -u)" = 0 ] || die "needs root (dockerd, mounts, cgroups)"
mkdir -p "$prefix" "$(dirname "$sock")" "$exec_root" "$data_root"
export DOCKER_HOST="unix://$sock"
export PATH="$root/usr/sbin:$root/usr/bin:$root/sbin:$root/bin:$PATH"

answers() { timeout 10 docker info >/dev/null 2>&1; }

# -- unpack the carried packages ------------------------------------------------------------------
unpack() {  # unpack DEB: into $root, with dpkg-deb or, without it, python's ar + tar readers
    if command -v dpkg-deb >/dev/null 2>&1; then
        dpkg-deb -x "$1" "$root"
    else
        python3 - "$1" "$root" <<'PY'
import io, sys, tarfile
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"!<arch>\n", "not a .deb"
pos = 8
while pos < len(data):
    name, size = data[pos:pos + 16].decode().strip().rstrip("/"), int(data[pos + 48:pos + 58])
    body = data[pos + 60:pos + 60 + size]
    if name.startswith("data.tar"):
        with tarfile.open(fileobj=io.BytesIO(body)) as tar:
            tar.extractall(sys.argv[2])
    pos += 60 + size + (size & 1)
PY
    fi
}

if ls "$debs"/*.deb >/dev/null 2>&1; then
    if [ ! -x "$root/usr/sbin/dockerd" ] || [ "$debs" -nt "$root/.unpacked" ]; then
        say "unpacking $(find "$debs" -maxdepth 1 -name '*.deb' | wc -l) packages from $debs into $root"
        mkdir -p "$root"
        for deb in "$debs"/*.deb; do unpack "$deb" || die "cannot unpack $deb"; done
        touch "$root/.unpacked"
    fi
elif ! command -v dockerd >/dev/null 2>&1; then
    die "no .debs in $debs and no dockerd here (run benchmarks/docker_gpu/fetch_debs.sh where apt has network, carry the folder)"
else
    say "no .debs in $debs: using this machine's own Docker"
fi
for tool in dockerd docker containerd containerd-shim-runc-v2 runc docker-init; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is missing after unpacking $debs"
done
say "using $(command -v dockerd) ($(dockerd --version 2>/dev/null || echo '?'))"

# Shared libraries the host lacks: only those, from the carried packages, through LD_LIBRARY_PATH.
fallback="$prefix/fallback-lib"
rm -rf "$fallback" && mkdir -p "$fallback"
missing=()
for tool in dockerd docker containerd containerd-shim-runc-v2 runc apparmor_parser; do
    exe=$(command -v "$tool") || continue
    while read -r lib; do
        found=$(find "$root/lib" "$root/usr/lib" -name "$lib" 2>/dev/null | head -n 1)
        if [ -n "$found" ]; then
            ln -sf "$found" "$fallback/$lib"
        else
            missing+=("$tool:$lib")
        fi
    done < <(ldd "$exe" 2>/dev/null | awk '/not found/ {print $1}')
done
if [ -n "$(ls -A "$fallback")" ]; then
    say "host lacks $(find "$fallback" -mindepth 1 -printf '%f '); using the carried ones"
    export LD_LIBRARY_PATH="$fallback${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
((${#missing[@]})) && die "shared libraries missing on this host and not carried: ${missing[*]}"

# -- what the kernel and the mounts allow ---------------------------------------------------------
if ! mountpoint -q /sys/fs/cgroup 2>/dev/null; then
    say "/sys/fs/cgroup is not mounted: mounting cgroup2"
    if ! { mkdir -p /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup; }; then
        say "cannot mount cgroup2 (dockerd will say what it needs)"
    fi
fi
if [ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then
    say "cgroup v2; controllers: $(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null)"
else
    say "cgroup v1: $(find /sys/fs/cgroup -mindepth 1 -maxdepth 1 -printf '%f ' 2>/dev/null)"
fi
if [ "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" = Y ]; then
    if [ ! -d /sys/kernel/security/apparmor ]; then
        mount -t securityfs securityfs /sys/kernel/security 2>/dev/null || true
    fi
    say "AppArmor is on; apparmor_parser: $(command -v apparmor_parser || echo MISSING)"
fi
say "filesystem of $data_root: $(stat -f -c %T "$data_root" 2>/dev/null)"

# -- start it -------------------------------------------------------------------------------------
probe_container() {  # a one-file image (static tini) run end to end: runc, cgroups, the driver
    local tini tmp
    tini=$(readlink -f "$(command -v docker-init)")
    tmp=$(mktemp -d)
    cp "$tini" "$tmp/tini"
    docker image inspect "$probe_image" >/dev/null 2>&1 \
        || tar -C "$tmp" -c tini | docker import - "$probe_image" >/dev/null || { rm -rf "$tmp"; return 1; }
    rm -rf "$tmp"
    timeout 60 docker run --rm --network none --read-only --cap-drop ALL \
        --security-opt no-new-privileges "$probe_image" /tini --version
}

if answers; then
    say "a daemon already answers on $sock"
else
    stop
    tried=()
    for driver in $drivers; do
        say "starting dockerd --storage-driver=$driver (log: $log)"
        nohup dockerd \
            --host "unix://$sock" --data-root "$data_root" --exec-root "$exec_root" --pidfile "$pidfile" \
            --storage-driver "$driver" --iptables=false --ip-forward=false --ip-masq=false \
            --bridge=none --userland-proxy=false --exec-opt native.cgroupdriver=cgroupfs \
            --init-path "$(command -v docker-init)" >"$log" 2>&1 </dev/null &
        pid=$!
        for _ in $(seq 1 "$wait_s"); do
            answers && break
            kill -0 "$pid" 2>/dev/null || break
            sleep 1
        done
        if answers && probe_container; then
            say "dockerd $pid is up with $driver"
            break
        fi
        tried+=("$driver: $(grep -E 'level=(error|fatal)|failed to start' "$log" | tail -n 2 | tr '\n' ' ')")
        say "$driver did not work; last lines of $log:"
        tail -n 15 "$log" | sed 's/^/    /'
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        rm -f "$pidfile"
    done
    answers || die "no storage driver worked (tried: ${tried[*]:-none})"
fi

{
    echo "export PATH=\"$root/usr/sbin:$root/usr/bin:\$PATH\""
    [ "$sock" = /var/run/docker.sock ] || echo "export DOCKER_HOST=\"unix://$sock\""
} >"$prefix/env.sh"
say "for the docker CLI and the harness: source $prefix/env.sh"
docker info
probe_container >/dev/null 2>&1 || die "the daemon answers but cannot run a container (see above and $log)"
say "ok: a container ran"
