#!/usr/bin/env bash
# The pictures of tandem explore's views in docs/figures/ (README's tour points at them):
# pages of ResNet-18 on 4 devices and of a short traced training run, opened in headless
# Chromium with the page's #do= actions (the clicks a person would make) and captured.
#
#   tools/tandem/explore/screenshots.sh [BUILD_DIR]      (default build; needs the
#   Fashion-MNIST files and chromium, as scripts/setup installs them)
set -euo pipefail
cd "$(dirname "$0")/../../.."
tandem=${1:-build}/tools/tandem
out=docs/figures
work=$(mktemp -d -t tandem-explore-shots.XXXXXX)
trap 'rm -rf "$work"' EXIT

shot() {  # PAGE ACTIONS PICTURE
  timeout 300 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --host-resolver-rules='MAP * ~NOTFOUND' --hide-scrollbars --window-size=1600,1000 \
    --user-data-dir="$work/profile" --screenshot="$out/$3" "file://$1#do=$2" 2>/dev/null
  echo "wrote $out/$3"
}

# The step of the README: ResNet-18 on four devices.
"$tandem" explore --model resnet18 --devices 4 -o "$work/resnet18.html"
shot "$work/resnet18.html" "zoom:0.62;select-op:all_reduce" explore-graph.png
shot "$work/resnet18.html" "select:stage2.block0.conv1.0" explore-expanded.png
shot "$work/resnet18.html" "view:memory" explore-memory.png

# A short training run of ResNet-18 on two devices: its trace and learning curves.
"$tandem" train --model resnet18 --devices 2 --batch 64 --epochs 3 --limit-train 640 \
  --limit-test 256 --trace "$work/trace.json" --metrics "$work/metrics.csv" >/dev/null
"$tandem" explore --model resnet18 --devices 2 --batch 64 --trace "$work/trace.json" \
  --metrics "$work/metrics.csv" -o "$work/trained.html"
shot "$work/trained.html" "select-op:all_reduce;view:timeline" explore-timeline.png
shot "$work/trained.html" "view:training" explore-training.png
