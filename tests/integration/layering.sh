#!/bin/bash
# layering.sh — the includes obey the folders' READMEs.
#
# Each source folder's README.md states, in one sentence that starts with "May call:", what the
# folder may use: other folders ("core/", "storage/", "include/" for the public tenancy.h) and
# the libraries whose headers it may include ("libsqlite3", "libpq", "libfcgi"). An item may be
# limited to some files of the folder: "libpq (pg.c only)", "everything (main.c only)". This
# test reads every `#include "..."` and every include of those libraries' headers under the
# source folders and fails on any arrow that the sentence does not allow, and on a README
# that has no such sentence. A folder may always include its own files and the build's
# config.h.
#
# Must not: build anything or start a server; it reads files only.
. "$(dirname "$0")/lib.sh"

src=$top_srcdir
folders="core storage tenancy cli fcgi admin apps"

# The "May call:" sentence of a README, on one line: from "May call:" to the first full stop
# followed by a space or the end of the text ("pg.c" does not end it).
may_call_sentence() {
    tr '\n' ' ' < "$1" | sed -n 's/.*May call:[[:space:]]*//p' |
        awk '{ s = $0; out = "";
               for (i = 1; i <= length(s); i++) {
                   c = substr(s, i, 1); n = substr(s, i + 1, 1);
                   if (c == "." && (n == " " || n == "")) break;
                   out = out c }
               print out }'
}

# The items of a sentence, one per line: commas and "and" split, except inside parentheses.
sentence_items() {
    sed 's/ and /, /g' | awk '{ s = $0; depth = 0; item = "";
           for (i = 1; i <= length(s); i++) {
               c = substr(s, i, 1);
               if (c == "(") depth++;
               if (c == ")") depth--;
               if (c == "," && depth == 0) { print item; item = "" } else item = item c }
           print item }' | sed 's/^[[:space:]]*//; s/^and //; s/[[:space:]]*$//' | grep -v '^$'
}

# allow[FOLDER:FILE-or-*] = space-separated dependencies
declare -A allow
for d in $folders; do
    readme=$src/$d/README.md
    [ -f "$readme" ] || { fail "$d/README.md is missing"; continue; }
    sentence=$(may_call_sentence "$readme")
    [ -n "$sentence" ] || { fail "$d/README.md has no 'May call:' sentence"; continue; }
    while IFS= read -r item; do
        item=${item//\`/}
        dep=${item%% *}
        dep=${dep%%(*}
        files=ALL
        if [[ $item =~ \(([^\)]*)[[:space:]]only ]]; then
            files=$(echo "${BASH_REMATCH[1]}" | tr ',' ' ')
        fi
        case $dep in
            */|libsqlite3|libpq|libfcgi|libc|everything) ;;
            *) fail "$d/README.md: 'May call:' names '$dep', which is neither a folder (X/), a library (libsqlite3, libpq, libfcgi, libc) nor 'everything'"; continue ;;
        esac
        for f in $files; do
            allow[$d:$f]+=" $dep"
        done
    done < <(echo "$sentence" | sentence_items)
done

allowed() { # folder file dep
    local d=$1 f=$2 dep=$3 a
    for a in ${allow[$d:ALL]-} ${allow[$d:$f]-}; do
        [ "$a" = "$dep" ] || [ "$a" = everything ] && return 0
    done
    return 1
}

arrows=0
checked=0
while IFS= read -r path; do
    rel=${path#$src/}
    d=${rel%%/*}
    f=${rel#*/}
    checked=$((checked + 1))
    while IFS= read -r line; do
        lineno=${line%%:*}
        inc=${line#*:}
        dep=
        name=
        case $inc in
            *'#include "'*)
                name=$(echo "$inc" | sed 's/.*#include "\([^"]*\)".*/\1/')
                case $name in
                    config.h) continue ;;                    # the build's own
                    tenancy.h) dep=include/ ;;
                    */*) dep=${name%%/*}/ ;;
                    *) [ -f "$(dirname "$path")/$name" ] && continue
                       fail "$rel:$lineno: cannot tell which folder \"$name\" is in"; continue ;;
                esac ;;
            *'#include <sqlite3.h>'*|*'#include <sqlite3ext.h>'*) dep=libsqlite3 ;;
            *'#include <libpq-fe.h>'*|*'#include <libpq/'*) dep=libpq ;;
            *'#include <fcgiapp.h>'*|*'#include <fcgios.h>'*|*'#include <fcgi_stdio.h>'*|*'#include <fcgio.h>'*) dep=libfcgi ;;
            *) continue ;;
        esac
        [ "$dep" = "$d/" ] && continue
        arrows=$((arrows + 1))
        allowed "$d" "$f" "$dep" ||
            fail "$rel:$lineno: includes ${name:-$dep} ($dep), which $d/README.md's 'May call:' does not allow"
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include' "$path" | sed 's/#[[:space:]]*include/#include/')
done < <(for d in $folders; do [ -d "$src/$d" ] && find "$src/$d" -name '*.[ch]' ! -path '*/assets/*'; done | sort)

[ "$checked" -gt 50 ] || fail "only $checked source files found under $src: wrong tree?"
[ "$FAILED" = 0 ] && log "ok: $arrows arrows between folders in $checked files, each allowed by its README"
exit "$FAILED"
