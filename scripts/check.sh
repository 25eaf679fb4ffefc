#!/bin/bash
# The test run behind `make check`: cmocka unit tests, pytest black-box tests of the built
# binary, every fuzz corpus input replayed under ASan/UBSan, and the unit and CLI tests again
# against the ASan+UBSan build (build-asan). Ends with one line
# "N passed, N failed, N skipped"; exits non-zero when anything failed or a tier could not run.
#
#   --no-fuzz         leave out the fuzz corpus replay
#   --no-asan         leave out the unit + CLI tests against build-asan
#   --no-integration  run tests/cli only in the pytest tier (not tests/integration)
#   --asan-only       only the unit + CLI tests against build-asan (`make asan`)
#   --no-main         leave out the unit and pytest tiers against build (the fuzz replay and
#                     the build-asan tiers only: what runs beside the integration tier)
#
# BLUEBOX_MUST_RUN=1 (set by .ci/run, as bubblewrap's BWRAP_MUST_WORK): a skipped pytest test
# is a failure unless ALLOWED_SKIPS below names it with its reason, and so is a tier that did
# not run. Without it a skip is counted and shown, not failed.
#
# The pytest tiers run on BLUEBOX_TEST_WORKERS pytest-xdist workers (default 2, this CI
# machine's cores; 1 for one process): `--dist loadgroup`, where each integration
# module is one group (tests/integration/conftest.py), so a module's shared VMs boot once and
# tests that need one fixed host resource share a group. qemu tests run with TCG here
# (BLUEBOX_TEST_QEMU_ACCEL, default tcg; tests/integration/backends.py).
#
# The integration tests drive podman with the test containers.conf (CONTAINERS_CONF, from
# tests/integration/setup.sh), but for tests/integration/test_host_limits.py: build, run,
# up/exec and doctor with it unset, the host as a user has it (~16 s; its skip fails under
# BLUEBOX_MUST_RUN like any other), so bluebox never again needs that file to start a container.
#
# BLUEBOX_TEST_BUDGET=SECONDS (.ci/run sets it): a pytest tier still running after that long
# is interrupted as by Ctrl-C, so it reports what ran, what failed and what was slow, and the
# run fails saying so, instead of being cut off silently by CI's own limit. Each tier ends by
# listing its slowest tests.
#
# With the integration tier on, the fuzz replay and the build-asan tiers run beside it, as a
# second check.sh (--no-main) at nice 10 on one pytest process: on this 2-core machine they
# take the CPU the VM tests leave (a boot waiting on its disk, a guest's sleep, the last
# unit's worker with nothing left to take) instead of ~5 minutes after them. Their report is
# printed, and counted, after the integration tier's. Each of the two tiers builds its tree
# first (make fuzz-build, make asan-build; nothing when it is up to date), so on a fresh
# checkout those two builds also run beside the VM tests rather than before them.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ASAN_BUILD=${ASAN_BUILD:-build-asan}
MUST_RUN=${BLUEBOX_MUST_RUN:-0}
WORKERS=${BLUEBOX_TEST_WORKERS:-2}
BUDGET=${BLUEBOX_TEST_BUDGET:-0}
fuzz=1
asan=1
integration=1
main=1
for arg in "$@"; do
    case $arg in
    --no-fuzz) fuzz=0 ;;
    --no-asan) asan=0 ;;
    --no-integration) integration=0 ;;
    --asan-only) main=0 fuzz=0 ;;
    --no-main) main=0 ;;
    *) echo "usage: scripts/check.sh [--no-fuzz] [--no-asan] [--no-integration] [--asan-only] [--no-main]" >&2; exit 2 ;;
    esac
done

