#!/usr/bin/env bash
# Set up, build and run every test (unit + integration) with ctest; then the quick part of the
# same under ASan+UBSan (scripts/sanitize.sh --quick, into build-san/; SANITIZE=0 skips it).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/setup.sh"
"$top/scripts/build.sh"
(cd "${BUILD_DIR:-$top/build}" && ctest --output-on-failure -j2 "$@")
if [[ ${SANITIZE:-1} != 0 ]]; then
  echo "== the same under ASan+UBSan (scripts/sanitize.sh --quick)"
  "$top/scripts/sanitize.sh" --quick
fi
