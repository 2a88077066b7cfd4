#!/bin/bash
# sanitizers.sh — the tree built a second time with --enable-asan (AddressSanitizer,
# LeakSanitizer, UndefinedBehaviorSanitizer), and its unit programs and the integration tests
# that exercise the most code run in that build, every report fatal. A test of `make check`.
#
#   tests/sanitizers.sh                   from make check (or `make check-sanitizers`)
#   SANITIZER_TESTS="t1 t2" tests/...     other tests of the instrumented tree; "all" runs its
#                                         whole `make check`
#
# Why a second tree, and from here: CI runs the README's command (./configure && make check)
# and nothing else, so the sanitizer run has to be reached from `make check` itself. The
# instrumented tree is built under tests/sanitizers/ of this build tree: `make distdir`
# copies the sources (with their dates, so the second build is incremental from one run to
# the next) to tests/sanitizers/src, and tests/sanitizers/build is configured from there
# with --enable-asan. A copy rather than a build from $top_srcdir, because a source tree
# that was configured in place (as CI does) cannot also be the source of another build.
#
# Everything in the instrumented tree is instrumented: tenancyd, the app modules and the
# PostgreSQL driver it dlopen()s, the tenancy command, the helpers. Its Makefile makes every
# report fatal (ASAN_OPTIONS, UBSAN_OPTIONS, LSAN_OPTIONS with tests/lsan.supp, see
# tests/Makefile.inc), and the integration harness (tests/integration/lib.sh) collects the
# reports of the daemons and workers a test starts and fails the test on any.
#
# The set (SANITIZER_TESTS below) is chosen for the code it reaches per second: every unit
# program (the five Check suites, on SQLite and PostgreSQL), then through nginx: basic (the
# host, the app API, status, logs), probes (malformed and hostile FastCGI streams), hostile
# (oversized and malformed HTTP input, injection), tenancy (the chain, the registry, the
# cache), storage (tenant storage on both backends, aborts and timeouts), migrate (the
# migrations of every tenant) and admin_http (the panel). About 150 s on two cores with the
# build; the other integration tests add little code and a lot of waiting.
#
# In a tree that is itself --enable-asan (TENANCY_ASAN=1), every test already runs
# instrumented: this one has nothing to add and says so (exit 77, skipped).
#
# Exit: 0 clean, 1 a test failed or a sanitizer reported, 77 this tree is instrumented,
# 99 the second tree could not be prepared (distdir, configure).
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=.}"
top_srcdir=$(cd "$top_srcdir" && pwd)
top_builddir=$(cd "$top_builddir" && pwd)

DEFAULT_TESTS="tests/unit/check_core tests/unit/check_fcgi tests/unit/check_admin
    tests/unit/storage/run.sh tests/unit/tenancy/run.sh
    tests/integration/basic.sh tests/integration/probes.sh tests/integration/hostile.sh
    tests/integration/tenancy.sh tests/integration/storage.sh tests/integration/migrate.sh
    tests/integration/admin_http.sh"
SANITIZER_TESTS=${SANITIZER_TESTS:-$DEFAULT_TESTS}
JOBS=${SANITIZER_JOBS:-2}

say() { printf 'sanitizers: %s\n' "$*"; }
if [ "${TENANCY_ASAN:-0}" = 1 ]; then
    say "this tree is built with --enable-asan: every test here already runs instrumented"
    exit 77
fi

S=$top_builddir/tests/sanitizers
SRC=$S/src
B=$S/build
mkdir -p "$S" || exit 99
# Not the caller's make flags (its job server, its -k): these are builds of their own.
mk() { MAKEFLAGS= MFLAGS= nice -n 5 ${MAKE:-make} "$@"; }

t0=$SECONDS
rm -rf "$SRC.new"
if ! mk -s -C "$top_builddir" distdir distdir="$SRC.new" top_distdir="$SRC.new" \
        > "$S/distdir.log" 2>&1; then
    tail -n 20 "$S/distdir.log"
    say "ERROR: make distdir failed (log: $S/distdir.log)"
    exit 99
fi
rm -rf "$SRC" && mv "$SRC.new" "$SRC" || exit 99
# The npm clients some tests drive (./autogen.sh --deps installs them) are not distributed:
# the copy uses the source tree's, so that "all" runs those tests too.
for d in tests/sse tests/postgrest tests/browser; do
    [ -d "$top_srcdir/$d/node_modules" ] && ln -sfn "$top_srcdir/$d/node_modules" "$SRC/$d/node_modules"
done

if [ ! -f "$B/config.status" ]; then
    rm -rf "$B"
    mkdir -p "$B"
    # -O1: the usual level for sanitizer builds (readable stacks, a faster build).
    if ! (cd "$B" && "$SRC/configure" -q --enable-asan CC="${TENANCY_CC:-cc}" \
            CFLAGS="-g -O1") > "$S/configure.log" 2>&1; then
        tail -n 20 "$S/configure.log"
        rm -f "$B/config.status"
        say "ERROR: configure --enable-asan failed (log: $S/configure.log)"
        exit 99
    fi
fi
if ! mk -s -C "$B" -j"$JOBS" all > "$S/build.log" 2>&1; then
    grep -E 'error|Error' "$S/build.log" | head -n 20
    say "FAIL: the --enable-asan build failed (log: $S/build.log)"
    exit 1
fi
say "instrumented tree ready in $((SECONDS - t0)) s ($B)"

t1=$SECONDS
if [ "$SANITIZER_TESTS" = all ]; then
    mk -C "$B" -j"$JOBS" check > "$S/check.log" 2>&1
else
    # shellcheck disable=SC2086 # the list is words
    mk -C "$B" -j"$JOBS" check TESTS="$(echo $SANITIZER_TESTS)" > "$S/check.log" 2>&1
fi
rc=$?
grep -E '^(PASS|FAIL|ERROR|XPASS|SKIP):' "$S/check.log" | sed 's/^/  /'
if [ "$rc" -ne 0 ]; then
    # The failed tests' logs (with any sanitizer report) are in the tree's test-suite.log.
    [ -f "$B/test-suite.log" ] && sed -n '1,400p' "$B/test-suite.log"
    grep -q '^[A-Z]*:' "$S/check.log" || tail -n 30 "$S/check.log"
    say "FAIL: under the sanitizers (in $((SECONDS - t1)) s; logs under $B)"
    exit 1
fi
say "ok: $(grep -c '^PASS:' "$S/check.log") tests clean under ASan, LSan and UBSan in $((SECONDS - t1)) s (build $((t1 - t0)) s)"
exit 0