# Skips that stay legitimate on a full CI machine (Debian 12, 2 cores, root, podman, uml,
# /dev/kvm openable by root). One extended regex per entry, matched against pytest's -rs line
# "SKIPPED [n] <file>:<line>: <reason>"; keep the reason next to each. Everything else runs
# there today (krun's preflight test included, and the debootstrap-image tests, since this
# script sets BLUEBOX_TEST_DEBIAN=1), so a new skip on CI is a failure until it is listed here.
ALLOWED_SKIPS=(
    # A sanitizer build does not cap a restore's memory (ASan reserves its own shadow), so the
    # sparse-map-bomb test only means something against the release build, where it runs.
    'tests/cli/test_data\.py:[0-9]+: sanitizer builds do not cap a restore'"'"'s memory'
)
# A machine without a KVM device at all (CI's machines differ: some have a /dev/kvm that
# opens, some none): the tests that need one say so in their reason, and are no failure there.
# `-c` first: `<>` on a missing path would create a regular file there, which every later
# "is there KVM?" question would then see.
if [ -c /dev/kvm ] && { exec 3<>/dev/kvm; } 2>/dev/null; then
    exec 3>&-
else
    ALLOWED_SKIPS+=('/dev/kvm')
fi

passed=0
failed=0
skipped=0
broken=""
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# Each tier's heading says when it started, in seconds since this run began (the tiers beside
# the integration tier count from the same start), for CI's per-tier times (tests/CI-TIME.md).
export BLUEBOX_CHECK_T0=${BLUEBOX_CHECK_T0:-$(date +%s)}
note() { printf '== %s, at %ss\n' "$*" "$(($(date +%s) - BLUEBOX_CHECK_T0))"; }

