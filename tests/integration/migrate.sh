#!/bin/bash
# migrate.sh — provisioning in `tenancy tenant create` and `tenancy migrate`, run for real on
# SQLite (a registry file and a file per tenant) and on a throwaway PostgreSQL (tests/pg.sh:
# the registry in schema tenancy, a schema per tenant), with the same cases.
#
# Checks: a create applies the migrations and the seed ($1 slug, $2 name, $3 id) and records
# the version; a create that fails half-way (a bad migration, a bad seed, a storage that is
# already there) leaves no storage of its own and no registry entry, and names the step; a
# migration that fails for one tenant only (its data violates a new unique index) rolls that
# tenant back to its last file and records the error, while the others are migrated and the
# exit status is 1; running again resumes; --canary stops everything when a canary fails;
# --stop-on-error stops handing out tenants; -j 4 over 200 tenants; 4 workers without -j; a
# registry that refuses one tenant's copy fails that tenant alone; the bulk create
# (--from-file -j 4: every good line created, migrated and seeded, a bad slug and duplicates
# refused alone, exit 1); --json parses
# (tests/helpers/json_check); migrate status counts versions; a template clone.
#
# Owns: these cases. Must not: change tenants' storage except to plant the data that makes
# a migration fail (and to remove it again), through sqlite3 or psql.
. "$(dirname "$0")/lib.sh"
TENANCY=${TENANCY:-$top_builddir/tenancy/tenancy}
JSON_CHECK=${JSON_CHECK:-$HELPERS/json_check}
need "$TENANCY" "$JSON_CHECK" sqlite3 psql xargs

PG_DIR=
stop_pg() { [ -n "$PG_DIR" ] && bash "$top_srcdir/tests/pg.sh" stop "$PG_DIR"; PG_DIR=; }
trap 'rc=$?; stop_pg; (exit $rc); cleanup' EXIT
pgenv=$(bash "$top_srcdir/tests/pg.sh" start tenancy_migrate) ||
    hard_error "PostgreSQL could not be started (tests/pg.sh start)"
eval "$pgenv"
PG_DIR=$TENANCY_TEST_PG_DIR

N=${MIGRATE_TENANTS:-200}
BACKEND= CONF= STATE=
RC=0 OUT= ERR=

run() {   # run [-c CONF] ARGS...: sets RC, OUT, ERR
    local conf=$CONF
    if [ "$1" = -c ]; then conf=$2; shift 2; fi
    "$TENANCY" -c "$conf" "$@" > "$T/out" 2> "$T/err"
    RC=$?
    OUT=$(cat "$T/out")
    ERR=$(cat "$T/err")
}
jrun() {   # the same with --json; stdout must be exactly one JSON document
    run "$@" --json
    "$JSON_CHECK" < "$T/out" 2> "$T/jerr" ||
        fail "$BACKEND: --json $*: not one JSON document ($(cat "$T/jerr")): $(head -c 300 "$T/out")"
}
jget() { "$JSON_CHECK" "$1" < "$T/out"; }
row() { printf '%s\n' "$OUT" | awk -F'\t' -v s="$1" '$1 == s'; }   # a tenant's TSV line

# q SLUG SQL: a query in the tenant's own storage; st SLUG: "yes" when its storage exists.
q() {
    if [ "$BACKEND" = sqlite ]; then
        sqlite3 -batch "$STATE/tenants/$1.db" "$2"
    else
        psql -qAtX -v ON_ERROR_STOP=1 -c "SET search_path TO t_${1//-/_}" -c "$2"
    fi
}
st() {
    if [ "$BACKEND" = sqlite ]; then
        [ -e "$STATE/tenants/$1.db" ] && echo yes || echo no
    else
        [ "$(psql -qAtX -c "SELECT count(*) FROM pg_namespace WHERE nspname = 't_${1//-/_}'")" = 1 ] &&
            echo yes || echo no
    fi
}
version_of() { q "$1" "SELECT max(version) FROM tenancy_migrations"; }

