#!/bin/sh
# embed.sh NAME FILE — print FILE as a C string constant NAME and its length NAME_len (the
# panel's CSS and JS are compiled into tenancyd: no file to install, no external asset).
set -eu
printf 'const char %s[] =\n' "$1"
sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$/\\n"/' "$2"
printf '    "";\nconst size_t %s_len = sizeof(%s) - 1;\n' "$1" "$1"
