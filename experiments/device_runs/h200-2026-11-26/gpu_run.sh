#!/usr/bin/env bash
# The accelerator check of this session (docs/reproducing.md has no prepared command yet): the benchmark's
# headline and the numeric tests on the GPU. Wheels the image lacks travel in .whl.
set -o pipefail
site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl || exit 1
export PYTHONPATH=$site:$PWD XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $OUT/nvidia-smi.txt
nproc >> $OUT/nvidia-smi.txt
python3 -c "import jax, jaxlib, flax, optax, numpy; print(jax.__version__, flax.__version__, optax.__version__, numpy.__version__, jax.devices())" 2>&1 | tee -a $OUT/nvidia-smi.txt
SECONDS=0
timeout 210 python3 -m experiments.benchmark 2>&1 | tail -n 80 > $OUT/benchmark.log
echo "benchmark rc=$? ${SECONDS}s" | tee -a $OUT/benchmark.log
cp results/benchmark/headline.json results/benchmark/headline.md $OUT/ 2>/dev/null
SECONDS=0
timeout 200 python3 -m pytest -q -m numeric -n 12 --dist load -p no:cacheprovider --maxfail=30 2>&1 | tail -n 150 > $OUT/numeric.log
echo "numeric rc=$? ${SECONDS}s" | tee -a $OUT/numeric.log
tail -n 5 $OUT/numeric.log
