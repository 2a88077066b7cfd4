#!/bin/bash
# cli_man.sh — every command of the `tenancy` CLI, and every option it accepts, is documented
# in tenancy(1); the man page documents no command the CLI does not have; every global option
# in `tenancy -h` is in the man page's OPTIONS.
#
# Owns: this check only. The commands come from `tenancy --commands` (printed from the CLI's
# one command table), so a command added to the table without its paragraph fails here.
# A command is documented as a tagged paragraph: ".TP", then a line starting
# "\fBtenancy COMMAND\fP"; its options must appear (as \-\-name) in that paragraph.
. "$(dirname "$0")/lib.sh"
TENANCY=${TENANCY:-$top_builddir/tenancy/tenancy}
need "$TENANCY"
man=$top_srcdir/doc/tenancy.1
[ -f "$man" ] || fatal "$man is missing"

"$TENANCY" --commands > "$T/commands" || fatal "tenancy --commands failed"
[ -s "$T/commands" ] || fatal "tenancy --commands printed nothing"

# Split the man page into one file per documented command: $T/doc/<command with _>.
mkdir -p "$T/doc"
awk -v dir="$T/doc" '
    /^\.(TP|SS|SH)/ { if (cur != "") close(cur); cur = ""; tp = ($0 == ".TP"); next }
    tp && /^\\fBtenancy / {
        cmd = $0; sub(/^\\fBtenancy /, "", cmd); sub(/\\fP.*$/, "", cmd)
        name = cmd; gsub(/ /, "_", name)
        cur = dir "/" name; print cmd > (dir "/.list"); print > cur; tp = 0; next
    }
    { tp = 0; if (cur != "") print > cur }
' "$man"
[ -s "$T/doc/.list" ] || fatal "no command paragraphs found in $man"

# The man form of an option: --max-workers -> \-\-max\-workers; present when followed by
# something that cannot continue the name (a letter, a digit or \-).
has_opt() {   # has_opt FILE OPTION
    local needle=${2//-/\\-}
    awk -v n="$needle" '{
        s = $0
        while ((i = index(s, n)) > 0) {
            c = substr(s, i + length(n), 2)
            if (c !~ /^[a-z0-9]/ && c != "\\-") { found = 1; exit }
            s = substr(s, i + length(n))
        }
    } END { exit found ? 0 : 1 }' "$1"
}

ncmd=0
nopt=0
while IFS=$'\t' read -r cmd opts; do
    ncmd=$((ncmd + 1))
    f=$T/doc/${cmd// /_}
    if [ ! -f "$f" ]; then
        fail "command 'tenancy $cmd' is not documented in doc/tenancy.1"
        continue
    fi
    for o in $opts; do
        nopt=$((nopt + 1))
        has_opt "$f" "$o" || fail "option $o of 'tenancy $cmd' is not documented in its paragraph"
    done
done < "$T/commands"

while read -r cmd; do
    cut -f1 "$T/commands" | grep -qx -- "$cmd" ||
        fail "doc/tenancy.1 documents 'tenancy $cmd', which the CLI does not have"
done < "$T/doc/.list"

# Global options, from the help.
"$TENANCY" -h > "$T/help" || fail "tenancy -h failed"
awk '/^\.SH OPTIONS/ { on = 1; next } /^\.SH/ { on = 0 } on' "$man" > "$T/options"
for o in $(sed -n '/^Global options/,/^$/p' "$T/help" | grep -oE -- '(^|[ ,])--?[a-zA-Z][a-z-]*' | tr -d ' ,'); do
    nopt=$((nopt + 1))
    has_opt "$T/options" "$o" || fail "global option $o is not documented in OPTIONS"
done

[ "$FAILED" = 0 ] && log "ok: $ncmd commands and $nopt options, all documented"
