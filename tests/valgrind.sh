#!/bin/bash
# valgrind.sh — the Check unit programs under valgrind, in one process each (CK_FORK=no), so
# that a leak, an invalid read or a use of uninitialised memory fails the run. A test of
# `make check` (about 30 s), and `make check-valgrind`.
#
#   tests/valgrind.sh PROGRAM...      e.g. tests/unit/check_core (paths in the build tree), or
#                                     just check_core; without one, $VALGRIND_UNIT_LIST (the
#                                     Makefile's: UNIT_TESTS and the two PostgreSQL-backed
#                                     programs)
#
# Most unit programs need nothing. check_storage and check_tenancy need a PostgreSQL
# cluster, as their run.sh wrappers do: one throwaway cluster (tests/pg.sh) is started for
# both and stopped whatever happens. The command per program is
#
#   CK_FORK=no valgrind --leak-check=full --error-exitcode=1 --suppressions=tests/valgrind.supp
#       PROGRAM
#
# Tests that need fork mode (a test that expects a signal: the process
# would die of it; one that changes the process's limits) carry the Check tag "fork", and tests too big for valgrind's pace (the job
# store's backlogs of 10,000 jobs, its processes claiming at once, whose forked children
# valgrind reports for the memory they inherit) the tag "slow": both are left out with
# CK_EXCLUDE_TAGS. Each
# program's valgrind output is in $top_builddir/tests/valgrind-<program>.log.
#
# In a tree built with --enable-asan (TENANCY_ASAN=1) the programs are instrumented, and
# valgrind cannot run those: there the sanitizers do this job, and this test says so (77).
#
# Exit: 0 clean, 1 valgrind found something (or a test failed), 77 an --enable-asan tree,
# 99 valgrind or the cluster is missing (never a skip).
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=.}"
if [ "${TENANCY_ASAN:-0}" = 1 ]; then
    echo "valgrind.sh: this tree is built with --enable-asan, which valgrind cannot run;" \
        "the sanitizers check these programs here"
    exit 77
fi
command -v valgrind > /dev/null || { echo "valgrind.sh: ERROR: valgrind is missing (Debian: valgrind)" >&2; exit 99; }
progs=("$@")
# shellcheck disable=SC2206 # the Makefile's list is words
[ "${#progs[@]}" -gt 0 ] || progs=(${VALGRIND_UNIT_LIST:-})
[ "${#progs[@]}" -gt 0 ] || { sed -n '3,9p' "$0"; exit 2; }

PG_DIR=
cleanup() { [ -n "$PG_DIR" ] && bash "$top_srcdir/tests/pg.sh" stop "$PG_DIR"; }
trap cleanup EXIT
trap 'exit 1' INT TERM

failed=0
for arg in "${progs[@]}"; do
    case "$arg" in */*) prog=$top_builddir/$arg ;; *) prog=$top_builddir/tests/unit/$arg ;; esac
    p=$(basename "$arg")
    [ -x "$prog" ] || { echo "valgrind.sh: $prog is not built (make check builds it)" >&2; exit 99; }
    case "$p" in
    check_storage|check_tenancy)
        if [ -z "$PG_DIR" ]; then
            env=$(bash "$top_srcdir/tests/pg.sh" start) || {
                echo "valgrind.sh: ERROR (environment): PostgreSQL could not be started" >&2
                exit 99
            }
            eval "$env"
            PG_DIR=$TENANCY_TEST_PG_DIR
        fi ;;
    esac
    log=$top_builddir/tests/valgrind-$p.log
    start=$SECONDS
    CK_FORK=no CK_EXCLUDE_TAGS='fork slow' \
        valgrind --leak-check=full --error-exitcode=1 --suppressions="$top_srcdir/tests/valgrind.supp" --num-callers=30 \
        --log-file="$log" "$prog" > "$log.out" 2>&1
    rc=$?
    summary=$(grep -E 'ERROR SUMMARY|definitely lost|indirectly lost|possibly lost' "$log" |
        sed 's/^==[0-9]*== *//' | tr '\n' ';')
    checks=$(grep -E '^[0-9]+%: Checks' "$log.out" | tail -1)
    if [ "$rc" -ne 0 ]; then
        failed=1
        echo "valgrind.sh: FAIL: $p (exit $rc, $((SECONDS - start)) s): $checks $summary"
        echo "  see $log and $log.out"
    else
        echo "valgrind.sh: ok: $p ($((SECONDS - start)) s): $checks $summary"
    fi
done
exit "$failed"
