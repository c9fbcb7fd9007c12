# Source me: creates .venv in the repo and installs the project when
# pyproject.toml or this script changed since the last install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
if [ ! -x "$VENV/bin/python" ]; then
    echo "creating .venv (first run)" >&2
    python3 -m venv "$VENV"
fi
STAMP="$VENV/.spmd-installed"
WANT="$(cat "$ROOT/pyproject.toml" "$ROOT/scripts/bootstrap.sh" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
    echo "installing torch 2.13.0, the project and its test tools into .venv" \
        "(first run, or pyproject.toml changed: about a minute)" >&2
    # torch first and alone: pinned, so pip takes the local CPU wheel and
    # never resolves a CUDA build.
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "torch==2.13.0"
    # compat mode puts the repository on sys.path with a plain .pth entry:
    # mypy cannot see packages behind setuptools' editable import hooks.
    "$VENV/bin/pip" install --quiet --disable-pip-version-check \
        --config-settings editable_mode=compat -e "$ROOT[test]"
    # Third-party tensor-parallel code the checker is tested on, without
    # their dependency trees (torch is already pinned; they are only read,
    # imported and type-checked).
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps \
        fairscale==0.4.13 megatron-core==0.16.1 torchtitan==0.3.0 nanotron==0.4 \
        spmd-types==0.3.1
    echo "$WANT" > "$STAMP"
    echo "installed" >&2
fi
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
