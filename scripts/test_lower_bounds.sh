#!/usr/bin/env bash
# The suite at the oldest versions pyproject.toml allows: every dependency and test dependency pinned
# to its declared lower bound (numpy 1.24.0, tokenizers 0.15.0, threadpoolctl 3.5.0, ...), without torch,
# transformers and matplotlib (the tests that need them skip, saying so) and without the slow demo retrain.
#
#   scripts/test_lower_bounds.sh [pytest arguments]     # the venv: $LOWER_BOUNDS_VENV, default below
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${LOWER_BOUNDS_VENV:-/tmp/minitransformer-lower-bounds}"
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
python3 - > "$constraints" <<'PY'
import re
text = open("pyproject.toml", encoding="utf-8").read()
declared = re.search(r"^dependencies = \[(.*?)\]", text, re.S | re.M).group(1)
declared += re.search(r"^test = \[(.*?)\]", text, re.M).group(1)
bounds = re.findall(r'"([A-Za-z0-9_.-]+)>=([0-9.]+)"', declared)
assert len(bounds) == 9, f"expected 6 dependencies and 3 test dependencies with lower bounds, found {bounds}"
print("\n".join(f"{name}=={low}" for name, low in bounds))
PY
python3 -m venv --clear "$venv"  # afresh: nothing left over from another run
"$venv/bin/pip" install -q -c "$constraints" -e '.[test]'
"$venv/bin/pip" list 2>/dev/null | grep -iE '^(numpy|tokenizers|safetensors|huggingface-hub|threadpoolctl|ml-dtypes|ml_dtypes|pytest|hypothesis|tiktoken) '
"$venv/bin/python" -m pytest -m "not slow" -p no:cacheprovider "$@"
