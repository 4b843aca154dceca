#!/usr/bin/env bash
# The main job of `make run`: the coverage matrix and the determinism demo.
set -euo pipefail
build=${1:-build}
"$build/samebits" ops
echo
"$build/samebits" demo --runs 20
