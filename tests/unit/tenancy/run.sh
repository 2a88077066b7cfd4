#!/bin/bash
# run.sh — the tenancy unit suite (check_tenancy) against SQLite and a real PostgreSQL.
#
# Owns: starting a throwaway cluster with tests/pg.sh, running the Check program with
# TENANCY_TEST_PG pointing at it, and stopping the cluster whatever happens. Must not: skip.
# A cluster that cannot be started is a hard error (exit 99). Listed in TESTS; the Check
# program itself is not (it cannot run without the cluster).
#
# Environment (set by the Makefile): top_srcdir, top_builddir.
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
exec bash "$top_srcdir/tests/pg.sh" run "$top_builddir/tests/unit/check_tenancy"
