#!/usr/bin/env bash
# The GPU check, first call (docs/gpu.md): the machine's own python3 with torch, transformers and
# sentence-transformers preinstalled, no network, nothing installed. The checkout's src/ on PYTHONPATH;
# benchmarks/device-bundle/ (git-ignored, written by benchmarks/device_bundle.py) beside it; pure-Python
# wheels in benchmarks/device-bundle/wheels/ are imported from their zip files, never installed.
#   benchmarks/device.sh OUT_DIR [--budget 420] [--tiny] [--sections correctness,training,...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:?usage: benchmarks/device.sh OUT_DIR [--budget SECONDS] [--tiny] [--sections ...]}
shift
py=${PYTHON:-python3}
path="$root/src"
for wheel in "$root"/benchmarks/device-bundle/wheels/*.whl; do
  [ -e "$wheel" ] && path="$path:$wheel"
done
export PYTHONPATH="$path${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PIP_NO_INDEX=1
export CSEBENCH_DATA_CHECK=${CSEBENCH_DATA_CHECK:-1}
exec "$py" "$root/benchmarks/device.py" --out "$out" "$@"
