#!/usr/bin/env bash
# README command (b): installs what the build and the tests need, builds ocsd
# twice (normal, and ASan+UBSan), and runs the default test suite (every label
# except bench) on both builds. Exits non-zero on the first failure.
#
#   tests/run.sh                 everything (what CI runs)
#   tests/run.sh --no-sanitize   skip the sanitizer build
#   tests/run.sh --bench         also run the benchmarks (label bench)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

sanitize=1
bench=0
for arg in "$@"; do
  case "$arg" in
    --no-sanitize) sanitize=0 ;;
    --bench) bench=1 ;;
    *) echo "usage: tests/run.sh [--no-sanitize] [--bench]" >&2; exit 2 ;;
  esac
done

bash deploy/install-deps.sh
jobs=$(nproc)

run_suite() { # build-dir, cmake args...
  local dir=$1; shift
  cmake -S . -B "$dir" "$@" >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
  cmake --build "$dir" -j "$jobs"
  (cd "$dir" && ctest --output-on-failure -j "$jobs" -LE bench)
}

mkdir -p build
run_suite build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOCSD_WERROR=ON
if [ "$sanitize" = 1 ]; then
  mkdir -p build-asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DOCSD_SANITIZE=ON -DOCSD_WERROR=ON
fi
if [ "$bench" = 1 ]; then
  (cd build && ctest --output-on-failure -L bench)
fi
