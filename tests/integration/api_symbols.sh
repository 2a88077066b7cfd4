#!/bin/bash
# api_symbols.sh — tenancyd defines and exports every function of the app API. Fails when a
# function that include/tenancy.h declares is not among the defined symbols of tenancyd's
# dynamic symbol table (`nm -D --defined-only`), or is not matched by include/tenancy.sym.
#
# Why: tenancyd is linked from the layers' static archives (Makefile.am), and a linker takes
# from an archive only the members that code already linked calls. An API function that
# nothing in tenancyd calls would be left out without a word, and an app module calling it
# would fail only when a worker loads it (an undefined symbol at dlopen). tenancy.sym, the
# --dynamic-list, exports what is there; it cannot add what is missing. Makefile.am links the
# libraries that implement the API whole (--whole-archive); this test is what holds it so.

. "$(dirname "$0")/lib.sh"

header=$top_srcdir/include/tenancy.h
symfile=$top_srcdir/include/tenancy.sym
[ -r "$header" ] && [ -r "$symfile" ] || fatal "no include/tenancy.h or include/tenancy.sym under $top_srcdir"
[ -x "$TENANCYD" ] || fatal "no $TENANCYD (make first)"
command -v nm > /dev/null || hard_error "nm not found (Debian: binutils)"

# The API: every tn_ name followed by '(' in a declaration of the header, i.e. outside
# comments and preprocessor lines.
mapfile -t api < <(sed -e 's|/\*.*\*/||g' -e '/\/\*/,/\*\//d' -e '/^[[:space:]]*#/d' "$header" |
    grep -oE '(^|[^A-Za-z0-9_])tn_[a-z0-9_]+[[:space:]]*\(' |
    sed -E 's/^[^t]*(tn_[a-z0-9_]+).*/\1/' | sort -u)
# A header that yields almost nothing means this reading broke, not that the API is gone.
[ "${#api[@]}" -ge 20 ] || fatal "read only ${#api[@]} functions from include/tenancy.h"

# The version script's patterns (`tn_*;`), as shell globs.
mapfile -t globs < <(sed -e 's|/\*.*\*/||g' "$symfile" | tr -d ' \t' | tr ';' '\n' |
    grep -E '^[A-Za-z0-9_*?]+$')
[ "${#globs[@]}" -gt 0 ] || fatal "no symbol pattern in include/tenancy.sym"

defined=$(nm -D --defined-only "$TENANCYD" | awk '{ print $NF }') ||
    fatal "nm -D --defined-only $TENANCYD failed"

for f in "${api[@]}"; do
    listed=0
    for g in "${globs[@]}"; do
        # shellcheck disable=SC2053 # a glob on purpose
        [[ $f == $g ]] && listed=1 && break
    done
    [ "$listed" = 1 ] || fail "$f (include/tenancy.h) matches no pattern of include/tenancy.sym"
    if ! grep -qx "$f" <<< "$defined"; then
        fail "$f (include/tenancy.h) is not defined in tenancyd's dynamic symbols"
    fi
done
[ "$FAILED" = 0 ] && log "ok: tenancyd defines and exports the ${#api[@]} functions of tenancy.h"
exit "$FAILED"
