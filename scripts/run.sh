#!/usr/bin/env bash
# The main job: installs missing packages, builds, then runs the demo.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$here/scripts/setup.sh"
"$HEADSEP_BUILD/headsep" example
