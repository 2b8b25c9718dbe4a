# Shared by scripts/test and scripts/demo: make (or reuse) the project's virtualenv
# and install hostd into it with the extras named in HOSTD_EXTRAS.
# Sourced, not run. Sets $PY to the venv's python.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${HOSTD_VENV:-$ROOT/.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null
# The editable install is a plain path in a .pth, so type checkers and editors find
# hostd (an import hook is invisible to them: mypy would say "Cannot find
# implementation"): pyproject.toml's package-dir gets that from setuptools' default
# mode, without the deprecated "compat" mode, whose 12-line BuildBackendWarning newer
# pips print through --quiet.
# --no-compile: pip would byte-compile every module of every package it installs (torch,
# transformers, the frameworks: most never imported here), which was most of a new
# venv's install time; Python compiles and caches what is imported, once, at first use
# -- unless PYTHONDONTWRITEBYTECODE is set (some shells and CI images set it): then every
# process the tests start (hundreds of daemons, providers and CLI runs) would compile
# pydantic, anyio and hostd from source again, about three times the CPU of an import
# from cached bytecode. It is unset for what runs after this script is sourced.
unset PYTHONDONTWRITEBYTECODE
"$PY" -m pip install --quiet --disable-pip-version-check --no-compile -e "$ROOT[${HOSTD_EXTRAS:-dev}]"
