#!/bin/sh
# Regenerates link/$PROFILE.order, the functions boot and a first turn run, in the order the
# linker places them (build.rs hands the file to lld); docs/benchmarks.md, "Boot code in one
# place", says why. PROFILE=release by default; `PROFILE=dist ROUNDS=0` for what hosts ship,
# where every relink is a fat-LTO build. Run it after changing what boot or a turn runs, or
# after a toolchain or dependency bump (symbol names carry hashes that change with them);
# scripts/linkorder/check.sh says whether the file still fits the build.
# Needs valgrind, perf and python3; takes a build with a link map (release ~4 min on 2
# cores, dist ~11) and then a few minutes, and the next normal build rebuilds the library.
#
# Callgrind finds the bulk (every instruction run, but under emulation: no pidfd, no sandbox
# spares, another CPU's feature paths). Then, natively, each relink with the order so far is
# run under perf's page-fault tracepoint; a fault outside the ordered code names a function
# the order missed, until a round adds none (or ROUNDS rounds, 8 by default).
set -eu
cd "$(dirname "$0")/../.."
work=$(mktemp -d "${TMPDIR:-/tmp}/linkorder.XXXXXX")
trap 'rm -rf "$work"' EXIT
profile=${PROFILE:-release}
rounds=${ROUNDS:-8}
bin=$(pwd)/target/$profile/outrigger
wl=scripts/linkorder/workload.py
if [ "$rounds" -gt 0 ]; then
  # The order under test is passed to each link by hand: build.rs's own would come after it
  # on the linker's command line, and the last one wins. (Switching costs a library rebuild.)
  export OUTRIGGER_LINK_ORDER=off
fi

link() { # <map> [order]: relinks only the binary when the library is built
  cargo rustc -q --profile "$profile" --locked --bin outrigger -- -C "link-arg=-Wl,-Map=$1" \
    ${2:+-C "link-arg=-Wl,--symbol-ordering-file=$2"}
}
specs() { # <map> <files...>: "file@map,file@map"
  m=$1; shift; for f in "$@"; do printf '%s@%s,' "$f" "$m"; done
}

link "$work/0.map"
for phase in boot work; do
  python3 "$wl" "$phase" valgrind --tool=callgrind --dump-instr=yes --compress-strings=no \
    --compress-pos=no --callgrind-out-file="$work/$phase.%p.cg" "$bin" \
    2>"$work/$phase.log" || { tail -20 "$work/$phase.log"; exit 1; }
done
boot=$(specs "$work/0.map" "$work"/boot.*.cg)
work_=$(specs "$work/0.map" "$work"/work.*.cg)
python3 scripts/linkorder/order.py "$work/1.order" "${boot%,}" "${work_%,}"

i=1
while [ "$i" -le "$rounds" ]; do
  link "$work/$i.map" "$work/$i.order"
  for phase in boot work; do
    SETTLE=1 perf record -q -o "$work/$phase.$i.data" -e exceptions:page_fault_user \
      python3 "$wl" "$phase" "$bin" >/dev/null 2>&1
    # Our processes: the sidecar, its threads, the spares (`exe`); not the driver or `bash`.
    perf script -i "$work/$phase.$i.data" -F comm,trace 2>/dev/null \
      | grep -vE '^ *(python|pyenv|bash|sh|readlink|basename|true|perf)' >"$work/$phase.$i.pf" || true
  done
  boot="$boot$(specs "$work/$i.map" "$work/boot.$i.pf")"
  work_="$work_$(specs "$work/$i.map" "$work/work.$i.pf")"
  python3 scripts/linkorder/order.py "$work/$((i + 1)).order" "${boot%,}" "${work_%,}"
  i=$((i + 1))
  if cmp -s "$work/$((i - 1)).order" "$work/$i.order"; then
    break
  fi
done
cp "$work/$i.order" "link/$profile.order"
echo "link/$profile.order: $(wc -l <"link/$profile.order") symbols after $((i - 1)) native rounds"
