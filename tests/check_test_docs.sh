#!/usr/bin/env bash
# Every test ctest registers is described: its name appears, in backquotes,
# in tests/README.md ("Every test ctest registers"). A test added without a
# row there fails this check (label unit), naming it.
#   usage: tests/check_test_docs.sh BUILD-DIR SOURCE-ROOT
set -euo pipefail
build=$1
readme=$2/tests/README.md
mapfile -t names < <(cd "$build" && ctest -N | sed -n 's/^ *Test *#[0-9]*: *//p')
[ ${#names[@]} -gt 0 ] || { echo "check_test_docs: ctest -N in $build listed no test"; exit 1; }
missing=0
for t in "${names[@]}"; do
  if ! grep -qF "\`$t\`" "$readme"; then
    echo "check_test_docs: $t is not described in tests/README.md"
    missing=$((missing + 1))
  fi
done
if [ "$missing" -gt 0 ]; then
  echo "check_test_docs: FAILED: $missing of ${#names[@]} tests undocumented"
  exit 1
fi
echo "check_test_docs: passed: all ${#names[@]} tests described"
