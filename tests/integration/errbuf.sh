#!/bin/bash
# errbuf.sh — one way to fill an error buffer: tn_errf (core/rc.h). Fails when a C file of the
# folders below formats a message into an error buffer with snprintf/vsnprintf itself, or
# defines a printf-style helper of its own for a caller's (err, errlen). core/rc.c, where
# tn_errf is written, and core/rc.h, where it is declared, are the exception. Copying a
# message that is already made (one saved before the connection's is rewritten) is
# str_copy's job, not a format's.
#
# The folders checked: every folder of the host's own C (apps/ use the public app API only,
# which has no tn_errf).
ERRBUF_DIRS="core storage tenancy cli fcgi admin"

. "$(dirname "$0")/lib.sh"

# An error buffer, as the code names it: err, errbuf, error, why, msg, message, what, reason,
# or anything ending in _err/_error, alone or as a member (d->err, r->what, e->message), with
# an index or an offset after it.
name='([A-Za-z_][A-Za-z0-9_]*(->|\.))*(err|errbuf|error|why|msg|message|what|reason|[A-Za-z0-9_]*_err(or)?)'
fill="\\bv?snprintf[[:space:]]*\\([[:space:]]*$name(\\[[^]]*\\])?[[:space:]]*[,+]"
# A helper of one's own: a function taking an error buffer, its length and a format.
helper='char[[:space:]]*\*[[:space:]]*[A-Za-z_]*err[A-Za-z_]*,[[:space:]]*size_t[[:space:]]+[A-Za-z_]*len[^)]*const char[[:space:]]*\*[[:space:]]*fmt'

files=0
for d in $ERRBUF_DIRS; do
    [ -d "$top_srcdir/$d" ] || fatal "no folder $top_srcdir/$d"
    for f in "$top_srcdir/$d"/*.c "$top_srcdir/$d"/*.h; do
        [ -e "$f" ] || continue
        rel=${f#"$top_srcdir"/}
        case $rel in core/rc.c | core/rc.h) continue ;; esac
        files=$((files + 1))
        while IFS= read -r hit; do
            fail "$rel:${hit%%:*}: fills an error buffer itself; use tn_errf (core/rc.h): ${hit#*:}"
        done < <(grep -nE "$fill" "$f")
        while IFS= read -r hit; do
            fail "$rel:${hit%%:*}: a printf-style error helper of its own; use tn_errf: ${hit#*:}"
        done < <(grep -nE "$helper" "$f")
    done
done
[ "$files" -gt 0 ] || fatal "no C files under $ERRBUF_DIRS"
[ "$FAILED" = 0 ] && log "ok: $files files under $ERRBUF_DIRS fill error buffers with tn_errf only"
