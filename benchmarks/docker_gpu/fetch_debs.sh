#!/usr/bin/env bash
# Download, on a machine with Debian's apt and network, the packages start_dockerd.sh installs on
# a machine without network (the lent GPU machines): docker.io, containerd, runc, tini (docker-init),
# apparmor (apparmor_parser, for kernels with AppArmor on) and the shared libraries dockerd and runc
# link against (used there only where the host lacks them). Carry the folder (it is under the
# ignored .gl/) with the run.
#
# The carry limit is 64 MiB and the original .debs are 63 MB, so by default docker.io and
# containerd are repacked without what dockerd never runs here (dnet, ovrouter, docker-proxy,
# ctr, the v1 shims, docs): about 45 MB. --full keeps the originals.
#
# Usage: bash benchmarks/docker_gpu/fetch_debs.sh [--full] [DEST]     (DEST default: .gl/docker)
set -euo pipefail

full=0
if [ "${1:-}" = "--full" ]; then
    full=1
    shift
fi
dest=${1:-.gl/docker}
packages=(
    docker.io containerd runc tini apparmor
    libdevmapper1.02.1 libseccomp2 libsystemd0 libcap2 libgcrypt20 libgpg-error0 liblz4-1 libzstd1
    liblzma5 libselinux1 libudev1 libpcre2-8-0
)
# What the repacked .debs leave out (paths inside the package).
drop_docker=(usr/bin/dnet usr/sbin/ovrouter usr/sbin/docker-proxy usr/share/doc usr/share/man
    usr/share/bash-completion usr/share/zsh usr/share/fish etc/init.d etc/default lib/systemd usr/lib/systemd)
drop_containerd=(usr/bin/ctr usr/bin/containerd-shim usr/bin/containerd-shim-runc-v1 usr/bin/containerd-stress
    usr/share/doc usr/share/man lib/systemd usr/lib/systemd)

say() { echo "fetch_debs: $*"; }
command -v apt-get >/dev/null || { say "apt-get is missing: run this on a Debian machine"; exit 1; }

stage=$(mktemp -d /tmp/kernel-agent-debs.XXXXXX)
trap 'rm -rf "$stage"' EXIT
chmod 755 "$stage"  # apt's _apt user downloads into it
say "downloading ${packages[*]}"
(cd "$stage" && apt-get download -q "${packages[@]}" 2>&1) | grep -v '^W: Download is performed unsandboxed' || true
for pkg in "${packages[@]}"; do
    ls "$stage/${pkg}_"*.deb >/dev/null 2>&1 || { say "apt-get download $pkg failed (apt-get update first?)"; exit 1; }
done

repack() {  # repack DEB DROP...: the .deb without the paths DROP, xz -9
    local deb=$1 tree="$stage/tree"
    shift
    rm -rf "$tree"
    dpkg-deb -R "$deb" "$tree"
    for path in "$@"; do rm -rf "${tree:?}/$path"; done
    rm -f "$tree/DEBIAN/md5sums" "$tree/DEBIAN/conffiles"  # the file list changed
    local out="${deb%_*.deb}"
    out="$out+slim_${deb##*_}"
    dpkg-deb -Zxz -z9 --root-owner-group -b "$tree" "$out" >/dev/null
    rm -f "$deb" && rm -rf "$tree"
    say "repacked $(basename "$out") ($(du -h "$out" | cut -f1))"
}
if [ "$full" = 0 ]; then
    repack "$stage"/docker.io_*.deb "${drop_docker[@]}"
    repack "$stage"/containerd_*.deb "${drop_containerd[@]}"
fi

mkdir -p "$dest"
rm -f "$dest"/*.deb
mv "$stage"/*.deb "$dest"/
(
    cd "$dest"
    {
        # shellcheck source=/dev/null
        echo "# fetched $(date -u +%FT%TZ) on $(. /etc/os-release && echo "$PRETTY_NAME") ($(dpkg --print-architecture))"
        [ "$full" = 0 ] && echo "# docker.io and containerd repacked without: ${drop_docker[*]} ${drop_containerd[*]}"
        sha256sum ./*.deb
    } >MANIFEST
)
say "$(find "$dest" -name '*.deb' | wc -l) packages in $dest ($(du -sh "$dest" | cut -f1)); carry it and run start_dockerd.sh $dest"
