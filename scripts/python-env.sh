# Sourced by scripts/setup.sh and scripts/test.sh: picks the Python that runs
# the tests and exports it as $PYTHON.
#
# Order: $PYTHON if set; else <repo>/.venv if it exists; else python3 if pip
# may install into it (pyenv and other non-Debian Pythons); else, on a Debian
# Python that is "externally managed" (PEP 668), a new <repo>/.venv.

pick_python() {
  local repo="$1" create_venv="${2:-no}"
  if [ -n "${PYTHON:-}" ]; then
    return 0
  fi
  if [ -x "$repo/.venv/bin/python" ]; then
    PYTHON="$repo/.venv/bin/python"
  elif command -v python3 >/dev/null 2>&1 && python3 - <<'PY'
import os, sys, sysconfig
managed = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
try:
    import pip  # noqa: F401
except ImportError:
    sys.exit(1)
sys.exit(1 if managed else 0)
PY
  then
    PYTHON="$(command -v python3)"
  elif [ "$create_venv" = yes ]; then
    python3 -m venv "$repo/.venv"
    PYTHON="$repo/.venv/bin/python"
  else
    PYTHON="$(command -v python3 || echo python3)"
  fi
  export PYTHON
}
