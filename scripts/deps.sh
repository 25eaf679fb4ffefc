#!/bin/sh
# Install every build and test dependency of bluebox from Debian packages, when missing.
# Idempotent and quiet when everything is already there.
set -eu

PKGS="build-essential pkg-config meson ninja-build clang clang-format clang-tidy cppcheck
libclang-rt-14-dev llvm
libyaml-dev libjansson-dev libarchive-dev libcmocka-dev libevent-dev libssl-dev
libacl1-dev libxml2-dev liblzma-dev libzstd-dev liblz4-dev libbz2-dev zlib1g-dev
libnettle8 nettle-dev libicu-dev
python3 python3-pytest python3-pytest-xdist
bash-completion zsh fish tmux shellcheck zstd debootstrap
podman runc uidmap slirp4netns fuse-overlayfs
user-mode-linux libslirp-dev busybox-static e2fsprogs
qemu-system-x86 linux-image-cloud-amd64
python3-pip python3-setuptools python3-wheel"

# The MCP client test's npm packages (the official MCP SDK), from tests/mcp's lockfile;
# again only when the lockfile changed since the last install.
npm_deps() {
    d=$(dirname "$0")/../tests/mcp
    cmp -s "$d/package-lock.json" "$d/node_modules/.bluebox-lock" && return 0
    echo "deps: installing tests/mcp's npm packages" >&2
    (cd "$d" && npm ci --no-audit --no-fund --loglevel=error >/dev/null &&
        cp package-lock.json node_modules/.bluebox-lock)
}

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done
# The TypeScript SDK's tests need node (>= 18) and npm; a node from elsewhere (with its own
# npm) is fine, so look for the commands rather than for Debian's packages.
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -z "$missing" ] && { npm_deps; exit 0; }

if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
else
    SUDO=
fi
echo "deps: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
npm_deps
