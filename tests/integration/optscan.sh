#!/bin/bash
# optscan.sh — every option of tenancyd's table is documented in tenancyd.conf(5), and the man
# page documents no option that does not exist.
. "$(dirname "$0")/lib.sh"
need "$TENANCYD"
man=$top_srcdir/doc/tenancyd.conf.5
keys=$("$TENANCYD" --options | cut -f1)
[ -n "$keys" ] || fatal "tenancyd --options printed nothing"
for k in $keys; do
    # Each option is a tagged paragraph: ".TP" then ".B key".
    grep -A1 -x '\.TP' "$man" | grep -qx "\.B $k" || fail "option '$k' is not documented in doc/tenancyd.conf.5"
done
for k in $(grep -A1 -x '\.TP' "$man" | grep '^\.B ' | awk '{print $2}'); do
    echo "$keys" | grep -qx -- "$k" || fail "doc/tenancyd.conf.5 documents '$k', which tenancyd does not have"
done
[ "$FAILED" = 0 ] && log "ok: $(echo "$keys" | wc -l) options, all documented"