mkdir -p "$T/mig" "$T/badmig"
cat > "$T/mig/0001_items.sql" <<'SQL'
-- items of a tenant
CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER NOT NULL DEFAULT 0);
CREATE INDEX items_qty ON items (qty);
SQL
cat > "$T/mig/0002_tags.sql" <<'SQL'
CREATE TABLE tags (id INTEGER PRIMARY KEY, label TEXT NOT NULL);
SQL
cat > "$T/seed.sql" <<'SQL'
-- $1 is the slug, $2 the name, $3 the id
INSERT INTO items (id, name, qty) VALUES (1, 'seed of ' || $1, 1);
INSERT INTO tags (id, label) VALUES ($3, $2);
INSERT INTO tags (id, label) VALUES (0, 'a literal $2; kept');
SQL
printf 'INSERT INTO items (id, name) VALUES (1, $1);\nINSERT INTO nosuch VALUES (1);\n' \
    > "$T/badseed.sql"
cp "$T/mig/"*.sql "$T/badmig/"
printf 'CREATE TABLE half (id INTEGER);\nINSERT INTO items (id, name) VALUES (5, NULL);\n' \
    > "$T/badmig/0003_bad.sql"

# ---- the cases, once per backend ---------------------------------------------------------------
cases() {
    BACKEND=$1
    local b=$1
    log "==== $b"
    run init
    [ "$RC" = 0 ] || fatal "$b: init: $ERR"

    # ---- create: migrations, seed, version recorded ----
    jrun tenant create acme --name "Acme Inc."
    assert_eq "$RC" 0 "$b: create acme ($ERR)"
    assert_eq "$(jget .tenant.state)" active "$b: created active"
    assert_eq "$(jget .storage.migration_version)" 0002 "$b: migrations applied at create"
    assert_eq "$(jget .storage.applied)" 2 "$b: two files applied"
    assert_eq "$(jget .storage.seeded)" true "$b: seeded"
    assert_eq "$(st acme)" yes "$b: storage created"
    assert_eq "$(q acme "SELECT name FROM items WHERE id = 1")" "seed of acme" "$b: seed \$1"
    assert_eq "$(q acme "SELECT label FROM tags WHERE id = $(jget .tenant.id)")" "Acme Inc." \
        "$b: seed \$2 and \$3"
    assert_eq "$(q acme "SELECT label FROM tags WHERE id = 0")" 'a literal $2; kept' \
        "$b: a \$2 inside a string is not a parameter"
    assert_eq "$(q acme "SELECT count(*) FROM tenancy_migrations")" 2 "$b: version rows"
    jrun migrate status
    assert_eq "$(jget .latest)" 0002 "$b: status latest"
    assert_eq "$(jget '.versions[0].version')" 0002 "$b: the registry has the version"

    # ---- a create that fails half-way leaves nothing ----
    run -c "$CONF.badmig" tenant create broken
    assert_eq "$RC" 1 "$b: create with a failing migration fails"
    assert_contains "$ERR" "cannot apply the migrations: 0003_bad.sql statement 2 (line 2)" \
        "$b: the step, file and statement are named"
    assert_contains "$ERR" "its storage was dropped and its registry entry removed" \
        "$b: says what was undone"
    assert_eq "$(st broken)" no "$b: no storage left after a failed migration"
    run tenant show broken
    assert_eq "$RC" 1 "$b: no registry entry left after a failed migration"
    jrun -c "$CONF.badseed" tenant create broken
    assert_eq "$RC" 1 "$b: create with a failing seed fails"
    assert_contains "$(jget .error)" "cannot run the seed: badseed.sql statement 2" \
        "$b: the seed step is named (--json)"
    assert_eq "$(jget .code)" invalid "$b: its code"
    assert_eq "$(st broken)" no "$b: no storage left after a failed seed"
    run tenant show broken
    assert_eq "$RC" 1 "$b: no registry entry left after a failed seed"
    # A storage that is already there is not ours: refused and left alone.
    if [ "$b" = sqlite ]; then
        echo keep > "$STATE/tenants/squat.db"
    else
        psql -qAtX -c "CREATE SCHEMA t_squat; CREATE TABLE t_squat.keep (id int)"
    fi
    run tenant create squat
    assert_eq "$RC" 1 "$b: create over an existing storage fails"
    assert_contains "$ERR" "already exists" "$b: says the storage exists"
    assert_eq "$(st squat)" yes "$b: someone else's storage is left alone"
    run tenant show squat
    assert_eq "$RC" 1 "$b: no registry entry for it"
    run tenant create nope --placement nowhere
    assert_eq "$RC" 1 "$b: an unknown placement"
    assert_contains "$ERR" "no placement 'nowhere'" "$b: names the placement"

    # ---- many tenants: one bulk create (--from-file), 4 at a time ----
    # A name and a domain on one line; a bad slug, a slug given twice, one that exists and
    # one whose storage is someone else's (squat, above: in schema mode its CREATE SCHEMA
    # runs inside the tenant's one transaction) are refused alone, the rest is created, and
    # the exit status is 1.
    {
        seq -f 't%03g' 1 "$N" | sed 's/^t002$/t002\tTenant Two\tt002.example/'
        printf '\n# a comment\nBad_Slug\tbad\nt005\tagain\nacme\nsquat\n'
    } > "$T/bulk.tsv"
    local t0=$SECONDS
    jrun tenant create --from-file "$T/bulk.tsv" -j 4
    log "$b: bulk create of $N tenants in $((SECONDS - t0)) s (-j 4): $(jget .seconds) s"
    assert_eq "$RC" 1 "$b: bulk create exits 1 when a line failed ($ERR)"
    assert_eq "$(jget .created)" "$N" "$b: bulk create made every good line"
    assert_eq "$(jget .failed)" 4 "$b: bulk create refused 4 lines"
    assert_eq "$(jget .jobs)" 4 "$b: 4 workers"
    assert_eq "$(jget ".tenants[$N].slug")" Bad_Slug "$b: the bad slug reported"
    assert_eq "$(jget ".tenants[$N].line")" $((N + 3)) "$b: with its line"
    assert_contains "$(jget ".tenants[$N].error")" "invalid slug" "$b: the bad slug's reason"
    assert_eq "$(jget ".tenants[$((N + 1))].code")" exists "$b: the duplicate's code"
    assert_contains "$(jget ".tenants[$((N + 1))].error")" "given twice: already on line 5" \
        "$b: the duplicate in the file is named"
    assert_eq "$(jget ".tenants[$((N + 2))].code")" exists "$b: an existing tenant refused"
    assert_eq "$(jget ".tenants[$((N + 2))].status")" failed "$b: ... as failed"
    assert_eq "$(jget ".tenants[$((N + 3))].code")" exists "$b: someone else's storage refused"
    assert_contains "$(jget ".tenants[$((N + 3))].error")" "already exists" "$b: ... and named"
    assert_eq "$(st squat)" yes "$b: ... and left alone by the bulk create"
    assert_eq "$(jget '.tenants[6].status')" created "$b: t007 created"
    assert_eq "$(jget '.tenants[6].migration_version')" 0002 "$b: t007 migrated"
    assert_eq "$(jget '.tenants[6].seeded')" true "$b: t007 seeded"
    assert_eq "$(st Bad_Slug)$(st bad_slug)" nono "$b: no storage for the bad slug"
    run tenant show acme
    assert_eq "$RC" 0 "$b: the existing tenant is untouched"
    jrun tenant list --state active --limit 1000
    assert_eq "$(jget .total)" $((N + 1)) "$b: all $N in the registry, active (and acme)"
    jrun migrate status
    assert_eq "$(jget '.versions[0].tenants')" $((N + 1)) "$b: every version recorded"
    # the seed row of every tenant, in its own storage
    local i s seeded=0
    if [ "$b" = sqlite ]; then
        for ((i = 1; i <= N; i++)); do
            s=$(printf 't%03d' "$i")
            [ "$(q "$s" "SELECT name FROM items WHERE id = 1")" = "seed of $s" ] && seeded=$((seeded + 1))
        done
    else
        seeded=$(for ((i = 1; i <= N; i++)); do
            printf "SELECT name = 'seed of t%03d' AS ok FROM t_t%03d.items WHERE id = 1 UNION ALL\n" "$i" "$i"
        done | sed '$ s/ UNION ALL$//' | { printf 'SELECT count(*) FROM (\n'; cat; printf ') s WHERE ok;\n'; } |
            psql -qAtX -v ON_ERROR_STOP=1)
    fi
    assert_eq "$seeded" "$N" "$b: every bulk-created tenant has its seed row"
    run tenant show t002
    assert_contains "$OUT" "Tenant Two" "$b: the name from the file"
    assert_contains "$OUT" "t002.example (primary)" "$b: the domain from the file"
    assert_eq "$(q t002 "SELECT count(*) FROM tags WHERE label = 'Tenant Two'")" 1 \
        "$b: the seed got the name from the file"
    # stdin, the text form (tab-separated, no header), and a file that is not there
    printf 't001\n' | "$TENANCY" -c "$CONF" tenant create --from-file - > "$T/out" 2> "$T/err"
    assert_eq "$?" 1 "$b: bulk create from stdin of an existing tenant fails"
    assert_eq "$(cut -f1,2 "$T/out")" "$(printf 't001\tfailed')" "$b: its TSV line"
    assert_contains "$(cat "$T/err")" "1 of 1 tenant not created" "$b: the summary on stderr"
    run tenant create --from-file "$T/nosuch.tsv"
    assert_eq "$RC" 1 "$b: a missing file"
    run tenant create x --from-file "$T/bulk.tsv"
    assert_eq "$RC" 2 "$b: SLUG and --from-file together are a usage error"
    run tenant create late --state provisioning
    assert_eq "$RC" 0 "$b: create --state provisioning"
    run tenant delete "t$(printf %03d "$N")"
    assert_eq "$RC" 0 "$b: delete the last one"

    # ---- a migration that fails for one tenant only ----
    # The comment puts the failing statement on a line other than its number, so the error
    # must give the line the file has, not the statement's rank.
    cat > "$T/mig/0003_unique_names.sql" <<'SQL'
-- t007 holds a duplicate name: the index fails there alone
CREATE TABLE audit (id INTEGER PRIMARY KEY);
CREATE UNIQUE INDEX items_name ON items (name);
SQL
    q t007 "INSERT INTO items (id, name) VALUES (2, 'seed of t007')"   # a duplicate name
    local total=$N   # acme and t001..t(N-1); t(N) is deleting, late is provisioning
    t0=$(date +%s.%N)
    jrun migrate --all -j 4
    log "$b: -j 4 over $total tenants: $(jget .seconds) s"
    assert_eq "$RC" 1 "$b: exit 1 when a tenant failed"
    assert_eq "$(jget .ok)" false "$b: ok false"
    assert_eq "$(jget .total)" "$total" "$b: every migratable tenant taken"
    assert_eq "$(jget .failed)" 1 "$b: one failed"
    assert_eq "$(jget .migrated)" $((total - 1)) "$b: the others migrated"
    assert_eq "$(jget .left_out.deleting)" 1 "$b: a deleting tenant is left out"
    assert_eq "$(jget .left_out.provisioning)" 1 "$b: a provisioning tenant is left out"
    assert_eq "$(jget .code)" error "$b: the document has a code"
    assert_eq "$(jget '.tenants[7].slug')" t007 "$b: slug order"
    assert_eq "$(jget '.tenants[7].status')" failed "$b: t007 failed"
    assert_eq "$(jget '.tenants[7].to')" 0002 "$b: t007 stays at 0002"
    assert_contains "$(jget '.tenants[7].error')" "0003_unique_names.sql statement 2 (line 3)" \
        "$b: t007's error names file, statement and line"
    assert_eq "$(version_of t007)" 0002 "$b: t007's storage is at 0002"
    [ "$(q t007 "SELECT count(*) FROM audit" 2>/dev/null)" = "" ] ||
        fail "$b: t007's failed file was not rolled back whole"
    assert_eq "$(version_of t008)" 0003 "$b: t008 migrated"
    jrun migrate status
    assert_eq "$(jget .behind)" 2 "$b: status: t007 and late are behind"
    assert_eq "$(jget .failing)" 1 "$b: status: one tenant with an error"
    assert_eq "$(jget '.versions[0].version')" 0002 "$b: status: versions in order"
    assert_eq "$(jget '.versions[0].tenants')" 2 "$b: status: two at 0002"
    assert_eq "$(jget '.versions[1].tenants')" $((total - 1)) "$b: status: the rest at 0003"

    # Again: the others cost a version check; t007 still fails. Its registry copy is made
    # stale first: a failed tenant's version is still the one its own table holds.
    if [ "$b" = sqlite ]; then
        sqlite3 "$STATE/control.db" "UPDATE tenants SET migration_version = '0001' WHERE slug = 't007'"
    else
        psql -qAtX -v ON_ERROR_STOP=1 -c "UPDATE tenancy.tenants SET migration_version = '0001' WHERE slug = 't007'"
    fi
    run migrate --all -j 4
    assert_eq "$RC" 1 "$b: still failing"
    assert_eq "$(row t007 | cut -f2)" failed "$b: t007 failed again (TSV)"
    assert_eq "$(row t007 | cut -f3-4)" "$(printf '0002\t0002')" \
        "$b: t007's version read from its table, not its stale copy"
    assert_eq "$(row t008 | cut -f2)" current "$b: t008 is current"
    assert_contains "$ERR" "0 migrated, $((total - 1)) current, 1 failed" "$b: the summary"
    # Fixed: resumes where it stopped.
    q t007 "DELETE FROM items WHERE id = 2"
    run migrate t007 t008 t007
    assert_eq "$RC" 0 "$b: t007 migrates once its data is fixed ($ERR)"
    assert_eq "$(printf '%s\n' "$OUT" | wc -l)" 2 "$b: two tenants named (a slug given twice counts once)"
    assert_eq "$(row t007 | cut -f2-4)" "$(printf 'migrated\t0002\t0003')" "$b: t007 0002 -> 0003"
    jrun migrate --status
    assert_eq "$(jget .failing)" 0 "$b: the error is cleared in the registry"
    assert_eq "$(jget .behind)" 1 "$b: only late is behind"

    # ---- --canary: the first K tenants first; one fails, nothing else runs ----
    cat > "$T/mig/0004_unique_qty.sql" <<'SQL'
CREATE UNIQUE INDEX items_qty_unique ON items (qty);
SQL
    q acme "INSERT INTO items (id, name, qty) VALUES (2, 'another', 1)"
    jrun migrate --all --canary 3 -j 2
    assert_eq "$RC" 1 "$b: canary failure: exit 1"
    assert_eq "$(jget .stopped)" "a canary failed" "$b: stopped by the canary"
    assert_eq "$(jget '.tenants[0].status')" failed "$b: acme (a canary) failed"
    assert_eq "$(jget .migrated)" 2 "$b: the other canaries migrated"
    assert_eq "$(jget .skipped)" $((total - 3)) "$b: everything else skipped"
    local mid; mid=t$(printf %03d $((N / 2)))
    assert_eq "$(version_of "$mid")" 0003 "$b: $mid (not a canary) untouched"
    q acme "DELETE FROM items WHERE id = 2"

    # ---- --stop-on-error ----
    q t010 "INSERT INTO items (id, name, qty) VALUES (2, 'another', 1)"
    run migrate --all -j 1 --stop-on-error
    assert_eq "$RC" 1 "$b: stop-on-error: exit 1"
    assert_eq "$(row t010 | cut -f2)" failed "$b: t010 failed"
    assert_eq "$(row t009 | cut -f2)" migrated "$b: t009 (before it) migrated"
    assert_eq "$(row t011 | cut -f2)" skipped "$b: t011 (after it) skipped"
    assert_contains "$ERR" "stopped: stop on error" "$b: says why it stopped"
    q t010 "DELETE FROM items WHERE id = 2"
    run migrate --all -j 4
    assert_eq "$RC" 0 "$b: everything at 0004 after the fix ($ERR)"
    jrun migrate status
    assert_eq "$(jget .behind)" 1 "$b: all at the latest but late"

    # ---- the registry's copies: written in batches by the parent; one it refuses ----
    # t012's and t013's copies are stale (their storage is at 0004), and the registry refuses
    # any change to t012: t012 alone is reported, the rest of its batch is recorded.
    if [ "$b" = sqlite ]; then
        sqlite3 "$STATE/control.db" "UPDATE tenants SET migration_version = '0003' WHERE slug IN ('t012', 't013');
            CREATE TRIGGER refuse_t012 BEFORE UPDATE ON tenants WHEN NEW.slug = 't012'
            BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;"
    else
        psql -qAtX -v ON_ERROR_STOP=1 -c "UPDATE tenancy.tenants SET migration_version = '0003' WHERE slug IN ('t012', 't013')" \
            -c 'CREATE FUNCTION tenancy.refuse() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION $e$refused by the test$e$; END$$' \
            -c "CREATE TRIGGER refuse_t012 BEFORE UPDATE ON tenancy.tenants FOR EACH ROW WHEN (NEW.slug = 't012') EXECUTE FUNCTION tenancy.refuse()"
    fi
    jrun migrate --all
    assert_eq "$(jget .jobs)" 4 "$b: 4 workers without -j"
    assert_eq "$RC" 1 "$b: a copy the registry refuses fails the run"
    assert_eq "$(jget .failed)" 1 "$b: t012 alone failed"
    assert_eq "$(jget '.tenants[12].slug')" t012 "$b: slug order (t012)"
    assert_contains "$(jget '.tenants[12].error')" "migrated to 0004, but the registry could not record it" \
        "$b: t012's error says its copy was not written"
    assert_contains "$(jget '.tenants[12].error')" "refused by the test" "$b: and why"
    assert_eq "$(jget '.tenants[13].status')" current "$b: t013 current"
    if [ "$b" = sqlite ]; then
        sqlite3 "$STATE/control.db" "DROP TRIGGER refuse_t012"
    else
        psql -qAtX -v ON_ERROR_STOP=1 -c "DROP TRIGGER refuse_t012 ON tenancy.tenants" -c "DROP FUNCTION tenancy.refuse()"
    fi
    jrun migrate status
    assert_eq "$(jget .behind)" 2 "$b: t012's copy still says 0003 (and late)"
    run migrate --all
    assert_eq "$RC" 0 "$b: t012's copy written once the registry takes it ($ERR)"
    jrun migrate status
    assert_eq "$(jget .behind)" 1 "$b: every copy right again but late's"

    # ---- a progress bar on a terminal only ----
    run migrate --all -j 2
    case "$ERR" in *ETA*) fail "$b: a progress bar off a terminal" ;; *) log "ok: $b: no bar off a terminal" ;; esac
    TENANCY_CONF=$CONF script -qec "$TENANCY migrate --all -j 2" /dev/null > "$T/tty" 2>&1
    assert_contains "$(cat "$T/tty")" "tenants/s  ETA" "$b: a progress bar on a terminal"
    assert_contains "$(cat "$T/tty")" "SLUG" "$b: a table on a terminal"

    # ---- usage ----
    run migrate
    assert_eq "$RC" 2 "$b: migrate without tenants is a usage error"
    run migrate --all acme
    assert_eq "$RC" 2 "$b: --all and slugs"
    run migrate --all -j 0
    assert_eq "$RC" 2 "$b: -j 0"
    run migrate --status --all
    assert_eq "$RC" 2 "$b: --status with --all"
    run migrate nosuch
    assert_eq "$RC" 1 "$b: an unknown slug"
    assert_contains "$ERR" "no tenant 'nosuch'" "$b: names it"
    run migrate late
    assert_eq "$RC" 1 "$b: a provisioning tenant named is refused"

    # ---- from a template ----
    run tenant create tpl --no-seed
    assert_eq "$RC" 0 "$b: create the template ($ERR)"
    run tenant suspend tpl
    jrun -c "$CONF.tpl" tenant create fromtpl --name "From Template" --from-template
    assert_eq "$RC" 0 "$b: create --from-template ($ERR)"
    assert_eq "$(jget .storage.migration_version)" 0004 "$b: the clone is at the latest"
    assert_eq "$(q fromtpl "SELECT name FROM items WHERE id = 1")" "seed of fromtpl" \
        "$b: the seed ran after the clone"
    if [ "$b" = sqlite ]; then
        assert_eq "$(jget .storage.cloned)" true "$b: cloned (VACUUM INTO)"
        assert_eq "$(jget .storage.applied)" 0 "$b: nothing replayed"
    else
        assert_eq "$(jget .storage.cloned)" false "$b: schema mode cannot clone"
        run -c "$CONF.tpl" tenant create fromtpl2 --from-template
        assert_contains "$OUT" "cannot clone a schema" "$b: and says so"
    fi

    # ---- signals (PostgreSQL: pg_sleep makes a step last) ----
    [ "$b" = postgres ] || return 0
    # A create interrupted half-way is undone like a failed one.
    printf 'SELECT pg_sleep(3);\n' > "$T/slowseed.sql"
    sed 's/^storage.seed = .*/storage.seed = slowseed.sql/' "$CONF" > "$CONF.slow"
    "$TENANCY" -c "$CONF.slow" tenant create slow > "$T/slow.out" 2> "$T/slow.err" &
    local pid=$! rc
    wait_until 20 "$TENANCY" -c "$CONF" tenant show slow > /dev/null ||
        fail "$b: the slow create never registered its tenant"
    sleep 0.5   # into the seed
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    assert_eq "$rc" 1 "$b: an interrupted create fails"
    assert_contains "$(cat "$T/slow.err")" "interrupted by signal 15" "$b: says it was interrupted"
    assert_eq "$(st slow)" no "$b: no storage left after an interrupted create"
    run tenant show slow
    assert_eq "$RC" 1 "$b: no registry entry left after an interrupted create"
    # An interrupted wave: the tenants in hand finish, the rest are skipped, none is half done.
    printf 'CREATE TABLE slow (id INTEGER);\nSELECT pg_sleep(0.3);\n' > "$T/mig/0005_slow.sql"
    "$TENANCY" -c "$CONF" migrate --all -j 2 --json > "$T/wave.json" 2> "$T/wave.err" &
    pid=$!
    sleep 1.5
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    assert_eq "$rc" 1 "$b: an interrupted wave exits 1"
    "$JSON_CHECK" < "$T/wave.json" || fail "$b: the interrupted wave's --json does not parse"
    assert_eq "$("$JSON_CHECK" .stopped < "$T/wave.json")" interrupted "$b: stopped: interrupted"
    assert_ge "$("$JSON_CHECK" .skipped < "$T/wave.json")" 1 "$b: the rest skipped"
    assert_eq "$("$JSON_CHECK" .failed < "$T/wave.json")" 0 "$b: nothing failed"
    for s in acme t001 t002 "t$(printf %03d $((N - 1)))"; do
        local v has
        v=$(version_of "$s")
        has=$(q "$s" "SELECT CASE WHEN to_regclass('slow') IS NULL THEN 'no' ELSE 'yes' END")
        case "$v:$has" in 0004:no | 0005:yes) log "ok: $b: $s whole at $v" ;;
        *) fail "$b: $s is half migrated: version $v, table slow: $has" ;; esac
    done
    rm -f "$T/mig/0005_slow.sql"
}

