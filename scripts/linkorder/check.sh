#!/bin/sh
# Says whether link/$PROFILE.order still fits the build: relinks the binary with a link map
# (seconds, once the library is built) and counts how many of the file's names it has.
# Exits 1 below 98 %: regenerate with regen.sh. PROFILE=release by default.
set -eu
cd "$(dirname "$0")/../.."
profile=${PROFILE:-release}
map=$(mktemp "${TMPDIR:-/tmp}/linkorder-check.XXXXXX")
trap 'rm -f "$map"' EXIT
cargo rustc -q --profile "$profile" --locked --bin outrigger -- -C "link-arg=-Wl,-Map=$map"
python3 scripts/linkorder/order.py --check "link/$profile.order" "$map"
