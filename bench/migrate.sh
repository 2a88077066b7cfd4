#!/bin/bash
# migrate.sh — what provisioning and `tenancy migrate` cost, on SQLite and on a throwaway
# PostgreSQL (tests/pg.sh; fsync off, so commits are cheaper than on a real server).
#
#   bench/migrate.sh BUILD_DIR [TENANTS] [BIG]
#
# BUILD_DIR is a configured and built tree (tenancy/tenancy, storage/.libs/pgdriver.so).
# Prints, per backend:
#   - creation with 20 migrations replayed vs cloned from a template (--from-template), as
#     the CLI reports it (.storage.ms: storage, migrations, seed, registry; not the process);
#   - a wave of 20 new migrations over TENANTS tenants with -j 1: files per second in one
#     tenant, and tenants per second;
#   - a no-op wave (everything current) with -j 1 and -j 4;
#   - PostgreSQL only: the same 20-file wave over the same 50 tenants when the database holds
#     50 tenant schemas and when it holds BIG (default 2000): the per-tenant cost must not
#     grow with the number of schemas.
# Owns: nothing but this measurement. Needs: sqlite3, psql, the source tree's tests/pg.sh.
set -u
B=${1:?usage: bench/migrate.sh BUILD_DIR [TENANTS] [BIG]}
N=${2:-50}
BIG=${3:-2000}
SRC=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "$B" && pwd)
TENANCY=$B/tenancy/tenancy
JSON=$B/tests/helpers/json_check
export TENANCY_PGDRIVER=$B/storage/.libs/pgdriver.so
[ -x "$TENANCY" ] && [ -x "$JSON" ] || { echo "build $B first (and make check's helpers)" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/tenancy-bench-migrate.XXXXXX")
eval "$(bash "$SRC/tests/pg.sh" start bench_migrate)" || { echo "no PostgreSQL" >&2; exit 1; }
trap 'bash "$SRC/tests/pg.sh" stop "$TENANCY_TEST_PG_DIR"; rm -rf "$W"' EXIT

# 20 migrations: a table and an index each (the later ones with a foreign key).
mkdir -p "$W/mig20" "$W/wave" "$W/none"
for i in $(seq 1 20); do
    v=$(printf %04d "$i")
    {
        echo "CREATE TABLE m$i (id INTEGER PRIMARY KEY, name TEXT NOT NULL, ref INTEGER$( [ "$i" -gt 1 ] && echo " REFERENCES m$((i - 1)) (id)"), at BIGINT);"
        echo "CREATE INDEX m${i}_name ON m$i (name);"
    } > "$W/mig20/${v}_table_$i.sql"
done
cp "$W/mig20/"*.sql "$W/wave/"
for i in $(seq 21 40); do
    v=$(printf %04d "$i")
    echo "ALTER TABLE m$((i - 20)) ADD COLUMN c$i TEXT; CREATE INDEX m${i}_c ON m$((i - 20)) (c$i);" \
        > "$W/wave/${v}_column_$i.sql"
done
echo "INSERT INTO m1 (id, name, at) VALUES (1, \$1, 0);" > "$W/seed.sql"

mean() { awk '{ s += $1; n++ } END { if (n) printf "%.1f", s / n; else print "-" }'; }
median() { sort -n | awk '{ a[n++] = $1 } END { if (n) print a[int(n / 2)]; else print "-" }'; }

conf() {   # conf NAME PLACEMENT-LINES... : $W/NAME.conf with state in $W/NAME
    local name=$1
    shift
    {
        echo "app = /nonexistent.so"
        echo "state_dir = $W/$name"
        echo "storage.seed = $W/seed.sql"
        echo "storage.template = tpl"
        for l in "$@"; do echo "$l"; done
    } > "$W/$name.conf"
    "$TENANCY" -c "$W/$name.conf" init > /dev/null
}
set_mig() { sed -i "/^storage.migrations/d" "$1"; echo "storage.migrations = $2" >> "$1"; }

# create CONF PREFIX COUNT [ARGS]: .storage.ms of each create, one a line
create() {
    local c=$1 prefix=$2 n=$3 i
    shift 3
    for i in $(seq 1 "$n"); do
        "$TENANCY" -c "$c" --json tenant create "$prefix$i" "$@" | "$JSON" .storage.ms
    done
}

# wave CONF ARGS: seconds, and the per-tenant ms of the tenants migrated
wave() {
    local c=$1
    shift
    "$TENANCY" -c "$c" --json migrate "$@" > "$W/wave.json" 2> /dev/null
    local n i
    n=$("$JSON" .total < "$W/wave.json")
    WAVE_SECS=$("$JSON" .seconds < "$W/wave.json")
    WAVE_MS=$(for i in $(seq 0 $((n - 1))); do "$JSON" ".tenants[$i].ms" < "$W/wave.json"; done)
    WAVE_N=$n
}

bench_backend() {   # bench_backend NAME PLACEMENT-LINES...
    local name=$1
    shift
    echo "== $name"
    conf "$name" "$@"
    local c=$W/$name.conf
    set_mig "$c" "$W/mig20"
    "$TENANCY" -c "$c" tenant create tpl --no-seed > /dev/null
    "$TENANCY" -c "$c" tenant suspend tpl > /dev/null
    local replay clone
    replay=$(create "$c" r 10)
    clone=$(create "$c" c 10 --from-template)
    printf 'create, 20 migrations replayed: mean %s ms, median %s ms\n' \
        "$(echo "$replay" | mean)" "$(echo "$replay" | median)"
    printf 'create, cloned from a template: mean %s ms, median %s ms\n' \
        "$(echo "$clone" | mean)" "$(echo "$clone" | median)"

    # A wave of 20 files over N tenants created without migrations.
    set_mig "$c" "$W/none"
    create "$c" w "$N" --no-seed > /dev/null
    set_mig "$c" "$W/mig20"
    local slugs
    slugs=$(seq -f 'w%g' 1 "$N")
    # shellcheck disable=SC2086
    wave "$c" $slugs -j 1
    local per
    per=$(echo "$WAVE_MS" | mean)
    printf 'wave of 20 files, -j 1, %d tenants: %.2f s, %s ms a tenant = %.0f migrations/s in a tenant, %.1f tenants/s\n' \
        "$WAVE_N" "$WAVE_SECS" "$per" "$(echo "20000 / $per" | bc -l)" \
        "$(echo "$WAVE_N / $WAVE_SECS" | bc -l)"
    # shellcheck disable=SC2086
    wave "$c" $slugs -j 1
    printf 'no-op wave, -j 1: %.1f tenants/s (%s ms a tenant)\n' \
        "$(echo "$WAVE_N / $WAVE_SECS" | bc -l)" "$(echo "$WAVE_MS" | mean)"
    # shellcheck disable=SC2086
    wave "$c" $slugs -j 4
    printf 'no-op wave, -j 4: %.1f tenants/s\n' "$(echo "$WAVE_N / $WAVE_SECS" | bc -l)"
}

bench_backend sqlite
bench_backend pg-schema "storage.placement = pg" "placement.pg.dsn = \"$TENANCY_TEST_PG\"" \
    "placement.pg.mode = schema"
bench_backend pg-database "storage.placement = pgdb" "placement.pgdb.dsn = \"$TENANCY_TEST_PG\"" \
    "placement.pgdb.mode = database"

# ---- PostgreSQL: does a tenant's migration cost grow with the number of schemas? -------------
echo "== growth (PostgreSQL, schema mode)"
conf growth "storage.placement = pg" "placement.pg.dsn = \"$TENANCY_TEST_PG\"" \
    "placement.pg.mode = schema"
c=$W/growth.conf
set_mig "$c" "$W/none"
create "$c" g 50 --no-seed > /dev/null
# filler FROM TO: tenant schemas with a dozen relations each, straight into the catalog
filler() {
    local i
    for i in $(seq "$1" "$2"); do
        echo "CREATE SCHEMA f$i; CREATE TABLE f$i.a (id int PRIMARY KEY, n text);"
        echo "CREATE TABLE f$i.b (id int PRIMARY KEY, a int REFERENCES f$i.a, n text);"
        echo "CREATE INDEX ON f$i.b (n); CREATE TABLE f$i.tenancy_migrations (version text PRIMARY KEY);"
    done | psql -qX -v ON_ERROR_STOP=1 > /dev/null
}
measure() {   # the 20-file wave over g1..g50, then reset them to no migrations
    set_mig "$c" "$W/mig20"
    # shellcheck disable=SC2046
    wave "$c" $(seq -f 'g%g' 1 50) -j 1
    printf '%6d schemas: %s ms a tenant for 20 files\n' "$(psql -qAtX -c \
        "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'f%' OR nspname LIKE 't\\_%'")" \
        "$(echo "$WAVE_MS" | mean)"
    local i
    for i in $(seq 1 50); do
        psql -qX -c "DROP SCHEMA t_g$i CASCADE; CREATE SCHEMA t_g$i" > /dev/null
    done
}
measure
filler 1 "$BIG"
psql -qX -c "ANALYZE" > /dev/null
measure