# unit_tier BUILD: every cmocka test binary in BUILD.
unit_tier() {
    local build=$1 t out rc p f s names
    note "unit tests ($build)"
    for t in "$build"/test_*; do
        [ -f "$t" ] && [ -x "$t" ] || continue
        out="$log/$(basename "$build")-$(basename "$t").out"
        CMOCKA_MESSAGE_OUTPUT=stdout "$t" >"$out" 2>&1
        rc=$?
        p=$(sed -n 's/.*\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n1)
        f=$(sed -n 's/.*\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n1)
        s=$(sed -n 's/.*\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$out" | tail -n1)
        p=${p:-0}
        f=${f:-0}
        s=${s:-0}
        if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
        passed=$((passed + p))
        failed=$((failed + f))
        skipped=$((skipped + s))
        printf '   %-28s %3d passed, %d failed, %d skipped\n' "$(basename "$t")" "$p" "$f" "$s"
        if [ "$f" -ne 0 ]; then
            cat "$out"
            names=$(grep -E '^\[  FAILED  \] [^ ]+$' "$out" | sed "s|^.* |   $t: |")
            echo "${names:-   $t: exited $rc}" >>"$log/failed"
        fi
    done
    [ -n "$(ls "$build"/test_* 2>/dev/null)" ] || broken="$broken unit($build)"
}

allowed_skip() {
    local pat
    for pat in "${ALLOWED_SKIPS[@]}"; do
        grep -Eq "$pat" <<<"$1" && return 0
    done
    return 1
}

# XDIST: pytest's arguments for BLUEBOX_TEST_WORKERS workers (none for 1). Without
# pytest-xdist (scripts/deps.sh installs it) the tiers run in one process, and say so; under
# BLUEBOX_MUST_RUN that is a failure, as a CI machine must have it.
XDIST=""
if [ "$WORKERS" -gt 1 ] 2>/dev/null; then
    if /usr/bin/python3 -c 'import xdist' 2>/dev/null; then
        XDIST="-n $WORKERS --dist loadgroup"
    else
        echo "bluebox: pytest-xdist is missing (scripts/deps.sh): the pytest tiers run in one process"
        [ "$MUST_RUN" = 1 ] && broken="$broken xdist"
    fi
fi

# pytest's "slowest durations" section, left out of the tier's tail (slowest_apart) and
# shown after it (slowest OUT), so the failures stay in view.
DURATION='^[0-9.]+s +(call|setup|teardown) '
slowest_apart() { grep -Ev "$DURATION|^=+ slowest .*durations|durations < .* hidden"; }
slowest() {
    grep -E "$DURATION" "$1" | head -n 20 | sed 's/^/   /'
    # and each module's share (its tests' setup, call and teardown), for where CI's time goes
    grep -E "$DURATION" "$1" | awk '{ split($3, m, "::"); t[m[1]] += $1 }
        END { for (k in t) printf "%.0f %s\n", t[k], k }' | sort -rn | head -n 15 |
        awk '{ printf "   %6ss  %s (module total)\n", $1, $2 }'
}

# pytest_tier BUILD TIER-NAME PATH...: pytest over PATHs against BUILD/bluebox.
pytest_tier() {
    local build=$1 name=$2 out summary p f s line n
    shift 2
    note "$name (pytest, $build${XDIST:+, $WORKERS workers})"
    out="$log/pytest-$(basename "$build").out"
    local limit=() t0=$SECONDS
    # pytest's own process only: it stops its workers and reports (its workers, interrupted
    # too, would print tracebacks instead)
    [ "$BUDGET" -gt 0 ] 2>/dev/null && limit=(timeout --foreground -s INT -k 120 "$BUDGET")
    # shellcheck disable=SC2086  # XDIST is several words
    BLUEBOX_TEST_DEBIAN=${BLUEBOX_TEST_DEBIAN:-1} BLUEBOX_BIN="$PWD/$build/bluebox" \
        "${limit[@]}" /usr/bin/python3 -m pytest -q -rfEs -p no:cacheprovider \
        --durations=0 --durations-min=0.5 $XDIST --basetemp="$log/pytest-$(basename "$build")" "$@" 2>&1 |
        tee "$out" | grep -v '^SKIPPED \[' | slowest_apart | tail -n 30
    slowest "$out"
    if [ "$BUDGET" -gt 0 ] && [ $((SECONDS - t0)) -ge "$BUDGET" ]; then
        echo "bluebox: $name ran out of its ${BUDGET}s budget (BLUEBOX_TEST_BUDGET) and was interrupted"
        failed=$((failed + 1))
    fi
    summary=$(grep -E '^=*ERROR|[0-9]+ (passed|failed)' "$out" | tail -n1)
    p=$(grep -Eo '[0-9]+ passed' <<<"$summary" | grep -Eo '[0-9]+')
    f=$(grep -Eo '[0-9]+ (failed|errors?)' <<<"$summary" | awk '{s += $1} END {print s + 0}')
    s=$(grep -Eo '[0-9]+ skipped' <<<"$summary" | grep -Eo '[0-9]+')
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
    skipped=$((skipped + ${s:-0}))
    [ -n "${p:-}" ] || broken="$broken $name($build)"
    grep -E '^(FAILED|ERROR) ' "$out" | sed "s|^|   $build: |" >>"$log/failed"
    while IFS= read -r line; do
        n=$(sed -n 's/^SKIPPED \[\([0-9]*\)\].*/\1/p' <<<"$line")
        if [ "$MUST_RUN" = 1 ] && ! allowed_skip "$line"; then
            echo "bluebox: BLUEBOX_MUST_RUN: this skip is a failure: $line"
            failed=$((failed + ${n:-1}))
        else
            echo "   $line"
        fi
    done < <(grep '^SKIPPED \[' "$out")
}

# beside_start: the fuzz replay and the build-asan tiers, as a second check.sh in the
# background (see the top); beside_report: wait for it, print its report, count its results.
beside=""
beside_start() {
    local args=(--no-main)
    [ "$fuzz" = 1 ] || args+=(--no-fuzz)
    [ "$asan" = 1 ] || args+=(--no-asan)
    [ "$fuzz$asan" != 00 ] || return 0
    BLUEBOX_TEST_WORKERS=1 nice -n 10 "$PWD/scripts/check.sh" "${args[@]}" >"$log/beside.out" 2>&1 &
    beside=$!
    fuzz=0 asan=0
}
beside_report() {
    local rc sum p f s
    [ -n "$beside" ] || return 0
    wait "$beside"
    rc=$?
    # its failures and its count go into this run's (printed once, at the end)
    awk '/^bluebox: what failed, every tier:$/ { skip = 1; next }
         /^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$/ { skip = 0; next }
         !skip' "$log/beside.out"
    awk '/^bluebox: what failed, every tier:$/ { on = 1; next }
         /^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$/ { on = 0 }
         on' "$log/beside.out" >>"$log/failed"
    sum=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log/beside.out" | tail -n1)
    if [ -z "$sum" ]; then
        broken="$broken fuzz+asan(exit $rc, no summary)"
        return 0
    fi
    read -r p _ f _ s _ <<<"$sum"
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
    [ "$rc" -eq 0 ] || [ "$f" -gt 0 ] || broken="$broken fuzz+asan(exit $rc)"
}

if [ "$main" = 1 ]; then
    unit_tier "$BUILD"
    if [ "$integration" = 1 ]; then
        beside_start
        pytest_tier "$BUILD" "black-box and real-podman integration tests" tests/cli tests/integration
        beside_report
    else
        pytest_tier "$BUILD" "black-box CLI tests" tests/cli
    fi
fi

# build_tree TARGET: make's TARGET (fuzz-build, asan-build); a tree that does not build is
# a failed tier, with the build's last lines
build_tree() {
    if ! make --no-print-directory "$1" >"$log/$1.out" 2>&1; then
        echo "bluebox: make $1 failed:"
        tail -n 40 "$log/$1.out"
        failed=$((failed + 1))
        echo "   make $1 failed" >>"$log/failed"
        return 1
    fi
}

if [ "$fuzz" = 1 ] && build_tree fuzz-build; then
    note "fuzz corpus replay (ASan+UBSan)"
    for t in build-fuzz/fuzz_*; do
        [ -f "$t" ] && [ -x "$t" ] || continue
        name=$(basename "$t")
        corpus=tests/fuzz/corpus/${name#fuzz_}
        [ -d "$corpus" ] || corpus=tests/fuzz/corpus/bluefile
        n=$(find "$corpus" -type f | wc -l)
        if "$t" -runs=0 -rss_limit_mb=512 "$corpus"/* >"$log/$name.out" 2>&1; then
            passed=$((passed + n))
            printf '   %-28s %3d inputs replayed\n' "$name" "$n"
        else
            failed=$((failed + 1))
            tail -n 40 "$log/$name.out"
        fi
    done
    [ -n "$(ls build-fuzz/fuzz_* 2>/dev/null)" ] || broken="$broken fuzz"
fi

# The unit and CLI tests against the ASan+UBSan build (as bubblewrap's CI does). UBSan stops
# at its first finding, and every sanitizer report also goes to a file here, so a finding in
# a command whose exit status a test expects to be non-zero still fails the run.
if [ "$asan" = 1 ]; then
    [ "$ASAN_BUILD" != build-asan ] || build_tree asan-build
    if [ -x "$ASAN_BUILD/bluebox" ]; then
        mkdir -p "$log/san"
        export ASAN_OPTIONS="log_path=$log/san/asan:${ASAN_OPTIONS:-}"
        export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$log/san/ubsan:${UBSAN_OPTIONS:-}"
        unit_tier "$ASAN_BUILD"
        pytest_tier "$ASAN_BUILD" "black-box CLI tests" tests/cli
        unset ASAN_OPTIONS UBSAN_OPTIONS
        for r in "$log"/san/*; do
            [ -f "$r" ] || continue
            echo "bluebox: sanitizer report $(basename "$r"):"
            head -n 60 "$r"
            failed=$((failed + 1))
        done
    else
        broken="$broken asan($ASAN_BUILD/bluebox missing: make asan-build)"
    fi
fi

if [ -n "$broken" ]; then
    echo "bluebox: these test tiers did not run:$broken"
    failed=$((failed + 1))
fi
# every failure once more, last, where a log's tail (all CI shows of a run) still has it
if [ -s "$log/failed" ]; then
    echo "bluebox: what failed, every tier:"
    cat "$log/failed"
fi
[ "$main" = 1 ] && note "done"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
