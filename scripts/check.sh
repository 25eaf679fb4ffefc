#!/bin/bash
# The test run behind `make check`: cmocka unit tests, pytest black-box tests of the built
# binary, and every fuzz corpus input replayed under ASan/UBSan. Ends with one line
# "N passed, N failed"; exits non-zero when anything failed or a tier could not run.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
fuzz=1
[ "${1:-}" = "--no-fuzz" ] && fuzz=0

passed=0
failed=0
broken=""
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

note() { printf '== %s\n' "$*"; }

note "unit tests ($BUILD)"
for t in "$BUILD"/test_*; do
    [ -f "$t" ] && [ -x "$t" ] || continue
    out="$log/$(basename "$t").out"
    CMOCKA_MESSAGE_OUTPUT=stdout "$t" >"$out" 2>&1
    rc=$?
    p=$(sed -n 's/.*\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n1)
    f=$(sed -n 's/.*\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n1)
    p=${p:-0}
    f=${f:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    passed=$((passed + p))
    failed=$((failed + f))
    printf '   %-28s %3d passed, %d failed\n' "$(basename "$t")" "$p" "$f"
    [ "$f" -eq 0 ] || cat "$out"
done
[ -n "$(ls "$BUILD"/test_* 2>/dev/null)" ] || broken="$broken unit"

note "black-box and real-podman integration tests (pytest)"
out="$log/pytest.out"
BLUEBOX_TEST_DEBIAN=${BLUEBOX_TEST_DEBIAN:-1} BLUEBOX_BIN="$PWD/$BUILD/bluebox" /usr/bin/python3 -m pytest -q -p no:cacheprovider --basetemp="$log/pytest" tests/cli tests/integration \
    2>&1 | tee "$out" | tail -n 30
summary=$(grep -E '^=*ERROR|[0-9]+ (passed|failed)' "$out" | tail -n1)
p=$(grep -Eo '[0-9]+ passed' <<<"$summary" | grep -Eo '[0-9]+')
f=$(grep -Eo '[0-9]+ (failed|errors?)' <<<"$summary" | awk '{s += $1} END {print s + 0}')
passed=$((passed + ${p:-0}))
failed=$((failed + ${f:-0}))
[ -n "${p:-}" ] || broken="$broken pytest"

if [ "$fuzz" = 1 ]; then
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

if [ -n "$broken" ]; then
    echo "bluebox: these test tiers did not run:$broken"
    failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
