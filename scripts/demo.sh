#!/bin/bash
# `make demo`: bluebox's main job, as far as this version goes. It works in a throwaway
# BLUEBOX_HOME so your own sandboxes are never touched.
set -euo pipefail
cd "$(dirname "$0")/.."
bb="$PWD/build/bluebox"
home=$(mktemp -d /tmp/bluebox-demo.XXXXXX)
trap 'rm -rf "$home"' EXIT
export BLUEBOX_HOME="$home"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

echo "bluebox demo (BLUEBOX_HOME=$home)"
step "$bb" --version
step "$bb" new demo --from tiny-busybox
step "$bb" ls
step "$bb" env demo
step "$bb" build --dry-run demo
echo
echo "a bad Bluefile is refused with the file, line, column and key:"
printf 'cpus: 99\n' >"$home/sandboxes/demo/Bluefile"
step "$bb" env demo || true
echo
echo "demo done: sandbox scaffolded, Bluefile validated, Containerfile rendered."
echo "(booting sandboxes arrives with the runtime: bluebox build, run, shell.)"
