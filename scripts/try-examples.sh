#!/bin/bash
# Walk shipped examples through what docs/bluefile.md tells a new user to do:
#
#   bluebox new x-<example> --from <example>
#   bluebox build x-<example>
#   bluebox run x-<example> -- <a command that shows the example works>
#
#   scripts/try-examples.sh [example...]      (default: every directory in examples/)
#
# Everything happens in a throwaway BLUEBOX_HOME, removed at the end with `bluebox nuke -y`
# (which also removes the images the builds made; pulled base images stay). One line per
# example: "ok", "cannot get base <image>" (the build could not pull it: no registry here),
# or "FAILED <step>: <why>" with the log kept; then a summary.
#
# Environment:
#   BLUEBOX_BIN       the bluebox to try (default: build/bluebox of this checkout, else PATH)
#   BLUEBOX_BACKEND   passed on; when unset, the backend `bluebox doctor` says this host needs
#                     (e.g. uml where krun cannot run)
#   TRY_BUILD_TIMEOUT seconds a build may take (default 1800); TRY_RUN_TIMEOUT for a run (300)
#
# Exit status: 0 when every example is ok or could not get its base image; 1 when any
# failed for another reason; 2 on a usage error.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_TIMEOUT=${TRY_BUILD_TIMEOUT:-1800}
RUN_TIMEOUT=${TRY_RUN_TIMEOUT:-300}

if [ -n "${BLUEBOX_BIN:-}" ]; then
    BB=$BLUEBOX_BIN
elif [ -x "$ROOT/build/bluebox" ]; then
    BB=$ROOT/build/bluebox
else
    BB=$(command -v bluebox) || {
        echo "try-examples.sh: no bluebox: build it (make) or set BLUEBOX_BIN" >&2
        exit 2
    }
fi

# check_for EXAMPLE: the command to run (one word per line) and an extended regex its output
# must match, separated by a line "--". The command runs in /data without a shell.
# shellcheck disable=SC2016 # $VIRTUAL_ENV is the guest's
check_for() {
    case $1 in
    ai-agent) printf '%s\n' sh -c 'node --version && python3 --version && rg --version && id agent' -- \
        '^v[0-9]+\..*Python 3\..*ripgrep.*uid=[0-9]+\(agent\)' ;;
    go-build) printf '%s\n' go run . -- '^hello from go1\.22' ;;
    node-dev) printf '%s\n' sh -c 'node --version && tsc --version' -- '^v[0-9]+\..*Version [0-9]' ;;
    offline) printf '%s\n' sh -c 'python3 --version && jq --version && cat README.txt >/dev/null && echo offline-ok' -- \
        '^Python 3\..*offline-ok' ;;
    os-lab) printf '%s\n' sh -c 'cat /etc/fedora-release && id admin' -- '^Fedora release 41.*\(admin\)' ;;
    python-dev) printf '%s\n' sh -c 'python --version && pytest --version && echo "$VIRTUAL_ENV"' -- \
        '^Python 3\..*pytest [0-9].*/opt/venv' ;;
    tiny-alpine) printf '%s\n' sh -c 'cat /etc/alpine-release && git --version && curl --version' -- \
        '^3\.20\..*git version.*curl [0-9]' ;;
    tiny-busybox) printf '%s\n' uname -a -- '^Linux ' ;;
    tiny-node) printf '%s\n' node hello.js -- '.' ;;
    tiny-python) printf '%s\n' python3 hello.py -- '.' ;;
    *) printf '%s\n' sh -c 'echo example-ok' -- '^example-ok' ;;
    esac
}

if [ $# -gt 0 ]; then
    case $1 in -h | --help)
        sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    esac
    examples=("$@")
else
    examples=()
    for d in "$ROOT"/examples/*/; do
        [ -f "$d/Bluefile" ] && examples+=("$(basename "$d")")
    done
fi
for ex in "${examples[@]}"; do
    if [ ! -f "$ROOT/examples/$ex/Bluefile" ]; then
        echo "try-examples.sh: no example named $ex (see examples/)" >&2
        exit 2
    fi
done

if [ -z "${BLUEBOX_BACKEND:-}" ]; then
    b=$("$BB" doctor 2>&1 | sed -n 's/.*fix: .*BLUEBOX_BACKEND=\([a-z0-9]*\).*/\1/p' | head -n1)
    [ -z "$b" ] || export BLUEBOX_BACKEND=$b
