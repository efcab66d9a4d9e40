#!/usr/bin/env bash
# Builds the sanitizer tree (tools and tests with ASan+UBSan, -DFTR_SANITIZE=ON; see
# docs/design.md, "Sanitizers") into build-san/ (or $SAN_BUILD_DIR, or $BUILD_DIR-san) and runs
# its tests with ctest. The TSan and fuzz tests are left to the ordinary tree: they are built
# the same way in both.
#   scripts/sanitize.sh            every test
#   scripts/sanitize.sh --quick    unit and integration tests, not the slow behaviour tests
#                                  (what scripts/test.sh runs)
#   scripts/sanitize.sh --preload  libftrace.so built with UBSan too (-DFTR_SANITIZE_PRELOAD=ON)
# Further arguments go to ctest (e.g. -R integration.options).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
san=${SAN_BUILD_DIR:-${BUILD_DIR:-$top/build}-san}
quick=0
preload=OFF
while (($#)); do
  case $1 in
    --quick) quick=1 ;;
    --preload) preload=ON ;;
    *) break ;;
  esac
  shift
done
exclude=()
((quick)) && exclude=(-E '^behaviour\.')

cmake -S "$top" -B "$san" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFTR_SANITIZE=ON \
      -DFTR_SANITIZE_PRELOAD=$preload -DFTR_FUZZ=OFF --no-warn-unused-cli >/dev/null
cmake --build "$san" -j"$(nproc)"
cd "$san"
ctest --output-on-failure -j2 -LE 'tsan|fuzz' "${exclude[@]}" "$@"
