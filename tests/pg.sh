#!/bin/bash
# pg.sh — a throwaway PostgreSQL cluster for tests: start one, stop and delete it.
#
#   eval "$(tests/pg.sh start [DBNAME])"    # DBNAME defaults to tenancy_test
#   ... tests ...
#   tests/pg.sh stop "$TENANCY_TEST_PG_DIR"
#
# `start` makes a private folder (mktemp -d under $TMPDIR or /tmp), runs initdb there (as
# the `postgres` user when we are root: the server refuses to run as root), and starts the
# server listening ONLY on a unix socket in that folder (no TCP, so parallel runs never
# collide), with fsync off (the data is thrown away) and trust authentication for the
# superuser `postgres`. It creates the database, then prints, for eval, one line:
#
#   export PGHOST=DIR PGPORT=5432 PGUSER=postgres PGDATABASE=DBNAME TENANCY_TEST_PG_DIR=DIR
#          TENANCY_TEST_PG='postgres:host=DIR port=5432 dbname=DBNAME user=postgres'
#
# so psql and libpq clients started afterwards reach the cluster with no options, and our
# Check suites read TENANCY_TEST_PG (a tenancy storage URI). Progress and errors go to
# stderr; the exit status is 0, or 1 when the cluster could not be started (the folder is
# then removed and the server log shown). Callers must turn that into a hard failure (exit
# 99 under automake), never a skip: see tests/unit/storage/run.sh.
#
# `stop DIR` stops the server (immediate mode: nothing in it is worth a checkpoint) and
# deletes DIR; it refuses a folder that `start` did not make (no marker file in it).
#
# `run PROG [ARG...]` does both around one program (see run below).
#
# Binaries: $PG_BINDIR, else `pg_config --bindir` when initdb is there, else the newest
# /usr/lib/postgresql/*/bin (Debian keeps the server out of PATH). Start takes 1-2 s.
set -u

MARKER=.tenancy-pg-cluster
PORT=5432   # only names the socket file: the folder is private, so it never clashes

say() { printf 'pg.sh: %s\n' "$*" >&2; }

find_bindir() {
    local d
    if [ -n "${PG_BINDIR:-}" ] && [ -x "$PG_BINDIR/initdb" ]; then
        echo "$PG_BINDIR"
        return 0
    fi
    if command -v pg_config >/dev/null 2>&1; then
        d=$(pg_config --bindir 2>/dev/null)
        if [ -n "$d" ] && [ -x "$d/initdb" ]; then
            echo "$d"
            return 0
        fi
    fi
    d=$(printf '%s\n' /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)
    if [ -x "$d" ]; then
        echo "${d%/initdb}"
        return 0
    fi
    return 1
}

# Run a server binary as the cluster's owner.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# Single-quote a value for eval.
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

start() {
    local db=${1:-tenancy_test} bindir dir
    [[ $db =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || { say "bad database name: $db"; return 1; }
    bindir=$(find_bindir) || {
        say "no PostgreSQL server binaries (initdb) found; install postgresql"
        return 1
    }
    if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
        say "running as root but there is no 'postgres' user to own the cluster"
        return 1
    fi
    dir=$(mktemp -d "${TMPDIR:-/tmp}/tenancy-pg.XXXXXX") || {
        say "mktemp failed"
        return 1
    }
    : > "$dir/$MARKER"
    # unix socket paths are limited to 107 bytes
    if [ $((${#dir} + 20)) -gt 107 ]; then
        say "folder name too long for a unix socket: $dir (set TMPDIR shorter)"
        rm -rf "$dir"
        return 1
    fi
    if [ "$(id -u)" -eq 0 ]; then
        chown postgres "$dir" || { rm -rf "$dir"; return 1; }
    fi
    if ! as_owner "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 \
        --locale=C --no-sync >"$dir/initdb.log" 2>&1; then
        say "initdb failed:"
        sed 's/^/    /' "$dir/initdb.log" >&2
        rm -rf "$dir"
        return 1
    fi
    if ! as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 30 \
        -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c port=$PORT \
-c fsync=off -c synchronous_commit=off -c full_page_writes=off" start >"$dir/pg_ctl.log" 2>&1
    then
        say "the server did not start:"
        sed 's/^/    /' "$dir/pg_ctl.log" "$dir/postgres.log" >&2 2>/dev/null
        as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1
        rm -rf "$dir"
        return 1
    fi
    if ! "$bindir/createdb" -h "$dir" -p "$PORT" -U postgres "$db" >"$dir/createdb.log" 2>&1
    then
        say "createdb failed:"
        sed 's/^/    /' "$dir/createdb.log" >&2
        as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1
        rm -rf "$dir"
        return 1
    fi
    printf 'export PGHOST=%s PGPORT=%s PGUSER=postgres PGDATABASE=%s TENANCY_TEST_PG_DIR=%s ' \
        "$(q "$dir")" "$PORT" "$db" "$(q "$dir")"
    printf 'TENANCY_TEST_PG=%s\n' \
        "$(q "postgres:host=$dir port=$PORT dbname=$db user=postgres")"
}

stop() {
    local dir=${1:-} bindir
    if [ -z "$dir" ] || [ ! -f "$dir/$MARKER" ]; then
        say "stop: '$dir' is not a cluster folder made by pg.sh start"
        return 1
    fi
    if [ -f "$dir/data/postmaster.pid" ]; then
        bindir=$(find_bindir) || { say "no pg_ctl found"; return 1; }
        as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 ||
            say "stop: pg_ctl stop failed (removing the folder anyway)"
    fi
    rm -rf "$dir"
}

# run PROG [ARG...]: PROG with a cluster of its own (the environment of `start` exported),
# stopped whatever happens; PROG's exit status, or 99 (a hard error under automake, never a
# skip) when PROG is not built or the cluster cannot be started. The unit suites' run.sh.
run() {
    local prog=${1:-} env status
    [ -x "$prog" ] || { say "run: $prog is not built"; return 99; }
    env=$(start) || { say "ERROR (environment): PostgreSQL could not be started for $prog"; return 99; }
    eval "$env"
    trap 'stop "$TENANCY_TEST_PG_DIR"' EXIT
    trap 'exit 1' INT TERM
    "$@"
    status=$?
    return $status
}

case ${1:-} in
start) shift; start "$@" ;;
stop) shift; stop "$@" ;;
run) shift; run "$@" ;;
*)
    echo "usage: $0 start [DBNAME] | stop DIR | run PROG [ARG...]" >&2
    exit 2
    ;;
esac