# ---- SQLite --------------------------------------------------------------------------------
STATE=$T/sqlite/state
CONF=$T/sqlite.conf
mkdir -p "$T/sqlite"
base="app = /nonexistent/app.so
state_dir = $STATE
storage.migrations = mig
storage.seed = seed.sql"
printf '%s\n' "$base" > "$CONF"
printf '%s\n' "${base/= mig/= badmig}" > "$CONF.badmig"
printf '%s\n' "${base/seed.sql/badseed.sql}" > "$CONF.badseed"
printf '%s\nstorage.template = tpl\n' "$base" > "$CONF.tpl"
cases sqlite
rm -f "$T/mig/0003_unique_names.sql" "$T/mig/0004_unique_qty.sql"

# ---- PostgreSQL, a schema per tenant ---------------------------------------------------------
STATE=$T/pg/state
CONF=$T/pg.conf
mkdir -p "$T/pg"
base="app = /nonexistent/app.so
state_dir = $STATE
registry = \"$TENANCY_TEST_PG\"
storage.placement = pg
placement.pg.dsn = \"$TENANCY_TEST_PG\"
placement.pg.mode = schema
placement.pg.max_tenants = 50
storage.migrations = mig
storage.seed = seed.sql"
printf '%s\n' "$base" > "$CONF"
printf '%s\n' "${base/= mig/= badmig}" > "$CONF.badmig"
printf '%s\n' "${base/seed.sql/badseed.sql}" > "$CONF.badseed"
printf '%s\nstorage.template = tpl\n' "$base" > "$CONF.tpl"
cases postgres

