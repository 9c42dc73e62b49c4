#!/usr/bin/env bash
# The peer harness in one command (see benchmarks/RESULTS.md, "Indexes"):
#
#   benchmarks/peers/run.sh [--venv DIR] [--work DIR] [--keep] [driver options]
#
# It makes (or reuses) a Python virtual environment with requirements.txt from the package
# index (default: ${XDG_CACHE_HOME:-~/.cache}/shale-peers/venv), builds Shale's worker
# (shalepeer) from this checkout, prepares each system's copy of testdata/flights-3m.parquet
# under --work (default: a new temporary directory, deleted afterwards unless --keep) and
# runs the driver: interleaved pairs, min / median / max of the ratios, tables printed and
# written into benchmarks/RESULTS.md (--no-write to only print). Driver options:
# --suites index,scan,commit,ab (default: index,scan,commit; ab needs --shale-base BIN) --reps 9 --build-reps 5 --lookup-reps 21
# --import-reps 5 --commit-reps 5 --open-reps 21 --writer-procs 1,2,4,8 --rows N --data FILE
# (python3 driver.py --help inside the venv lists them all).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${SHALE_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/shale-peers/venv}"
work=""
keep=0
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) venv="$2"; shift 2 ;;
    --venv=*) venv="${1#--venv=}"; shift ;;
    --work) work="$2"; shift 2 ;;
    --work=*) work="${1#--work=}"; shift ;;
    --keep) keep=1; shift ;;
    *) args+=("$1"); shift ;;
  esac
done

python="${PYTHON:-python3}"
stamp="$venv/.shale-requirements"
if [ ! -x "$venv/bin/python" ]; then
  echo "peers: creating virtual environment $venv" >&2
  "$python" -m venv "$venv"
fi
if ! cmp -s "$here/requirements.txt" "$stamp"; then
  echo "peers: installing $(grep -v '^#' "$here/requirements.txt" | xargs) into $venv" >&2
  "$venv/bin/python" -m pip install --quiet -r "$here/requirements.txt"
  cp "$here/requirements.txt" "$stamp"
fi

made_work=0
if [ -z "$work" ]; then
  work="$(mktemp -d "${TMPDIR:-/tmp}/shale-peers-XXXXXX")"
  made_work=1
fi
mkdir -p "$work/bin"
cleanup() {
  if [ "$made_work" = 1 ] && [ "$keep" = 0 ]; then
    rm -rf "${work:?}"
  fi
}
trap cleanup EXIT

echo "peers: building shalepeer" >&2
(cd "$root" && go build -o "$work/bin/shalepeer" ./benchmarks/peers/shalepeer)

"$venv/bin/python" "$here/driver.py" --shale-bin "$work/bin/shalepeer" --work "$work" "${args[@]}"
