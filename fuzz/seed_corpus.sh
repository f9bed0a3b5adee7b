#!/bin/sh
# Writes small seed corpora into fuzz/corpus/<target>/ (ignored by git). Optional: every
# target also starts from nothing. Run from anywhere: sh fuzz/seed_corpus.sh
set -eu
cd "$(dirname "$0")"
seed() { mkdir -p "corpus/$1"; printf '%s' "$3" > "corpus/$1/seed-$2"; }

seed frame 1 '{"jsonrpc":"2.0","id":1,"method":"system.ping"}'
seed frame 2 '{"jsonrpc":"2.0","id":"a","method":"m","params":{"x":"\ud83d","n":1e400}}'
seed frame 3 '{"jsonrpc":"2.0","method":"notify","params":[1,2,3]}'
seed frame 4 '{"jsonrpc":"2.0","id":"srv_1","result":{"ok":true}}'
seed frame 5 '{"jsonrpc":"2.0","id":"srv_2","error":{"code":-1,"message":"\udfff"}}'
seed frame 6 '[{"jsonrpc":"2.0","id":1,"method":"a"},5,{"id":2}]'
seed frame 7 '{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}'

seed sse 1 "$(printf '\007data: {"a":1}\n\n: keep-alive\r\n\r\nevent: error\ndata: boom\n\ndata: [DONE]')"
seed sse 2 "$(printf '\037data: one\ndata: two\r\nid: 7\nretry: 10\n\ndata:tight\n\ndata\n\n')"

seed patch 1 '{"patches":[{"path":"a.rs","edits":[{"oldText":"x","newText":"y"}],"expectedVersion":"abc"}]}'
seed patch 2 '{"patches":[{"path":"b","edits":[]},{"path":"c","edits":[{"oldText":"\u2019","newText":""}]}]}'

seed paths 1 'sub/f'
seed paths 2 '../x'
seed paths 3 '@/sub/up/../inner/f'
seed paths 4 'out/g'
seed paths 5 'slash/etc/passwd'
seed paths 6 'sec2/k'
seed paths 7 'dang/new'

seed manifest 1 '
name = "weather"
description = "Weather lookups"

[[tools]]
name = "get_forecast"
description = "Forecast for a city"
exec = "bin/t"
args = ["--json"]
timeout = "10s"
mode = "read"
exposure = "deferred"
env = { UNITS = "metric" }
parameters = '"'''"'{"type":"object","properties":{"city":{"type":"string"}}}'"'''"'
'
seed manifest 2 '[[tools]]
name = "t"
description = "d"
exec = "bin/t"
timeout = 1500
parameters = { type = "object", properties = { a = { type = "string", pattern = "^x+$" } } }
'
seed manifest 3 '10s'
