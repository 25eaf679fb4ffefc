SHELL := /bin/bash
# Thin wrapper over meson/ninja. `make check` and `make demo` install what is missing first.
PREFIX ?= /usr/local
DESTDIR ?=
BUILD ?= build
FUZZ_SECONDS ?= 60
SRC := $(shell git ls-files 'src/*.c' 'src/*.h' 'tests/unit/*.c' 'tests/fuzz/*.c' 2>/dev/null)

.PHONY: all deps build check demo asan asan-build fuzz fuzz-build lint format install clean

all: build

deps:
	@scripts/deps.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD) --prefix=$(PREFIX)

build: $(BUILD)/build.ninja
	@ninja -C $(BUILD)

# The fuzz and ASan trees are built by scripts/check.sh, beside the integration tier.
check: deps
	@$(MAKE) --no-print-directory build
	@scripts/check.sh

demo: deps build
	@scripts/demo.sh

# The unit and CLI tests against an ASan+UBSan build (make check runs them too).
asan: deps asan-build
	@scripts/check.sh --asan-only

asan-build:
	@[ -f build-asan/build.ninja ] || meson setup build-asan -Dstatic=false -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
	@ninja -C build-asan >/dev/null

fuzz-build:
	@[ -f build-fuzz/build.ninja ] || CC=clang meson setup build-fuzz -Dfuzz=true -Dstatic=false --buildtype=debugoptimized >/dev/null
	@ninja -C build-fuzz >/dev/null

# Every fuzz target on its own corpus (tests/fuzz/corpus/<t>, the Bluefile one when a target
# has none, as in scripts/check.sh); new inputs go to a scratch directory, not the tree.
fuzz: deps fuzz-build
	@for bin in build-fuzz/fuzz_*; do \
	  [ -f "$$bin" ] && [ -x "$$bin" ] || continue; \
	  t=$${bin#build-fuzz/fuzz_}; corpus=tests/fuzz/corpus/$$t; \
	  [ -d "$$corpus" ] || corpus=tests/fuzz/corpus/bluefile; \
	  work=$$(mktemp -d); \
	  echo "fuzz_$$t: $(FUZZ_SECONDS)s on $$corpus"; \
	  set -o pipefail; \
	  "$$bin" -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -rss_limit_mb=512 \
	    -print_final_stats=1 $$work $$corpus 2>&1 | tail -n 3 || { rm -rf $$work; exit 1; }; \
	  rm -rf $$work; \
	done

# clang-tidy: bugprone and the clang static analyzer, less these (narrowing conversions are
# the compiler's -Wconversion; false positives elsewhere carry a NOLINT with the reason).
TIDY_OFF := -bugprone-easily-swappable-parameters,-bugprone-reserved-identifier,-bugprone-macro-parentheses,-bugprone-assignment-in-if-condition,-bugprone-branch-clone,-bugprone-implicit-widening-of-multiplication-result,-bugprone-sizeof-expression,-bugprone-narrowing-conversions
# DeprecatedOrUnsafeBufferHandling asks for C11 Annex K (memcpy_s), which glibc has not;
# strcpy: every one copies a literal into a buffer made for it, and FORTIFY_SOURCE checks
# them; Padding: fields are ordered by meaning, and what it flags is a small static table.
ANALYZER_OFF := -clang-analyzer-security.insecureAPI.DeprecatedOrUnsafeBufferHandling,-clang-analyzer-security.insecureAPI.strcpy,-clang-analyzer-optin.performance.Padding

lint:
	@clang-format --dry-run -Werror $(SRC)
	@cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
	  --suppress=missingIncludeSystem -D_GNU_SOURCE -D__x86_64__ -D__linux__ -Isrc src
	@clang-tidy --quiet -p $(BUILD) $(filter src/%.c,$(SRC)) \
	  -checks='-*,bugprone-*,$(TIDY_OFF),clang-analyzer-*,$(ANALYZER_OFF)' \
	  --warnings-as-errors='*' 2>&1 | grep -v 'warnings generated' ; exit $${PIPESTATUS[0]}
	@shellcheck security/escape-test.sh security/weaken/podman security/weaken/bluebox scripts/try-examples.sh
	@echo "lint: clean"

format:
	@clang-format -i $(SRC)

install: build
	@meson configure $(BUILD) -Dprefix=$(PREFIX) >/dev/null
	@ninja -C $(BUILD) >/dev/null
	@DESTDIR=$(DESTDIR) meson install -C $(BUILD) --no-rebuild --quiet
	@echo "installed into $(DESTDIR)$(PREFIX)"

clean:
	rm -rf build build-asan build-fuzz
