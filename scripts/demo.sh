#!/bin/bash
# `make demo`: bluebox's main job. It makes a local base image (busybox-static, imported into
# podman: no registry needed), builds a sandbox from the tiny-busybox example, runs commands
# in it and shows that the guest runs its own kernel. Everything happens in a throwaway
# BLUEBOX_HOME, so your own sandboxes are never touched.
set -euo pipefail
cd "$(dirname "$0")/.."
bb="$PWD/build/bluebox"
home=$(mktemp -d /tmp/bluebox-demo.XXXXXX)
cleanup() {
    "$bb" destroy demo --data -y >/dev/null 2>&1 || true
    rm -rf "$home"
}
trap cleanup EXIT
export BLUEBOX_HOME="$home"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
note() { printf '\n%s\n' "$*"; }

echo "bluebox demo (BLUEBOX_HOME=$home)"
if [ "$(id -u)" -eq 0 ]; then
    # The test setup imports busybox-static as the image the example names
    # (docker.io/library/busybox:latest, tagged locally: it is not the upstream image). Its
    # containers.conf is left out: bluebox fits the containers' limits to the host itself
    # (src/launch/hostlimits.h), so the demo runs on podman as the host has it.
    note "preparing a local busybox base image (tests/integration/setup.sh)…"
    eval "$(tests/integration/setup.sh --upstream-tags)"
    unset CONTAINERS_CONF
elif ! podman image exists docker.io/library/busybox:latest; then
    note "importing busybox-static as a local base image…"
    tmp=$(mktemp -d)
    mkdir -p "$tmp/bin"
    cp /bin/busybox "$tmp/bin/busybox"
    for a in sh ls cat echo uname id sleep mkdir rm; do ln -s busybox "$tmp/bin/$a"; done
    tar -C "$tmp" -c . | podman import - docker.io/library/busybox:latest >/dev/null
    rm -rf "$tmp"
fi

step "$bb" --version
step "$bb" doctor || true
step "$bb" new demo --from tiny-busybox
if [ -z "${BLUEBOX_BACKEND:-}" ] && ! "$bb" doctor 2>/dev/null | grep -q '^  ok    backend '; then
    note "no KVM microVMs here, so the demo uses the uml backend (its own user-mode-linux kernel):"
    export BLUEBOX_BACKEND=uml
    echo "BLUEBOX_BACKEND=uml"
fi
step "$bb" build demo
step "$bb" run demo -- uname -r
note "the host's kernel, for comparison:"
step uname -r
step "$bb" run demo -- cat /proc/sys/kernel/random/boot_id
step cat /proc/sys/kernel/random/boot_id
step "$bb" run demo -- sh -c 'echo "written in the guest" > /data/hello; echo "exit code 3 comes back"; exit 3' || echo "(exit $?)"
step cat "$home/data/demo/hello"
step "$bb" logs demo -n 4
note "a long-lived sandbox: one boot, many commands, state kept between them:"
step "$bb" up demo
step "$bb" exec demo -- sh -c 'echo 42 > /tmp/answer; uname -r'
step "$bb" exec demo -- cat /tmp/answer
step "$bb" down demo
note "/data snapshots: plain tarballs, restored all or nothing:"
step "$bb" snapshot demo first -y
step "$bb" run demo -- rm /data/hello
step "$bb" restore demo first -y
step cat "$home/data/demo/hello"
note "a bad Bluefile is refused with the file, line, column and key:"
printf 'cpus: 99\n' >"$home/sandboxes/demo/Bluefile"
step "$bb" env demo || true
note "demo done: a sandbox built from a Bluefile, commands run in a guest with its own kernel and boot_id, a long-lived VM driven with exec, /data kept on the host and snapshotted."