fi

HOME_DIR=$(mktemp -d "${TMPDIR:-/var/tmp}/bluebox-try.XXXXXX")
LOGS=$(mktemp -d "${TMPDIR:-/var/tmp}/bluebox-try-logs.XXXXXX")
export BLUEBOX_HOME=$HOME_DIR
keep_logs=0
# shellcheck disable=SC2317 # called through the trap
cleanup() {
    BLUEBOX_HOME=$HOME_DIR "$BB" nuke -y >>"$LOGS/nuke.log" 2>&1 ||
        echo "try-examples.sh: bluebox nuke -y failed in $HOME_DIR (see $LOGS/nuke.log)" >&2
    rm -rf "$HOME_DIR"
    [ "$keep_logs" = 1 ] || rm -rf "$LOGS"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "trying ${#examples[@]} example(s) with $BB (backend ${BLUEBOX_BACKEND:-from the Bluefile})"
n_ok=0 n_nobase=0 n_failed=0
failed=()
# why LOG: what went wrong, in one line: the failing build step and the first error its tool
# printed (npm, pip, apt), else bluebox's own last message, else the log's last line.
why() {
    local l step tool
    step=$(grep -m1 '^Error: building at STEP' "$1" | sed 's/^Error: building at //; s/: while running runtime//')
    tool=$(grep -m1 -E '^(npm ERR! code|ERROR:|E: |error:)' "$1")
    l=$(grep '^bluebox: ' "$1" | tail -n1)
    [ -n "$l" ] || l=$(grep -v '^[[:space:]]*$' "$1" | tail -n1)
    [ -z "$step" ] || l="$step${tool:+ ($tool)}"
    printf '%s' "${l#bluebox: }" | cut -c1-240
}
for ex in "${examples[@]}"; do
    name=x-$ex
    log=$LOGS/$ex.log
    t0=$(date +%s)
    mapfile -t spec < <(check_for "$ex")
    cmd=()
    for w in "${spec[@]}"; do
        [ "$w" = -- ] && break
        cmd+=("$w")
    done
    want=${spec[-1]}
    result=""
    {
        echo "+ bluebox new $name --from $ex"
        "$BB" new "$name" --from "$ex"
    } >"$log" 2>&1 || result="FAILED new: $(why "$log")"
    if [ -z "$result" ]; then
        echo "+ bluebox build $name" >>"$log"
        if ! timeout "$BUILD_TIMEOUT" "$BB" build "$name" >>"$log" 2>&1; then
            if grep -q '^bluebox: cannot get the base image' "$log"; then
                base=$(sed -n 's/^bluebox: cannot get the base image \([^:]*:[^:]*\):.*/\1/p' "$log" | head -n1)
                result="cannot get base ${base:-image} (no registry access?): skipped"
            else
                result="FAILED build: $(why "$log")"
            fi
        fi
    fi
    if [ -z "$result" ]; then
        echo "+ bluebox run $name -- ${cmd[*]}" >>"$log"
        out=$(timeout "$RUN_TIMEOUT" "$BB" run "$name" -- "${cmd[@]}" 2>>"$log")
        rc=$?
        printf '%s\n' "$out" >>"$log"
        if [ "$rc" -ne 0 ]; then
            result="FAILED run (exit $rc): $(why "$log")"
        elif ! tr '\n' ' ' <<<"$out" | grep -Eq "$want"; then
            result="FAILED run: output does not match /$want/: $(head -c 120 <<<"$out" | tr '\n' ' ')"
        else
            result="ok ($(head -n1 <<<"$out" | cut -c1-60))"
        fi
    fi
    # Leave nothing of this example behind before the next one (disk: images are large).
    "$BB" destroy --data -y "$name" >>"$log" 2>&1 || true
    secs=$(($(date +%s) - t0))
    printf '%-14s %5ss  %s\n' "$ex" "$secs" "$result"
    case $result in
    ok*) n_ok=$((n_ok + 1)) ;;
    cannot*) n_nobase=$((n_nobase + 1)) ;;
    *)
        n_failed=$((n_failed + 1))
        failed+=("$ex")
        keep_logs=1
        ;;
    esac
done

echo "summary: $n_ok ok, $n_nobase could not get their base image, $n_failed failed"
if [ "$n_failed" -gt 0 ]; then
    echo "failed: ${failed[*]}; logs in $LOGS"
    exit 1
fi
exit 0
