#!/usr/bin/env bash
# The abi3 wheel (issue 30): build it, check its tags, install it into a fresh virtual environment whose PATH has
# no Rust toolchain, and run `opscope summary` and `opscope advise` on a corpus trace from that install.
#
# Usage: .ci/wheel_check.sh [TRACE]   (with the development venv active: it provides maturin)
#
# The build reuses the release-profile build that `pip install -e .` made: same profile ([tool.maturin] profile =
# "release"), features and target folder (native/target), so cargo finds every crate fresh and maturin only
# links and packs (seconds, not a second 15-minute compile). maturin's auditwheel check picks the manylinux
# policy from the glibc symbols the library uses (manylinux_2_34 on Debian 12); the release workflow builds the
# published wheels in maturin's manylinux containers for older systems.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
traces="${OPSCOPE_TRACES:-$repo/../shared/traces}"
trace="${1:-$traces/tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz}"
if [ ! -f "$trace" ]; then
  echo "wheel check: trace not found: $trace (set OPSCOPE_TRACES or pass a trace)" >&2
  exit 1
fi
trace="$(cd "$(dirname "$trace")" && pwd)/$(basename "$trace")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# 1. Build.
(cd "$repo" && maturin build --release --quiet --out "$work/dist" --interpreter "$(command -v python)")
wheels=("$work"/dist/opscope-*.whl)
if [ "${#wheels[@]}" -ne 1 ]; then
  echo "wheel check: expected one wheel, found: ${wheels[*]}" >&2
  exit 1
fi
wheel="${wheels[0]}"

# 2. Tags: one wheel for every CPython >= 3.10 (abi3), for manylinux (installable on other Linux systems).
python - "$wheel" <<'EOF'
import sys, zipfile
from pathlib import Path

wheel = Path(sys.argv[1])
with zipfile.ZipFile(wheel) as archive:
    info = next(n for n in archive.namelist() if n.endswith(".dist-info/WHEEL"))
    fields = [line.split(":", 1) for line in archive.read(info).decode().splitlines() if ":" in line]
tags = [value.strip() for key, value in fields if key == "Tag"]
pure = [value.strip() for key, value in fields if key == "Root-Is-Purelib"]
problems = []
if len(tags) != 1 or not tags[0].startswith("cp310-abi3-manylinux_"):
    problems.append(f"tags {tags} (want one cp310-abi3-manylinux_* tag)")
if not wheel.name.endswith(f"-{tags[0] if tags else '?'}.whl"):
    problems.append(f"the file name {wheel.name} does not carry the tag {tags}")
if pure != ["false"]:
    problems.append(f"Root-Is-Purelib {pure} (a wheel with an extension is platform-specific)")
if problems:
    sys.exit("wheel check: " + "; ".join(problems))
print(f"wheel check: {wheel.name}: tag {tags[0]}")
EOF

# 3. A fresh virtual environment, and a PATH without any folder that holds cargo or rustc.
python -m venv "$work/venv"
bare_path="$work/venv/bin"
IFS=: read -r -a dirs <<<"$PATH"
for dir in "${dirs[@]}"; do
  if [ -n "$dir" ] && [ ! -e "$dir/cargo" ] && [ ! -e "$dir/rustc" ]; then
    bare_path="$bare_path:$dir"
  fi
done
in_venv() {
  (cd "$work" && env -u PYTHONPATH -u VIRTUAL_ENV -u CARGO_HOME -u RUSTUP_HOME PATH="$bare_path" \
    OPSCOPE_CACHE_DIR="$work/cache" "$@")
}
if in_venv sh -c 'command -v cargo || command -v rustc'; then
  echo "wheel check: a Rust toolchain is still on the bare PATH" >&2
  exit 1
fi
# --only-binary: nothing may be compiled, neither opscope nor a dependency
in_venv python -m pip install --quiet --only-binary :all: "$wheel"

# 4. Run from the install (not the checkout): the package and its extension come from the venv.
in_venv python -c '
import sys, opscope, opscope._native as native
where = [opscope.__file__, native.__file__]
assert all(p.startswith(sys.prefix) for p in where), where
print("wheel check: imported from", sys.prefix)'
in_venv opscope summary "$trace" --top 5
in_venv opscope advise "$trace" --top 3

# 5. A missing extra names the command that works for a wheel install, and that command works as printed.
if message="$(in_venv opscope report "$trace" -o "$work/report.html" 2>&1)"; then
  echo "wheel check: opscope report ran without jinja2 (the html extra)" >&2
  exit 1
fi
hint="${message##*: }"
if [ "$hint" != "pip install 'opscope[html]'" ]; then
  echo "wheel check: unexpected install hint: $message" >&2
  exit 1
fi
in_venv sh -c "$hint --quiet --only-binary :all:"
in_venv opscope report "$trace" -o "$work/report.html"
test -s "$work/report.html"
echo "wheel check: the wheel installs and runs without a Rust toolchain"