# ---- tenancy init says when a placement's login cannot read its backends' memory ------------
# (the byte bound, placement.NAME.max_backend_memory, reads pg_backend_memory_contexts; the
# superuser above may; a plain login may not, and init says what that leaves)
psql -qAtX -c "DROP ROLE IF EXISTS tn_nostats" -c "CREATE ROLE tn_nostats LOGIN" > /dev/null ||
    fail "cannot make the role tn_nostats"
mkdir -p "$T/nostats"
printf 'app = /nonexistent/app.so\nstate_dir = %s\nplacement.pg.dsn = "%s user=tn_nostats"\nplacement.pg.mode = schema\n' \
    "$T/nostats" "$TENANCY_TEST_PG" > "$T/nostats.conf"
run -c "$T/nostats.conf" init
assert_eq "$RC" 0 "init with a login that cannot read its memory"
assert_contains "$ERR$OUT" "placement pg: its login may not read its backends' memory" \
    "init says the byte bound does not apply to that login"
run -c "$T/nostats.conf" check
assert_eq "$RC" 1 "check fails while the login cannot read its memory"
assert_contains "$OUT" "its login may not read its backends' memory" \
    "check says the byte bound does not apply to that login"
jrun -c "$T/nostats.conf" check
assert_eq "$(jq -r '[.problems[] | select(.kind == "memory") | .placement] | join(",")' <<< "$OUT")" \
    "pg" "check --json names the placement, kind memory"
