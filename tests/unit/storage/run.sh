#!/bin/bash
# run.sh — the storage unit suite (check_storage) against SQLite and a real PostgreSQL.
#
# Starts a throwaway cluster with tests/pg.sh, runs the Check program with TENANCY_TEST_PG
# pointing at it, and stops the cluster whatever happens. A cluster that cannot be started
# is a hard error (exit 99), never a skip. Listed in TESTS; the Check program itself is
# not (it cannot run without the cluster).
#
# Environment (set by the Makefile): top_srcdir, top_builddir.
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
exec bash "$top_srcdir/tests/pg.sh" run "$top_builddir/tests/unit/check_storage"
