#!/usr/bin/env bash
# The code style check of CI (label unit): every tracked .c/.h file must be
# exactly what clang-format makes of it with the checked-in .clang-format
# (clang-format --dry-run --Werror). Files matching a line of
# tests/format-pending.txt are skipped (counted) until they are
# formatted; a pending entry that matches no file is reported too. Nothing
# generated is tracked (protobuf-c output is written into the build tree),
# so every tracked file is checked.
#   usage: tests/check_format.sh [SOURCE-ROOT]   (default: this checkout)
# Fix a failure with: clang-format -i FILE  (Debian package clang-format).
set -euo pipefail
src=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$src"
command -v clang-format >/dev/null ||
  { echo "check_format: clang-format not found (deploy/install-deps.sh installs it)"; exit 1; }
[ -f .clang-format ] || { echo "check_format: no .clang-format in $src"; exit 1; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.c' '*.h')
else # a source tarball: every .c/.h outside build directories
  mapfile -t files < <(find . -path './build*' -prune -o -name '*.[ch]' -print | sed 's|^\./||' | sort)
fi
patterns=()
while IFS= read -r line; do
  line=${line%%#*}
  line=${line//[[:space:]]/}
  [ -n "$line" ] && patterns+=("$line")
done < tests/format-pending.txt

check=() pending=()
declare -A used=()
for f in "${files[@]}"; do
  skip=
  for p in "${patterns[@]}"; do
    # shellcheck disable=SC2254 # the pattern is meant to match
    case $f in $p) skip=1; used[$p]=1; break ;; esac
  done
  if [ -n "$skip" ]; then pending+=("$f"); else check+=("$f"); fi
done
for p in "${patterns[@]}"; do
  [ -n "${used[$p]:-}" ] || echo "check_format: note: pending entry '$p' matches no file"
done
echo "check_format: ${#pending[@]} pending file(s) skipped (tests/format-pending.txt)"
# One run over every file; each deviation is a "FILE:LINE:COL: error: ..." line.
if out=$(clang-format --dry-run --Werror "${check[@]}" 2>&1); then
  echo "check_format: passed: ${#check[@]} file(s) formatted"
  exit 0
fi
counts=$(printf '%s\n' "$out" | sed -n 's/^\([^: ]*\):[0-9]*:[0-9]*: error: .*/\1/p' | sort | uniq -c)
if [ -z "$counts" ]; then # clang-format itself failed (bad .clang-format, unreadable file)
  printf '%s\n' "$out"
fi
printf '%s\n' "$counts" | while read -r n f; do
  [ -n "$f" ] && echo "check_format: $f: $n deviation(s)"
done
echo "check_format: FAILED: files differ from .clang-format; fix with clang-format -i FILE"
exit 1