printf 'placement.pg.max_backend_memory = 0\n' >> "$T/nostats.conf"
run -c "$T/nostats.conf" init
assert_lacks "$ERR$OUT" "may not read its backends' memory" \
    "no such note when max_backend_memory is off"
run -c "$T/nostats.conf" check
assert_lacks "$OUT$ERR" "backends' memory" "check says nothing of it when max_backend_memory is off"
psql -qAtX -c "GRANT pg_read_all_stats TO tn_nostats" > /dev/null
sed -i '$d' "$T/nostats.conf"
run -c "$T/nostats.conf" init
assert_lacks "$ERR$OUT" "may not read its backends' memory" \
    "no such note once the login has pg_read_all_stats"
run -c "$T/nostats.conf" check   # (the orphans of the cases above are not this check's)
assert_lacks "$OUT$ERR" "backends' memory" "check says nothing of it once the login has pg_read_all_stats"

# ---- the byte bound holds for tenancy's own workers (tenant create -j, migrate -j) ----------
# Each worker keeps one connection for all its schema tenants. With max_backend_memory = 1
# (a byte) the first read of its backend's memory, after 64 schemas, finds it over and the
# worker connects again. The seed and the migration write the backend's pid into each
# tenant: over the same 70 tenants, one backend with the bound off, two with it on.
backends() {   # backends CONF-SUFFIX COLUMN: distinct pids written into the 70 tenants
    local q="" i
    for i in $(seq -f '%03g' 1 70); do
        q="$q${q:+ UNION ALL }SELECT $2 AS pid FROM t_mb$1$i.notes"
    done
    psql -qAtX -c "SELECT count(DISTINCT pid) FROM ($q) AS p"
}
mkdir -p "$T/mbmig"
printf 'CREATE TABLE notes (id integer PRIMARY KEY, body text);\n' > "$T/mbmig/0001_notes.sql"
printf 'INSERT INTO notes (id, body) VALUES (1, pg_catalog.pg_backend_pid()::text);\n' \
    > "$T/mb_seed.sql"
