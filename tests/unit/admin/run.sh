#!/bin/bash
# run.sh — the admin suite's PostgreSQL half: check_admin's "handle_pg" case (the panel's
# sessions, logins, throttling and the registry upgrade on a PostgreSQL registry).
#
# Owns: starting a throwaway cluster with tests/pg.sh, running check_admin with
# TENANCY_TEST_PG pointing at it (only that case: the SQLite one runs as a unit test of its
# own), and stopping the cluster whatever happens. Must not: skip. A cluster that cannot be
# started is a hard error (exit 99).
#
# Environment (set by the Makefile): top_srcdir, top_builddir.
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
CK_RUN_CASE=handle_pg exec bash "$top_srcdir/tests/pg.sh" run "$top_builddir/tests/unit/check_admin"
