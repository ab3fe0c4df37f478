#!/usr/bin/env bash
# opscope's device checks in one run, on a lent CUDA machine (docs/capture.md, "Checking the GPU path"):
#   bench/gpu_session.sh OUT_DIR [STAGE ...]     (stages: known snapshot gpu_check ncu compiled modern jax; default all)
# 1. real inputs for the tests (bench/gpu_capture.py: a Kineto trace of known work, an allocator snapshot, a JAX
#    xplane on the GPU) with the facts measured beside them; 2. bench/gpu_check.py (the capture path);
# 3. an Nsight Compute capture of the same kernels, exported as the details and raw CSV pages.
# Each stage has its own time limit, so one that hangs or fails leaves the others' files. Python packages the
# machine lacks may come unpacked in .dev/site.tar.xz (with a stripped native module in .dev/native.so).
set -u
OUT=${1:-${OUT:-/tmp/opscope-gpu}}
shift || true
STAGES=" ${*:-known snapshot gpu_check ncu compiled modern jax} "
want() { [[ "$STAGES" == *" $1 "* ]]; }
mkdir -p "$OUT"
W=$(mktemp -d)
keep() {  # copy what the stages made so far: a later stage that runs out of time loses nothing
  for f in known.pt.trace.json.gz snapshot.pickle jax.xplane.pb facts.json ncu_details.csv ncu_raw.csv \
    compiled.pt.trace.json.gz modern.pt.trace.json.gz; do
    [ -f "$W/$f" ] && cp "$W/$f" "$OUT/"
  done
  find "$W/known-profile" -name '*.memory_snapshot.pickle' -exec cp {} "$OUT/known.memory_snapshot.pickle" \; 2>/dev/null
}
stage() { keep; echo "=== $* ($(date +%T))"; }
if [ -f .dev/site.tar.xz ]; then
  mkdir -p /tmp/site && tar xJf .dev/site.tar.xz -C /tmp/site && export PYTHONPATH=/tmp/site
fi
[ -f .dev/native.so ] && cp .dev/native.so src/opscope/_native.abi3.so
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
python3 -c "import sys, torch, polars, opscope; print(sys.version.split()[0], torch.__version__, polars.__version__)"

want known && stage known && timeout 100 python3 bench/gpu_capture.py known "$W"
want snapshot && stage snapshot && timeout 60 python3 bench/gpu_capture.py snapshot "$W"
want gpu_check && stage gpu_check && timeout 240 python3 bench/gpu_check.py ${GPU_CHECK_ARGS:-}
want compiled && stage compiled && timeout 180 python3 bench/gpu_capture.py compiled "$W"
want modern && stage modern && timeout 120 python3 bench/gpu_capture.py modern "$W"
NCU=$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if want ncu && [ -n "$NCU" ]; then
  stage ncu
  "$NCU" --version | tail -1
  timeout 150 "$NCU" --clock-control none --launch-count 30 -o "$W/ncu" -f \
    python3 bench/gpu_capture.py workload "$W/w" 2>&1 | tail -5
  "$NCU" --import "$W/ncu.ncu-rep" --csv --page details >"$W/ncu_details.csv"
  "$NCU" --import "$W/ncu.ncu-rep" --csv --page raw >"$W/ncu_raw.csv"
  wc -l "$W"/ncu_*.csv
fi
want jax && stage jax && XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 90 python3 bench/gpu_capture.py jax "$W"
stage files
keep
ls -la "$OUT"
