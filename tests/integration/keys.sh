#!/bin/bash
# keys.sh — tenants' API keys end to end: made and revoked with the `tenancy key` command,
# checked by tn_key_check through the real host behind nginx (the hello app's test route
# /key: 200 with the key's flags, 401 with the reason). A key of tenant A opens A, never B;
# a read-only key says so; a revoked key is refused by the very next request, in every
# worker, although each worker cached it as good; an expired key is refused once its time
# is past, cached or not; last_used_at is recorded; lists never show a token or a hash; the
# command's exit codes and --json.
. "$(dirname "$0")/lib.sh"
need curl nginx "$TENANCY_CLI"

tn_conf "pm.max_children = 3" \
    "state_dir = $T/state" \
    "tenant.resolvers = subdomain" \
    "tenant.base_domains = localhost"
mkdir -p "$T/state"
tn_cli init > /dev/null || fatal "tenancy init failed"
tn_cli tenant create acme > /dev/null || fatal "tenant create acme failed"
tn_cli tenant create globex > /dev/null || fatal "tenant create globex failed"
tn_start
nginx_start

# key HOST TOKEN -> body; status in last_status
key() {
    local out
    out=$(curl -s -m 20 -H "Host: $1" -H "Authorization: Bearer $2" -w '\n%{http_code}' \
        "http://127.0.0.1:$NGINX_PORT/key")
    printf '%s' "${out##*$'\n'}" > "$T/.last_status"
    printf '%s' "${out%$'\n'*}"
}
# every_worker HOST TOKEN STATUS WHAT: 20 requests (over every worker) all give STATUS
every_worker() {
    local bad=0 code
    for _ in $(seq 1 20); do
        key "$1" "$2" > /dev/null
        code=$(last_status)
        [ "$code" = "$3" ] || bad=$((bad + 1))
    done
    assert_eq "$bad" 0 "$4 (20 requests over every worker)"
}

# ---- the command ---------------------------------------------------------------------------
out=$(tn_cli key create acme --label "ci bot") || fatal "key create failed"
A=$(sed -n 2p <<< "$out")
[[ $A =~ ^tnk_[A-Za-z0-9_-]{43}$ ]] || fatal "key create printed no token: $out"
log "ok: key create prints the token on its own line"
json=$(tn_cli key create acme --read-only --json) || fatal "key create --read-only failed"
R=$(sed 's/.*"token":"\([^"]*\)".*/\1/' <<< "$json")
assert_contains "$json" '"read_only":true' "--json: the key's flags"
[[ $R =~ ^tnk_ ]] || fatal "no token in --json: $json"
G=$(tn_cli key create globex | sed -n 2p)
[ -n "$G" ] || fatal "key create printed no token"

tn_cli key create nobody > /dev/null 2>&1
assert_eq "$?" 1 "key create for an unknown tenant: exit 1"
tn_cli --json key create nobody > "$T/err.json" 2> /dev/null
assert_contains "$(cat "$T/err.json")" '"code":"notfound"' "--json error: code notfound"
tn_cli key create acme --expires yesterday > /dev/null 2>&1
assert_eq "$?" 1 "an --expires that is neither a duration nor a date: exit 1"
tn_cli key create acme --bogus > /dev/null 2>&1
assert_eq "$?" 2 "an unknown option: exit 2"

list=$(tn_cli key list)
assert_contains "$list" "ci bot" "key list shows labels"
assert_contains "$list" "${A:0:12}" "key list shows the prefix"
for t in "$A" "$R" "$G"; do
    case "$list$(tn_cli key list --json)" in
    *"${t:12}"*) fail "a list shows a token's secret part" ;;
    esac
done
hash=$(printf '%s' "$A" | sha256sum | cut -d' ' -f1)
case "$list$(tn_cli key list --json)" in
*"$hash"*) fail "a list shows a token's hash" ;;
*) log "ok: lists show neither tokens nor hashes" ;;
esac
assert_eq "$(tn_cli key list globex --json | grep -o '"prefix"' | wc -l)" 1 "key list SLUG: its keys only"

# ---- through the host ------------------------------------------------------------------------
body=$(key acme.localhost "$A")
assert_eq "$(last_status)" 200 "tenant A's key at A's host"
assert_contains "$body" "read_only=0" "a read-write key"
every_worker acme.localhost "$A" 200 "A's key cached as good"
key globex.localhost "$A" > "$T/b.txt"
assert_eq "$(last_status)" 401 "tenant A's key at B's host"
assert_contains "$(cat "$T/b.txt")" "unknown API key" "another tenant's key is unknown there"
assert_eq "$(key globex.localhost "$G" > /dev/null; last_status)" 200 "B's key at B's host"
assert_contains "$(key acme.localhost "$R")" "read_only=1" "a read-only key reports its flag"
key acme.localhost "tnk_short" > "$T/s.txt"
assert_eq "$(last_status)" 401 "a token of the wrong shape"
key acme.localhost "tnk_$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=' | head -c 43)" > /dev/null
assert_eq "$(last_status)" 401 "an unknown token"

# revoked: every worker has A cached as good; the revoke bumps the generation
tn_cli key revoke acme "${A:0:12}" > "$T/revoke.txt" || fail "key revoke by prefix failed"
assert_contains "$(cat "$T/revoke.txt")" "revoked" "key revoke says so"
key acme.localhost "$A" > "$T/r.txt"
assert_eq "$(last_status)" 401 "a revoked key: refused by the next request"
assert_contains "$(cat "$T/r.txt")" "revoked" "the refusal says revoked"
every_worker acme.localhost "$A" 401 "a revoked key refused in every worker"
every_worker acme.localhost "$R" 200 "the tenant's other key still works"
tn_cli key revoke acme "${A:0:12}" > /dev/null
assert_eq "$?" 0 "revoking again is fine (already revoked)"
tn_cli key revoke acme 9999 > /dev/null 2>&1
assert_eq "$?" 1 "revoking a key the tenant does not have: exit 1"
gid=$(tn_cli key list globex --json | sed 's/.*"id":\([0-9]*\).*/\1/')
tn_cli key revoke acme "$gid" > /dev/null 2>&1
assert_eq "$?" 1 "revoking another tenant's key by id: exit 1"
assert_eq "$(key globex.localhost "$G" > /dev/null; last_status)" 200 "... and it still works"

# expired: good (and cached) while valid, refused once its time is past
E=$(tn_cli key create acme --expires 3s | sed -n 2p)
[ -n "$E" ] || fatal "key create --expires printed no token"
assert_eq "$(key acme.localhost "$E" > /dev/null; last_status)" 200 "a key before its expiry"
sleep 3.5
key acme.localhost "$E" > "$T/e.txt"
assert_eq "$(last_status)" 401 "a key after its expiry"
assert_contains "$(cat "$T/e.txt")" "expired" "the refusal says expired"
assert_contains "$(tn_cli key list acme --json)" '"status":"expired"' "key list marks it expired"

# last_used_at: written on use (at most once a minute per key)
lj=$(tn_cli key list acme --json)
rid=$(sed 's/.*"id":\([0-9]*\),"tenant":"acme","prefix":"'"${R:0:12}"'".*/\1/' <<< "$lj")
grep -q "\"prefix\":\"${R:0:12}\"[^}]*\"last_used_at\":\"20" <<< "$lj" ||
    fail "last_used_at of a used key not recorded: $lj"
grep -q "\"prefix\":\"${R:0:12}\"" <<< "$lj" && log "ok: last_used_at recorded (key $rid)"

assert_nginx_clean "API key requests"
exit "$FAILED"
