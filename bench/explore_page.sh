#!/usr/bin/env bash
# tandem explore's bars (issue 45): the page of ResNet-152 on 8 devices is written in
# under 5 s, and in headless Chromium its graph is on screen under 3 s after the page
# starts loading. Each of R rounds writes the page (wall time of the command) and opens it
# from its file:// URL in a fresh headless Chromium, which dumps the DOM; the page's
# script records its own timings on <body> (performance.now(), from navigation start):
#   graph-painted-ms   the first frame with the graph drawn (after the script's first
#                      render, requestAnimationFrame then a task): the figure the bar is on
#   fcp-ms             the browser's first contentful paint (the header, before the script)
#   script-start-ms, parse-ms, setup-ms, render-ms, layout-ms: where the time goes
# Prints each round and the medians. Chromium's own start-up is not in the figures (the
# page's clock starts with the navigation).
#
#   bench/explore_page.sh [--rounds R] [--model M] [--devices D] [--tandem PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
rounds=5 model=resnet152 devices=8 tandem=build/tools/tandem
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="${2:?--rounds needs a value}"; shift 2 ;;
    --model) model="${2:?--model needs a value}"; shift 2 ;;
    --devices) devices="${2:?--devices needs a value}"; shift 2 ;;
    --tandem) tandem="${2:?--tandem needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "explore_page: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -x $tandem ]] || { echo "explore_page: $tandem is not an executable tandem" >&2; exit 2; }
command -v chromium >/dev/null || { echo "explore_page: chromium is not installed (apt-get install chromium)" >&2; exit 2; }
work=$(mktemp -d -t tandem-explore-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
page=$work/page.html

# The value of data-NAME on <body> in a dumped DOM.
body_data() { grep -o '<body[^>]*>' "$2" | grep -o "data-$1=\"[^\"]*\"" | cut -d'"' -f2; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "tandem explore --model $model --devices $devices: $rounds rounds ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%6s %10s %10s %12s %8s %9s %9s %10s %10s %9s\n' round write_s page_MB graph_paint_ms fcp_ms script_ms parse_ms setup_ms render_ms layout_ms
writes=() paints=() fcps=()
for ((r = 1; r <= rounds; r++)); do
  start=$(date +%s.%N)
  "$tandem" explore --model "$model" --devices "$devices" -o "$page"
  end=$(date +%s.%N)
  write_s=$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')
  size=$(stat -c %s "$page")
  dom=$work/dom.$r.html
  timeout 300 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --host-resolver-rules='MAP * ~NOTFOUND' --window-size=1600,1000 \
    --user-data-dir="$work/profile.$r" --dump-dom "file://$page" >"$dom" 2>/dev/null
  paint=$(body_data graph-painted-ms "$dom")
  [[ -n $paint ]] || { echo "explore_page: round $r: the page did not record its paint" >&2; exit 1; }
  fcp=$(body_data fcp-ms "$dom")
  printf '%6d %10.2f %10.2f %12s %8s %9s %9s %10s %10s %9s\n' "$r" "$write_s" \
    "$(awk -v s="$size" 'BEGIN { print s / 1048576 }')" "$paint" "${fcp:--}" "$(body_data script-start-ms "$dom")" \
    "$(body_data parse-ms "$dom")" "$(body_data setup-ms "$dom")" "$(body_data render-ms "$dom")" \
    "$(body_data layout-ms "$dom")"
  writes+=("$write_s") paints+=("$paint") fcps+=("${fcp:-0}")
done
printf 'median: write %.2f s, graph painted %.0f ms after navigation start, first contentful paint %.0f ms\n' \
  "$(printf '%s\n' "${writes[@]}" | median)" "$(printf '%s\n' "${paints[@]}" | median)" \
  "$(printf '%s\n' "${fcps[@]}" | median)"
