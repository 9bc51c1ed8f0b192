#!/usr/bin/env bash
# The test command's private Python environment for the Python package (python/, tests/python/):
# a venv with its build requirements and test tools from PyPI, created once, checked every time.
# Never torch. Usage: scripts/python_env.sh VENV
set -euo pipefail
venv=$1
need=(nanobind scikit-build-core numpy pandas pytest)
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import nanobind, numpy, pandas, pytest, scikit_build_core' 2>/dev/null; then
  exit 0
fi
echo "headsep setup: creating $venv (PyPI: ${need[*]})" >&2
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "${need[@]}" ||
  { echo "python_env.sh: cannot install ${need[*]} from PyPI into $venv (reason above)" >&2; exit 1; }