for b in off on; do
    mkdir -p "$T/mb_$b"
    printf 'app = /nonexistent/app.so\nstate_dir = %s\nstorage.placement = pg\nplacement.pg.dsn = "%s"\nplacement.pg.mode = schema\nplacement.pg.max_backend_memory = %s\nstorage.migrations = %s\nstorage.seed = %s\n' \
        "$T/mb_$b" "$TENANCY_TEST_PG" "$([ "$b" = on ] && echo 1 || echo 0)" "$T/mbmig" \
        "$T/mb_seed.sql" > "$T/mb_$b.conf"
    run -c "$T/mb_$b.conf" init
    assert_eq "$RC" 0 "byte bound $b: init ($ERR)"
    seq -f "mb${b}%03g" 1 70 > "$T/mb_$b.list"
    run -c "$T/mb_$b.conf" tenant create --from-file "$T/mb_$b.list" -j 1
    assert_eq "$RC" 0 "byte bound $b: 70 tenants created ($ERR)"
done
printf 'ALTER TABLE notes ADD COLUMN at text;\nUPDATE notes SET at = pg_catalog.pg_backend_pid()::text;\n' \
    > "$T/mbmig/0002_at.sql"
for b in off on; do
    run -c "$T/mb_$b.conf" migrate --all -j 1
    assert_eq "$RC" 0 "byte bound $b: 70 tenants migrated ($ERR)"
done
assert_eq "$(backends off body)" 1 "tenant create, bound off: one backend for 70 tenants"
assert_eq "$(backends on body)" 2 "tenant create, bound on: the worker connects again at the bound"
assert_eq "$(backends off at)" 1 "migrate, bound off: one backend for 70 tenants"
assert_eq "$(backends on at)" 2 "migrate, bound on: the worker connects again at the bound"
