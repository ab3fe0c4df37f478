#!/usr/bin/env bash
# The Linux wheel: build it for old glibc, check what the binary really needs, install it into a fresh virtual
# environment whose PATH has no Rust toolchain, and run `summary`, `advise`, `brief` and `report` from that install.
#
# Usage: .ci/wheel_check.sh [TRACE]   (with the development venv active: it provides maturin, ziglang, auditwheel)
#
# maturin links with zig (`--zig`, ziglang from PyPI: no container) against glibc 2.17's symbols, so one
# cp310-abi3-manylinux_2_17 wheel installs on RHEL/Rocky 8, Ubuntu 20.04, Amazon Linux 2 and newer. The build
# has its own target folder (native/target/manylinux): zig as the linker would otherwise invalidate the release
# build that `pip install -e .` keeps in native/target. auditwheel then reads the glibc symbol versions the
# extension asks for; the file name alone proves nothing. The release workflow builds the same way.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
traces="${OPSCOPE_TRACES:-$repo/../shared/traces}"
trace="${1:-$traces/tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz}"
policy="manylinux_2_17"  # the oldest glibc (2.17) Rust's standard library supports
newest_allowed="2.28"    # what the wheel may need at most: RHEL 8's glibc
if [ ! -f "$trace" ]; then
  echo "wheel check: trace not found: $trace (set OPSCOPE_TRACES or pass a trace)" >&2
  exit 1
fi
trace="$(cd "$(dirname "$trace")" && pwd)/$(basename "$trace")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# 1. Build.
(cd "$repo" && CARGO_TARGET_DIR="$repo/native/target/manylinux" maturin build --release --quiet --zig \
  --compatibility "$policy" --out "$work/dist" --interpreter "$(command -v python)")
wheels=("$work"/dist/opscope-*.whl)
if [ "${#wheels[@]}" -ne 1 ]; then
  echo "wheel check: expected one wheel, found: ${wheels[*]}" >&2
  exit 1
fi
wheel="${wheels[0]}"

# 2. Tags, the glibc the binary really needs (auditwheel reads its versioned symbols), and no debug info or
# symbol table left in the extension (the release profile strips it).
python - "$wheel" "$newest_allowed" <<'EOF'
import re, subprocess, sys, zipfile
from pathlib import Path

from elftools.elf.elffile import ELFFile  # pyelftools: auditwheel's own ELF reader

wheel, newest_allowed = Path(sys.argv[1]), tuple(int(part) for part in sys.argv[2].split("."))
problems = []
with zipfile.ZipFile(wheel) as archive:
    info = next(n for n in archive.namelist() if n.endswith(".dist-info/WHEEL"))
    fields = [line.split(":", 1) for line in archive.read(info).decode().splitlines() if ":" in line]
    extension = next(n for n in archive.namelist() if n.endswith(".abi3.so"))
    (wheel.parent / "extension.so").write_bytes(archive.read(extension))
    extension_size = archive.getinfo(extension).file_size
tags = [value.strip() for key, value in fields if key == "Tag"]
pure = [value.strip() for key, value in fields if key == "Root-Is-Purelib"]
if not tags or not all(re.fullmatch(r"cp310-abi3-manylinux(2014|_2_\d+)_x86_64", tag) for tag in tags):
    problems.append(f"tags {tags} (want cp310-abi3-manylinux_* tags)")
if not wheel.name.endswith("-cp310-abi3-" + ".".join(tag.split("-")[2] for tag in tags) + ".whl"):
    problems.append(f"the file name {wheel.name} does not carry the tags {tags}")
if pure != ["false"]:
    problems.append(f"Root-Is-Purelib {pure} (a wheel with an extension is platform-specific)")

shown = " ".join(
    subprocess.run(["auditwheel", "show", str(wheel)], capture_output=True, text=True, check=True).stdout.split()
)
found = re.search(r'consistent with the following platform tag: "manylinux_(\d+)_(\d+)_x86_64"', shown)
needs = (0, 0)
if found is None:
    problems.append(f"auditwheel names no manylinux policy: {shown[:300]}")
else:
    needs = (int(found[1]), int(found[2]))
    if needs > newest_allowed:
        problems.append(f"the extension needs glibc {needs[0]}.{needs[1]} (at most {sys.argv[2]} allowed)")
    if not any(tag.endswith(f"manylinux_{needs[0]}_{needs[1]}_x86_64") for tag in tags):
        problems.append(f"auditwheel says manylinux_{needs[0]}_{needs[1]}, the wheel is tagged {tags}")

with open(wheel.parent / "extension.so", "rb") as handle:
    sections = [section.name for section in ELFFile(handle).iter_sections()]
(wheel.parent / "extension.so").unlink()
left = [name for name in sections if name == ".symtab" or name.startswith(".debug_")]
if left:
    problems.append(f"the extension is not stripped: {left}")
if problems:
    sys.exit("wheel check: " + "; ".join(problems))
print(f"wheel check: {wheel.name}: auditwheel: glibc >= {needs[0]}.{needs[1]}; stripped;"
      f" wheel {wheel.stat().st_size / 1e6:.1f} MB, extension {extension_size / 1e6:.1f} MB")
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
in_venv opscope --version
in_venv opscope summary "$trace" --top 5
in_venv opscope advise "$trace" --top 3
brief="$(in_venv opscope brief "$trace")"
printf '%s\n' "$brief"
lines="$(printf '%s\n' "$brief" | wc -l)"
if [ "$lines" -gt 15 ]; then
  echo "wheel check: brief printed $lines lines (at most 15)" >&2
  exit 1
fi

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
