// tandem explore: the page's script. It reads the document that `tandem explore` wrote
// (tools/tandem/explore/page_data.cc) and draws four views of one graph of a module: the
// graph by scope with a lane per device (laid out by dagre, which the page inlines), the
// memory plan, the measured timeline of a trace, and the learning curves. Everything runs
// in this page: nothing is fetched.
'use strict';
(function () {
  const scriptStart = performance.now();
  const D = JSON.parse(document.getElementById('tandem-data').textContent);
  document.body.dataset.parseMs = (performance.now() - scriptStart).toFixed(1);
  document.body.dataset.scriptStartMs = scriptStart.toFixed(1);
  const FORMAT = 1;
  const PHASES = ['forward', 'backward', 'update'];
  const STREAMS = ['compute', 'comm', 'prefetch'];
  const $ = (id) => document.getElementById(id);
  const log = (text) => {
    const l = $('log');
    l.textContent += text + '\n';
  };
  if (D.format !== FORMAT) {
    document.body.textContent = 'This page holds data of format ' + D.format +
        ', but its script reads format ' + FORMAT + '.';
    return;
  }

  // ---- the data ---------------------------------------------------------------------
  const nodes = D.nodes;
  const N = nodes.name.length;
  const devices = D.devices;
  const opName = (i) => D.ops[nodes.op[i]];
  const pathOf = (i) => D.paths[nodes.path[i]];
  const isCollective = (i) => D.collectives[i] !== undefined;
  const collective = (i) => D.collectives[i];
  const resultDevice = (i, r) => nodes.results[i][r][4];
  // A result's name (the first result's is the node's, left out of the data).
  const resultName = (i, r) => r === 0 ? nodes.name[i] : nodes.results[i][r][0];

  // The lanes: one per device, and one for what lives on the host (graph inputs; every
  // node of a module not yet replicated).
  const HOST = -1;
  const laneName = (l) => l === HOST ? (devices.length ? 'host' : 'module') : devices[l];
  function lanesOf(i) {
    if (isCollective(i)) return collective(i).devices;
    return [nodes.device[i]];
  }
  const laneNodes = new Map();  // lane -> node positions, in graph order
  for (let i = 0; i < N; i++)
    for (const l of lanesOf(i)) {
      if (!laneNodes.has(l)) laneNodes.set(l, []);
      laneNodes.get(l).push(i);
    }
  const lanes = [...laneNodes.keys()].sort((a, b) => a - b);

  // ---- scopes: model > stage > block > layer ------------------------------------------
  const scopes = new Map();  // path -> {path, name, parent, children, count}
  const root = {path: '', name: D.module, parent: null, children: [], count: 0, depth: 0};
  scopes.set('', root);
  function ensureScope(path) {
    let s = scopes.get(path);
    if (s) return s;
    const dot = path.lastIndexOf('.');
    const parent = ensureScope(dot < 0 ? '' : path.slice(0, dot));
    s = {path, name: dot < 0 ? path : path.slice(dot + 1), parent, children: [], count: 0,
      depth: parent.depth + 1};
    parent.children.push(s);
    scopes.set(path, s);
    return s;
  }
  // Per layer path (its index in D.paths) the scopes it lies in, outermost first.
  const prefixes = D.paths.map((p) => {
    if (p === '') return [];
    const parts = p.split('.');
    const out = [];
    for (let k = 1; k <= parts.length; k++) out.push(parts.slice(0, k).join('.'));
    ensureScope(p);
    return out;
  });
  // Counts per device lane: what one replica of the step holds.
  const countLane = lanes.find((l) => l !== HOST) ?? HOST;
  for (const i of laneNodes.get(countLane) || [])
    for (const s of prefixes[nodes.path[i]]) scopes.get(s).count++;

  const expanded = new Set();  // scopes drawn open; the model's own is always open

  // Parameter reads (a view of a variable, no work) are left out of the drawing unless asked
  // for: every layer's weights would add an edge into its forward, backward and update.
  let showParams = false, showSaved = false;
  const isParam = new Uint8Array(N);
  for (let i = 0; i < N; i++) isParam[i] = opName(i) === 'param' ? 1 : 0;
  const hidden = (i) => isParam[i] === 1 && !showParams;

  // What stands for node i in the drawing: the node itself, or the box of its outermost
  // collapsed scope (one box per scope and phase).
  // A collective the model's code did not make in a layer (a gradient bucket, the split of
  // the batch) is drawn on its own whatever is collapsed, as the DOT views draw them: the
  // parallel step is about them.
  const alone = new Uint8Array(N);
  for (let i = 0; i < N; i++) alone[i] = isCollective(i) && D.scopes[nodes.scope[i]] === '' ? 1 : 0;
  // Computed once per node and drawing (every lane and every edge asks).
  let keys = new Array(N);
  function keyOf(i) {
    const cached = keys[i];
    if (cached !== undefined) return cached;
    let key = 'n|' + i;
    if (!alone[i])
      for (const s of prefixes[nodes.path[i]])
        if (!expanded.has(s)) {
          key = 'g|' + s + '|' + nodes.phase[i];
          break;
        }
    keys[i] = key;
    return key;
  }

  // ---- measurements -----------------------------------------------------------------
  const T = D.trace;
  const spansOf = new Map();  // node -> span indices
  const measured = new Float64Array(N).fill(NaN);  // median measured microseconds
  if (T) {
    const s = T.spans;
    const durations = new Map();
    for (let k = 0; k * 6 < s.length; k++) {
      const i = s[k * 6];
      if (!spansOf.has(i)) {
        spansOf.set(i, []);
        durations.set(i, []);
      }
      spansOf.get(i).push(k);
      if (s[k * 6 + 2] !== 2) durations.get(i).push(s[k * 6 + 5]);
    }
    for (const [i, list] of durations) {
      if (!list.length) continue;
      list.sort((a, b) => a - b);
      measured[i] = list[list.length >> 1];
    }
  }

  // ---- formatting --------------------------------------------------------------------
  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;',
      '"': '&quot;'}[c]));
  }
  function bytes(b) {
    if (b === undefined || b === null || b < 0) return '-';
    if (b < 1024) return b + ' B';
    if (b < 1048576) return (b / 1024).toFixed(1) + ' KiB';
    if (b < 1073741824) return (b / 1048576).toFixed(2) + ' MiB';
    return (b / 1073741824).toFixed(2) + ' GiB';
  }
  function micros(us) {
    if (!isFinite(us)) return '-';
    if (us < 1000) return us.toFixed(1) + ' µs';
    return (us / 1000).toFixed(2) + ' ms';
  }
  function flops(f) {
    if (!f) return '0';
    const units = [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
    for (const [v, u] of units) if (f >= v) return (f / v).toFixed(2) + ' ' + u + 'FLOP';
    return f.toFixed(0) + ' FLOP';
  }
  // A node's line of the textual IR, less its plan and location (shown apart): the pieces
  // are the printer's (the attributes are its own text).
  function irLine(i) {
    const res = nodes.results[i], ops = nodes.operands[i];
    let line = res.map((r, k) => '%' + resultName(i, k)).join(', ');
    if (res.length) line += ' = ';
    const args = [];
    for (let k = 0; k < ops.length; k += 2) args.push('%' + resultName(ops[k], ops[k + 1]));
    line += opName(i) + '(' + args.join(', ') + ')' + D.attributes[nodes.attrs[i]];
    if (nodes.device[i] >= 0 && !isCollective(i)) line += ' @' + devices[nodes.device[i]];
    if (res.length) line += ' : ' + res.map((r) => D.types[r[1]]).join(', ');
    return line;
  }
  const clip = (s, n) => s.length > n ? s.slice(0, n - 1) + '…' : s;
  const nodeLink = (i, text) =>
    '<a class="node-link" data-node="' + i + '">' + esc(text ?? '%' + nodes.name[i]) + '</a>';

  // ---- the graph: one layout per distinct lane ----------------------------------------
  const SIZE = {group: [150, 36], node: [136, 32], port: [178, 34], param: [110, 22]};
  const layouts = new Map();  // lane signature -> layout
  let lastLayoutMs = 0, layoutRuns = 0;

  // The drawing of lane l as it stands: its items (boxes, nodes, collective ports), the
  // frames of its expanded scopes, its edges, and the edges that leave it.
  function laneGraph(l) {
    const items = [], byKey = new Map(), clusters = [], clusterByKey = new Map();
    function cluster(scope, phase) {
      if (scope === '') return null;
      const key = 'c|' + scope + '|' + phase;
      if (clusterByKey.has(key)) return clusterByKey.get(key);
      const parentScope = scopes.get(scope).parent.path;
      const c = {key, scope, phase, parent: cluster(parentScope, phase), index: clusters.length};
      clusters.push(c);
      clusterByKey.set(key, c);
      return c;
    }
    for (const i of laneNodes.get(l)) {
      if (hidden(i)) continue;
      const key = keyOf(i);
      let it = byKey.get(key);
      if (!it) {
        const phase = nodes.phase[i];
        if (key[0] === 'g') {
          const scope = key.slice(2, key.lastIndexOf('|'));
          const parent = scopes.get(scope).parent.path;
          it = {key, kind: 'group', scope, phase, members: [], parent: cluster(parent, phase)};
        } else {
          const kind = isCollective(i) ? 'port' : opName(i) === 'param' ? 'param' : 'node';
          it = {key, kind, node: i, phase, members: [],
            parent: alone[i] ? null : cluster(pathOf(i), phase)};
        }
        it.index = items.length;
        items.push(it);
        byKey.set(key, it);
      }
      it.members.push(i);
    }
    const edges = [], cross = [], seen = new Set();
    for (const it of items)
      for (const i of it.members) {
        const ops = nodes.operands[i];
        for (let k = 0; k < ops.length; k += 2) {
          const p = ops[k], vd = resultDevice(p, ops[k + 1]);
          if (hidden(p)) continue;
          // A collective reads each device's operands in that device's lane.
          if (isCollective(i) && vd !== l && lanesOf(i).includes(vd)) continue;
          const from = byKey.get(keyOf(p));
          if (from) {
            if (from === it) continue;
            const e = from.index + '>' + it.index;
            if (seen.has(e)) continue;
            seen.add(e);
            edges.push([from.index, it.index]);
            continue;
          }
          // From another lane (the host's inputs into a split): drawn once, into the
          // collective's first lane.
          if (isCollective(i) && lanesOf(i)[0] !== l) continue;
          const e = 'x' + p + '>' + it.index;
          if (seen.has(e)) continue;
          seen.add(e);
          const from_lane = lanesOf(p).includes(vd) ? vd : lanesOf(p)[0];
          cross.push({from: p, lane: from_lane, to: it.index});
        }
      }
    // Saved activations: a forward value that backward reads again, into a backward item
    // that backward feeds already. They run from the top of the step to the bottom, and
    // laid out they cost dagre a dummy node per rank they cross (a ResNet stage's blocks:
    // thousands, seconds of layout), so they are left out of the layout and drawn only on
    // request; the backward that reads only forward values (the loss's) keeps its edges,
    // which hang backward below forward.
    const fedByBackward = new Uint8Array(items.length);
    for (const [a, b] of edges) if (items[a].phase === 1) fedByBackward[b] = 1;
    const laid = [], saved = [];
    for (const e of edges)
      (items[e[0]].phase === 0 && items[e[1]].phase === 1 && fedByBackward[e[1]] ? saved : laid)
        .push(e);
    // Items, frames and edges without device-specific names: equal lanes share a layout.
    const sig = items.map((it) => it.kind === 'group'
      ? 'g' + it.scope + it.phase + (it.parent ? it.parent.index : '')
      : it.kind + opName(it.node) + nodes.path[it.node] + it.phase +
        (it.parent ? it.parent.index : '')).join(';') + '#' +
      clusters.map((c) => c.scope + c.phase + (c.parent ? c.parent.index : '')).join(';') +
      '#' + laid.map((e) => e[0] + '>' + e[1]).join(',');
    return {lane: l, items, byKey, clusters, edges: laid, saved, cross, sig};
  }

  function layOut(lg) {
    const cached = layouts.get(lg.sig);
    if (cached) return cached;
    const t0 = performance.now();
    const g = new dagre.graphlib.Graph({compound: true});
    g.setGraph({rankdir: 'TB', nodesep: 14, ranksep: 26, edgesep: 8, marginx: 12, marginy: 12});
    g.setDefaultEdgeLabel(() => ({}));
    for (const c of lg.clusters) g.setNode('c' + c.index, {});
    for (const c of lg.clusters) if (c.parent) g.setParent('c' + c.index, 'c' + c.parent.index);
    for (const it of lg.items) {
      const [w, h] = SIZE[it.kind];
      g.setNode('i' + it.index, {width: w, height: h});
      if (it.parent) g.setParent('i' + it.index, 'c' + it.parent.index);
    }
    for (const [a, b] of lg.edges) g.setEdge('i' + a, 'i' + b);
    dagre.layout(g);
    const out = {
      items: lg.items.map((it) => {
        const n = g.node('i' + it.index);
        return [n.x, n.y, n.width, n.height];
      }),
      clusters: lg.clusters.map((c) => {
        const n = g.node('c' + c.index);
        return [n.x, n.y, n.width, n.height];
      }),
      edges: lg.edges.map(([a, b]) => g.edge('i' + a, 'i' + b).points),
      width: g.graph().width || 100,
      height: g.graph().height || 100,
    };
    lastLayoutMs += performance.now() - t0;
    layoutRuns++;
    layouts.set(lg.sig, out);
    return out;
  }

  // ---- colours ------------------------------------------------------------------------
  let colourMode = 'phase';
  function itemValue(it) {
    let v = 0, any = false;
    for (const i of it.members) {
      const x = colourMode === 'time' ? measured[i] : nodes.bytes[i];
      if (isFinite(x)) {
        v += x;
        any = true;
      }
    }
    return any ? v : NaN;
  }
  function heat(v, max) {
    if (!isFinite(v) || max <= 0) return '#eeeeee';
    const t = Math.log1p(v) / Math.log1p(max);  // 0..1
    const r = 255, g = Math.round(245 - 170 * t), b = Math.round(230 - 200 * t);
    return 'rgb(' + r + ',' + g + ',' + b + ')';
  }
  function drawLegend(max) {
    const l = $('legend');
    l.title = 'laid out by ' + D.layout_library;
    if (colourMode === 'phase') {
      l.innerHTML = 'phase<span class="swatch" style="background:#fff"></span>forward' +
        '<span class="swatch" style="background:#fde2e2"></span>backward' +
        '<span class="swatch" style="background:#d5f5d5"></span>update' +
        '<span class="swatch" style="background:#ffe2bf"></span>collective' +
        '<span class="swatch" style="background:#eef0f5"></span>parameter read';
    } else {
      l.innerHTML = (colourMode === 'time' ? 'median measured time' : 'bytes written') +
        '<span class="swatch" style="background:' + heat(0, 1) + '"></span>0' +
        '<span class="swatch" style="background:' + heat(max, max) + '"></span>' +
        (colourMode === 'time' ? micros(max) : bytes(max)) + ' (log scale; grey: none)';
    }
  }

  // ---- drawing the graph ----------------------------------------------------------------
  let selected = -1;
  let placed = [];  // per lane drawn: {lane, x, lg, layout}
  const LANE_GAP = 36, LANE_TOP = 30;

  function itemLabel(it) {
    if (it.kind === 'group') {
      const s = scopes.get(it.scope);
      const n = it.members.length;
      return [clip(s.name, 22), PHASES[it.phase] + ' · ' + n + (n === 1 ? ' node' : ' nodes')];
    }
    const i = it.node;
    if (it.kind === 'port') {
      const c = collective(i);
      return [clip(c.describe, 28), bytes(c.bytes_per_device) + ' · ' + c.tensors +
        (c.tensors === 1 ? ' tensor' : ' tensors')];
    }
    if (it.kind === 'param') return [clip('param ' + nodes.name[i], 18)];
    return [clip(opName(i), 22), clip('%' + nodes.name[i], 24)];
  }

  function render() {
    const t0 = performance.now();
    keys = new Array(N);
    lastLayoutMs = 0;
    placed = [];
    // The device lanes side by side; the host's (graph inputs) above them when there are
    // devices.
    let x = 0, maxH = 0, top = LANE_TOP;
    let graphMs = 0;
    for (const l of lanes) {
      const tg = performance.now();
      const lg = laneGraph(l);
      graphMs += performance.now() - tg;
      if (!lg.items.length) continue;
      const layout = layOut(lg);
      if (l === HOST && lanes.length > 1) {
        placed.push({lane: l, x: 0, y: LANE_TOP, lg, layout, height: layout.height});
        top = LANE_TOP + layout.height + LANE_GAP + 24;
        continue;
      }
      placed.push({lane: l, x, y: 0, lg, layout});
      x += layout.width + LANE_GAP;
      maxH = Math.max(maxH, layout.height);
    }
    for (const p of placed) {
      if (p.height === undefined) {
        p.y = top;
        p.height = maxH;
      }
    }
    let max = 0;
    if (colourMode !== 'phase')
      for (const p of placed)
        for (const it of p.lg.items) {
          const v = itemValue(it);
          if (isFinite(v)) max = Math.max(max, v);
        }
    const out = [];
    const buses = [];
    const portAt = new Map();  // collective -> [[x, y, w, h]] in page coordinates
    for (const p of placed) {
      const {lane, lg, layout} = p;
      out.push('<g class="lane" data-lane="' + lane + '" transform="translate(' + p.x + ',' +
        p.y + ')">');
      out.push('<rect class="lane-bg' + (lane === HOST ? ' host' : '') + '" x="0" y="-24" width="' +
        layout.width + '" height="' + (p.height + 28) + '" rx="6"/>');
      out.push('<text class="lane-title" x="8" y="-8">' + esc(laneName(lane)) + '</text>');
      lg.clusters.forEach((c, k) => {
        const [cx, cy, w, h] = layout.clusters[k];
        out.push('<g class="cluster" data-scope="' + esc(c.scope) + '"><rect x="' + (cx - w / 2) +
          '" y="' + (cy - h / 2) + '" width="' + w + '" height="' + h + '" rx="6"/>' +
          '<text x="' + (cx - w / 2 + 5) + '" y="' + (cy - h / 2 + 11) + '">▾ ' +
          esc(c.scope) + ' · ' + PHASES[c.phase] + '</text></g>');
      });
      for (const pts of layout.edges) {
        let d = 'M' + pts[0].x + ',' + pts[0].y;
        for (let k = 1; k < pts.length; k++) d += 'L' + pts[k].x + ',' + pts[k].y;
        out.push('<path class="edge" d="' + d + '"/>');
      }
      if (showSaved)
        for (const [a, b] of lg.saved) {
          const [ax, ay, , ah] = layout.items[a], [bx, by, , bh] = layout.items[b];
          out.push('<path class="edge saved" d="M' + ax + ',' + (ay + ah / 2) + 'C' + ax + ',' +
            (ay + ah / 2 + 60) + ' ' + bx + ',' + (by - bh / 2 - 60) + ' ' + bx + ',' +
            (by - bh / 2) + '"/>');
        }
      lg.items.forEach((it, k) => {
        const [cx, cy, w, h] = layout.items[k];
        const cls = ['item', it.kind, 'phase-' + it.phase];
        if (it.kind !== 'group' && it.node === selected) cls.push('selected');
        let fill = '';
        if (colourMode !== 'phase') fill = ' style="fill:' + heat(itemValue(it), max) + '"';
        const data = it.kind === 'group' ? ' data-scope="' + esc(it.scope) + '"'
          : ' data-node="' + it.node + '"';
        const lines = itemLabel(it);
        const title = it.kind === 'group'
          ? it.scope + ' (' + PHASES[it.phase] + '): ' + it.members.length + ' nodes; click to expand'
          : it.kind === 'port' ? collective(it.node).describe + ' over ' +
            lanesOf(it.node).map(laneName).join(', ')
          : '%' + nodes.name[it.node] + ' = ' + opName(it.node) + D.attributes[nodes.attrs[it.node]];
        out.push('<g class="' + cls.join(' ') + '"' + data + ' transform="translate(' +
          (cx - w / 2) + ',' + (cy - h / 2) + ')"><rect width="' + w + '" height="' + h +
          '" rx="3"' + fill + '/><text x="6" y="' + (lines.length > 1 ? 13 : 15) + '">' +
          esc(lines[0]) + '</text>' +
          (lines.length > 1 ? '<text class="sub" x="6" y="26">' + esc(lines[1]) + '</text>' : '') +
          '<title>' + esc(title) + '</title></g>');
        if (it.kind === 'port') {
          if (!portAt.has(it.node)) portAt.set(it.node, []);
          portAt.get(it.node).push([p.x + cx, p.y + cy, w, h]);
        }
      });
      out.push('</g>');
    }
    // A collective spans lanes: a bus joins its ports, beneath everything.
    for (const [, ports] of portAt) {
      if (ports.length < 2) continue;
      let d = '';
      for (let k = 0; k + 1 < ports.length; k++) {
        const [ax, ay, aw] = ports[k], [bx, by, bw] = ports[k + 1];
        d += 'M' + (ax + aw / 2) + ',' + ay + 'L' + (bx - bw / 2) + ',' + by;
      }
      buses.push('<path class="bus" d="' + d + '"/>');
    }
    // Edges between lanes (the host's inputs into a split): dashed, straight.
    const crossOut = [];
    for (const p of placed)
      for (const e of p.lg.cross) {
        const src = placed.find((q) => q.lane === e.lane);
        if (!src) continue;
        const from = src.lg.byKey.get(keyOf(e.from));
        if (!from) continue;
        const [fx, fy, , fh] = src.layout.items[from.index];
        const [tx, ty, , th] = p.layout.items[e.to];
        crossOut.push('<path class="edge cross" d="M' + (src.x + fx) + ',' + (src.y + fy + fh / 2) +
          'L' + (p.x + tx) + ',' + (p.y + ty - th / 2) + '"/>');
      }
    const ti = performance.now();
    $('viewport').innerHTML = buses.join('') + out.join('') + crossOut.join('');
    const tj = performance.now();
    drawLegend(max);
    syncTree();
    document.body.dataset.timings = 'lanes ' + graphMs.toFixed(1) + ' svg ' + (ti - t0 - graphMs - lastLayoutMs).toFixed(1) +
      ' dom ' + (tj - ti).toFixed(1) + ' tree ' + (performance.now() - tj).toFixed(1);
    graphSize = {width: Math.max(x, 1), height: top + maxH + 10};
    const ms = performance.now() - t0;
    document.body.dataset.renderMs = ms.toFixed(1);
    document.body.dataset.layoutMs = lastLayoutMs.toFixed(1);
    document.body.dataset.layoutRuns = String(layoutRuns);
    document.body.dataset.items = String(placed.reduce((a, p) => a + p.lg.items.length, 0));
  }

  // ---- pan and zoom ---------------------------------------------------------------------
  let view = {x: 10, y: 10, k: 1};
  let graphSize = {width: 1, height: 1};
  function applyView() {
    $('viewport').setAttribute('transform',
      'translate(' + view.x + ',' + view.y + ') scale(' + view.k + ')');
  }
  // The first view shows the whole step when it fits at a readable size, else its top left.
  let minFit = 0.45;
  function fit() {
    const svg = $('graph');
    const w = svg.clientWidth || 1200, h = svg.clientHeight || 800;
    const k = Math.min(1.2, (w - 20) / graphSize.width, (h - 20) / graphSize.height);
    view = {k: Math.max(k, minFit), x: 10, y: 10};
    applyView();
  }
  function centreOn(i) {
    for (const p of placed) {
      const it = p.lg.byKey.get('n|' + i);
      if (!it) continue;
      const [cx, cy] = p.layout.items[it.index];
      const svg = $('graph');
      view.k = Math.max(view.k, 0.8);
      view.x = (svg.clientWidth || 1200) / 2 - (p.x + cx) * view.k;
      view.y = (svg.clientHeight || 800) / 2 - (p.y + cy) * view.k;
      applyView();
      return;
    }
  }
  // Brings a drawn element (a scope's box or frame) to the middle of the view.
  function centreOnElement(el) {
    const svg = $('graph'), box = el.getBoundingClientRect(), at = svg.getBoundingClientRect();
    view.x += at.left + (svg.clientWidth || 1200) / 2 - (box.left + box.width / 2);
    view.y += at.top + (svg.clientHeight || 800) / 3 - (box.top + box.height / 2);
    applyView();
  }
  (function panZoom() {
    const svg = $('graph');
    let drag = null;
    svg.addEventListener('wheel', (e) => {
      e.preventDefault();
      const r = svg.getBoundingClientRect();
      const mx = e.clientX - r.left, my = e.clientY - r.top;
      const k = Math.min(4, Math.max(0.03, view.k * Math.exp(-e.deltaY * 0.0015)));
      view.x = mx - (mx - view.x) * k / view.k;
      view.y = my - (my - view.y) * k / view.k;
      view.k = k;
      applyView();
    }, {passive: false});
    svg.addEventListener('mousedown', (e) => {
      drag = {x: e.clientX, y: e.clientY, vx: view.x, vy: view.y, moved: false};
    });
    window.addEventListener('mousemove', (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      view.x = drag.vx + dx;
      view.y = drag.vy + dy;
      applyView();
    });
    window.addEventListener('mouseup', () => {
      setTimeout(() => (drag = null), 0);
    });
    svg.addEventListener('click', (e) => {
      if (drag && drag.moved) return;
      const item = e.target.closest('.item');
      if (item) {
        if (item.dataset.scope !== undefined) {
          setExpanded(item.dataset.scope, true);
          showScope(item.dataset.scope);
        } else {
          select(Number(item.dataset.node));
        }
        return;
      }
      const c = e.target.closest('.cluster');
      if (c && e.target.tagName === 'text') setExpanded(c.dataset.scope, false);
    });
  })();

  // ---- the scope tree -------------------------------------------------------------------
  function buildTree() {
    const html = [];
    function add(s) {
      html.push('<li><div class="tree-row" data-tree-scope="' + esc(s.path) + '">' +
        '<span class="toggle">▸</span><span class="tree-name">' + esc(s.name) +
        '</span><span class="count">' + s.count + '</span></div>');
      if (s.children.length) {
        html.push('<ul hidden>');
        for (const c of s.children) add(c);
        html.push('</ul>');
      }
      html.push('</li>');
    }
    html.push('<li><div class="tree-row expanded root" data-tree-scope="">' +
      '<span class="toggle">▸</span><span class="tree-name">' + esc(root.name) +
      '</span><span class="count">' + (laneNodes.get(countLane) || []).length + ' per device</span></div><ul>');
    for (const c of root.children) add(c);
    html.push('</ul></li>');
    $('tree').innerHTML = html.join('');
    $('tree').addEventListener('click', (e) => {
      const row = e.target.closest('.tree-row');
      if (!row || row.dataset.treeScope === '') return;
      const s = row.dataset.treeScope;
      setExpanded(s, !expanded.has(s));
      showScope(s);
    });
  }
  function syncTree() {
    for (const row of document.querySelectorAll('#tree .tree-row')) {
      const s = row.dataset.treeScope;
      if (s === '') continue;
      const open = expanded.has(s);
      row.classList.toggle('expanded', open);
      const list = row.nextElementSibling;
      if (list) list.hidden = !open;
    }
  }
  function setExpanded(scope, open) {
    if (open) {
      // Its enclosing scopes open too, so that it can be seen.
      for (let s = scopes.get(scope); s && s.path !== ''; s = s.parent) expanded.add(s.path);
    } else {
      expanded.delete(scope);
    }
    render();
  }

  // ---- details ------------------------------------------------------------------------
  let bufferIndex = null;  // 'node|result' -> [device, row] of the memory plan, when asked
  function bufferOf(i, r) {
    if (!bufferIndex) {
      bufferIndex = new Map();
      (D.memory || []).forEach((m, d) => {
        const b = m.buffers;
        for (let k = 0; k * 6 < b.length; k++) bufferIndex.set(b[k * 6] + '|' + b[k * 6 + 1], [d, k]);
      });
    }
    const at = bufferIndex.get(i + '|' + r);
    if (!at) return null;
    const b = D.memory[at[0]].buffers, k = at[1] * 6;
    return {device: at[0], first: b[k + 2], last: b[k + 3], offset: b[k + 4], bytes: b[k + 5]};
  }
  const row = (k, v, field) =>
    '<tr' + (field ? ' data-field="' + field + '"' : '') + '><td>' + k + '</td><td>' + v + '</td></tr>';

  function showScope(scope) {
    const s = scopes.get(scope);
    if (!s) return;
    $('details').innerHTML = '<h2>scope ' + esc(scope) + '</h2><table>' +
      row('nodes', s.count + ' per device') +
      row('scopes', s.children.length ? s.children.map((c) => esc(c.name)).join(', ') : 'none') +
      row('state', expanded.has(scope) ? 'expanded (click its frame\'s title to collapse)' : 'collapsed') +
      '</table>';
  }

  function showDetails(i) {
    const h = [];
    const stream = nodes.stream[i];
    const lanesText = lanesOf(i).map(laneName).join(', ');
    h.push('<h2 id="details-title">' + esc('%' + nodes.name[i]) + ' <span class="mono">' +
      esc(opName(i)) + '</span></h2>');
    h.push('<table>');
    h.push(row('op', esc(opName(i)), 'op'));
    h.push(row('phase', PHASES[nodes.phase[i]], 'phase'));
    h.push(row(isCollective(i) ? 'devices' : 'device', esc(lanesText), 'device'));
    h.push(row('stream', stream < 0 ? 'none (runs nowhere)' : STREAMS[stream], 'stream'));
    const algorithm = (D.algorithms || {})[i];
    if (algorithm) h.push(row('algorithm', esc(algorithm), 'algorithm'));
    h.push(row('scope', esc(D.scopes[nodes.scope[i]] || '(none)'), 'scope'));
    const loc = D.locations[nodes.location[i]];
    h.push(row('source', loc ? '<span class="mono">' + esc(loc) + '</span>' : '-', 'source'));
    h.push('</table>');
    h.push('<pre class="mono" data-field="ir">' + esc(irLine(i)) + '</pre>');
    const c = collective(i);
    if (c) {
      h.push('<h3>Collective</h3><table>');
      h.push(row('kind', esc(c.kind), 'kind'));
      if (c.bucket !== undefined) h.push(row('bucket', String(c.bucket), 'bucket'));
      h.push(row('bytes', bytes(c.bytes_per_device) + ' per device (' + c.tensors +
        (c.tensors === 1 ? ' tensor)' : ' tensors)'), 'bytes'));
      h.push(row('groups', String(c.groups), 'groups'));
      h.push('</table>');
      if (c.parameters) {
        h.push('<h3>Bucket parameters (' + c.parameters.length + ')</h3><ul class="bucket-params">');
        for (const p of c.parameters) h.push('<li class="mono">@' + esc(p) + '</li>');
        h.push('</ul>');
      }
    }
    const ops = nodes.operands[i];
    if (ops.length) {
      h.push('<h3>Operands</h3><ul>');
      for (let k = 0; k < ops.length; k += 2) {
        const p = ops[k], r = nodes.results[p][ops[k + 1]];
        h.push('<li>' + nodeLink(p, '%' + resultName(p, ops[k + 1])) + ' <span class="mono">' + esc(D.types[r[1]]) +
          '</span></li>');
      }
      h.push('</ul>');
    }
    const res = nodes.results[i];
    if (res.length) {
      h.push('<h3>Results</h3><ul class="results">');
      res.forEach((r, k) => {
        let text = '<span class="mono">%' + esc(resultName(i, k)) + ': ' + esc(D.types[r[1]]) + '</span>';
        if (D.layouts[r[2]] !== 'plain') text += ', layout ' + esc(D.layouts[r[2]]);
        if (r[4] >= 0 && devices.length) text += ', on ' + esc(devices[r[4]]);
        const b = bufferOf(i, k);
        if (b) {
          text += '<br>arena offset ' + b.offset + ', ' + bytes(b.bytes) + '; live from #' +
            b.first + ' to #' + (b.last >= N ? 'the end of the step' : b.last) +
            (b.last < N ? ' (' + nodeLink(b.last) + ')' : '');
        } else if (r[3] >= 0) {
          text += '<br>arena offset ' + r[3];
          // No buffer of its own at its operand's offset: a view plan-memory gave those bytes.
          const o = ops.length ? nodes.results[ops[0]][ops[1]] : null;
          if (k === 0 && o && o[3] === r[3] && o[4] === r[4])
            text += ', the bytes of ' + nodeLink(ops[0], '%' + resultName(ops[0], ops[1])) +
                ' (a view: no copy)';
        }
        h.push('<li data-field="result">' + text + '</li>');
      });
      h.push('</ul>');
    }
    const ws = D.workspaces[i];
    if (ws) h.push('<p>workspace: ' + bytes(ws[1]) + ' at arena offset ' + ws[0] + '</p>');
    const waits = D.waits[i];
    if (waits) {
      h.push('<h3>Waits</h3><ul class="waits">');
      for (const [p, at, from] of waits)
        h.push('<li>' + esc(at) + ' waits for ' + esc(from) + ' after ' + nodeLink(p) + '</li>');
      h.push('</ul>');
    }
    h.push('<h3>Cost</h3><table>');
    h.push(row('model', micros(nodes.estimate_us[i]) + ' (' + flops(nodes.flops[i]) + ', ' +
      bytes(nodes.bytes[i]) + ' written)', 'estimate'));
    if (T) {
      const list = spansOf.get(i) || [];
      h.push(row('measured', list.length ? micros(measured[i]) + ' median of ' + list.length +
        (list.length === 1 ? ' span' : ' spans') : 'not traced', 'measured'));
    }
    h.push('</table><p class="note">' + esc(D.cost_model) + '</p>');
    h.push('<p><a class="action" data-action="reveal">show in the graph</a></p>');
    $('details').innerHTML = h.join('');
  }
  $('details').addEventListener('click', (e) => {
    const a = e.target.closest('a');
    if (!a) return;
    if (a.dataset.node !== undefined) select(Number(a.dataset.node), {reveal: true});
    if (a.dataset.action === 'reveal' && selected >= 0) {
      showView('graph');
      select(selected, {reveal: true});
    }
  });

  function reveal(i) {
    let changed = false;
    if (alone[i]) return false;
    for (const s of prefixes[nodes.path[i]])
      if (!expanded.has(s)) {
        expanded.add(s);
        changed = true;
      }
    return changed;
  }
  function select(i, opts = {}) {
    selected = i;
    if (opts.reveal && reveal(i)) {
      render();
    } else {
      for (const g of document.querySelectorAll('#viewport .item.selected'))
        g.classList.remove('selected');
      for (const g of document.querySelectorAll('#viewport .item[data-node="' + i + '"]'))
        g.classList.add('selected');
    }
    if (opts.reveal && currentView === 'graph') centreOn(i);
    showDetails(i);
    timelineSelection();
    document.body.dataset.selected = nodes.name[i];
  }

  // ---- search -------------------------------------------------------------------------
  (function search() {
    const input = $('search'), list = $('search-results');
    let results = [];
    function find(q) {
      q = q.trim().toLowerCase().replace(/^%/, '');
      if (!q) return [];
      const out = [];
      for (const [path] of scopes)
        if (path && path.toLowerCase().includes(q)) out.push({scope: path});
      for (let i = 0; i < N && out.length < 200; i++)
        if (nodes.name[i].toLowerCase().includes(q) || opName(i) === q) out.push({node: i});
      return out.slice(0, 200);
    }
    function choose(r) {
      list.hidden = true;
      showView('graph');
      if (r.scope !== undefined) {
        const s = scopes.get(r.scope);
        if (s.parent.path) setExpanded(s.parent.path, true);
        showScope(r.scope);
        const boxes = document.querySelectorAll('#viewport [data-scope="' + CSS.escape(r.scope) + '"]');
        for (const g of boxes) g.classList.add('match');
        if (boxes.length) centreOnElement(boxes[0]);
      } else {
        select(r.node, {reveal: true});
      }
    }
    input.addEventListener('input', () => {
      results = find(input.value);
      list.innerHTML = results.map((r, k) => '<li data-k="' + k + '">' + (r.scope !== undefined
        ? '<span class="kind">scope</span>' + esc(r.scope)
        : '<span class="kind">' + esc(opName(r.node)) + '</span>%' + esc(nodes.name[r.node]) +
          ' <span class="kind">' + esc(lanesOf(r.node).map(laneName).join(',')) + '</span>') +
        '</li>').join('');
      list.hidden = !results.length;
    });
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && results.length) choose(results[0]);
      if (e.key === 'Escape') list.hidden = true;
    });
    list.addEventListener('click', (e) => {
      const li = e.target.closest('li');
      if (li) choose(results[Number(li.dataset.k)]);
    });
  })();

  // ---- views ----------------------------------------------------------------------------
  let currentView = 'graph';
  const drawn = {};
  function showView(name) {
    currentView = name;
    for (const t of document.querySelectorAll('.tab'))
      t.classList.toggle('active', t.dataset.view === name);
    for (const v of ['graph', 'memory', 'timeline', 'training'])
      $('view-' + v).hidden = v !== name;
    if (!drawn[name]) {
      drawn[name] = true;
      if (name === 'memory') drawMemory();
      if (name === 'timeline') drawTimeline();
      if (name === 'training') drawTraining();
    }
    if (name === 'timeline') paintTimeline();
    document.body.dataset.view = name;
  }
  $('tabs').addEventListener('click', (e) => {
    const t = e.target.closest('.tab');
    if (t && !t.disabled) showView(t.dataset.view);
  });
  $('colour').addEventListener('change', () => {
    colourMode = $('colour').value;
    render();
  });
  $('fit').addEventListener('click', () => {
    minFit = 0.03;  // asked for: all of it, however small
    fit();
  });
  $('params').addEventListener('change', () => {
    showParams = $('params').checked;
    render();
  });
  $('saved').addEventListener('change', () => {
    showSaved = $('saved').checked;
    render();
  });

  // ---- memory ---------------------------------------------------------------------------
  function drawMemory() {
    const v = $('view-memory');
    if (!D.memory) {
      v.innerHTML = '<div class="view-inner"><p class="note">This graph has no memory plan ' +
        '(plan-memory has not run over it).</p></div>';
      return;
    }
    const h = ['<div class="view-inner"><h2>Arena per device over the step</h2>',
      '<table class="summary"><tr><th>device</th><th>arena</th><th>live peak</th>' +
      '<th>no reuse</th><th>peak at</th></tr>'];
    D.memory.forEach((m, d) => {
      h.push('<tr><td><a class="action" data-device="' + d + '">' + esc(m.device) +
        '</a></td><td>' + bytes(m.arena) + '</td><td>' + bytes(m.live_peak) + '</td><td>' +
        bytes(m.unshared) + '</td><td>#' + m.peak_at + ' ' + nodeLink(m.peak_at) + '</td></tr>');
    });
    h.push('</table><p class="note">As <span class="mono">tandem dump --memory</span>: each ' +
      'buffer is a box from the node that writes it to its last use (x, the step\'s order) at ' +
      'its arena offset (y); the curve above is the bytes live at each position. Click a ' +
      'buffer to select its node.</p>');
    h.push('<div id="memory-device"></div></div>');
    v.innerHTML = h.join('');
    v.addEventListener('click', (e) => {
      const a = e.target.closest('a');
      if (!a) return;
      if (a.dataset.device !== undefined) memoryDevice(Number(a.dataset.device));
      if (a.dataset.node !== undefined) select(Number(a.dataset.node));
    });
    memoryDevice(0);
  }
  function memoryDevice(d) {
    const m = D.memory[d], b = m.buffers;
    const host = $('memory-device');
    const width = Math.max(600, ($('views').clientWidth || 1000) - 40);
    const h = ['<h2>' + esc(m.device) + '</h2><canvas id="memory-live" width="' + width +
      '" height="110"></canvas><canvas id="memory-arena" width="' + width + '" height="380">' +
      '</canvas><h3>What makes the peak: ' + bytes(m.peak_bytes) + ' live at #' + m.peak_at +
      ' (' + nodeLink(m.peak_at) + ')</h3><table class="summary" id="peak-buffers"><tr>' +
      '<th>buffer</th><th>bytes</th><th>written by</th><th>live</th></tr>'];
    for (const k of m.peak_buffers.slice(0, 20)) {
      const i = b[k * 6], r = b[k * 6 + 1];
      h.push('<tr><td class="mono">' + (r < 0 ? 'workspace' : '%' + esc(resultName(i, r))) +
        '</td><td>' + bytes(b[k * 6 + 5]) + '</td><td>' + nodeLink(i) + '</td><td>#' +
        b[k * 6 + 2] + ' to #' + b[k * 6 + 3] + '</td></tr>');
    }
    if (m.peak_buffers.length > 20)
      h.push('<tr><td colspan="4">... ' + (m.peak_buffers.length - 20) + ' more</td></tr>');
    h.push('</table>');
    host.innerHTML = h.join('');
    const steps = N + 1;
    // The curve of live bytes.
    const live = new Float64Array(steps + 1);
    for (let k = 0; k * 6 < b.length; k++) {
      live[b[k * 6 + 2]] += b[k * 6 + 5];
      live[b[k * 6 + 3] + 1] -= b[k * 6 + 5];
    }
    const lc = $('memory-live').getContext('2d');
    let acc = 0;
    const top = Math.max(m.peak_bytes, 1);
    lc.strokeStyle = '#1f4fc7';
    lc.beginPath();
    for (let p = 0; p < steps; p++) {
      acc += live[p];
      const x = p / steps * width, y = 105 - acc / top * 95;
      if (p === 0) lc.moveTo(x, y); else lc.lineTo(x, y);
    }
    lc.stroke();
    lc.fillStyle = '#d02090';
    lc.fillRect(m.peak_at / steps * width - 1, 0, 2, 110);
    lc.fillStyle = '#334';
    lc.fillText('live bytes, peak ' + bytes(m.peak_bytes), 6, 12);
    // The buffers at their offsets.
    const ac = $('memory-arena').getContext('2d');
    const arena = Math.max(m.arena, 1);
    const colours = ['#9db7f0', '#f0a0a0', '#86d886'];
    for (let k = 0; k * 6 < b.length; k++) {
      const i = b[k * 6], r = b[k * 6 + 1];
      const x0 = b[k * 6 + 2] / steps * width, x1 = (b[k * 6 + 3] + 1) / steps * width;
      const y1 = 380 - b[k * 6 + 4] / arena * 380, y0 = 380 - (b[k * 6 + 4] + b[k * 6 + 5]) / arena * 380;
      ac.fillStyle = r < 0 ? '#c8c8c8' : colours[nodes.phase[i]];
      ac.fillRect(x0, y0, Math.max(x1 - x0, 1), Math.max(y1 - y0, 1));
      ac.strokeStyle = '#0003';
      ac.strokeRect(x0, y0, Math.max(x1 - x0, 1), Math.max(y1 - y0, 1));
    }
    ac.fillStyle = '#d02090';
    ac.fillRect(m.peak_at / steps * width - 1, 0, 2, 380);
    $('memory-arena').addEventListener('click', (e) => {
      const r = e.target.getBoundingClientRect();
      const p = (e.clientX - r.left) / width * steps;
      const off = (380 - (e.clientY - r.top)) / 380 * arena;
      for (let k = 0; k * 6 < b.length; k++)
        if (b[k * 6 + 2] <= p && p < b[k * 6 + 3] + 1 && b[k * 6 + 4] <= off &&
            off < b[k * 6 + 4] + b[k * 6 + 5]) {
          select(b[k * 6]);
          return;
        }
    });
    document.body.dataset.memoryDevice = m.device;
  }

  // ---- timeline -------------------------------------------------------------------------
  const TL = {rows: [], t0: 0, t1: 1, width: 1000, rowH: 22, top: 26, left: 120};
  function drawTimeline() {
    const v = $('view-timeline');
    if (!T) {
      v.innerHTML = '<div class="view-inner"><p class="note">No trace: give <span class="mono">' +
        '--trace FILE.json</span>, written by <span class="mono">tandem train --trace</span>.</p></div>';
      return;
    }
    const s = T.spans;
    const rows = new Map();  // device*3+stream -> span indices
    let t0 = Infinity, t1 = -Infinity;
    for (let k = 0; k * 6 < s.length; k++) {
      const key = s[k * 6 + 1] * 3 + s[k * 6 + 2];
      if (!rows.has(key)) rows.set(key, []);
      rows.get(key).push(k);
      t0 = Math.min(t0, s[k * 6 + 4]);
      t1 = Math.max(t1, s[k * 6 + 4] + s[k * 6 + 5]);
    }
    TL.rows = [...rows.keys()].sort((a, b) => a - b).map((key) => ({key, spans: rows.get(key)}));
    TL.t0 = t0;
    TL.t1 = t1;
    TL.full = [t0, t1];
    TL.width = Math.max(700, ($('views').clientWidth || 1000) - 30);
    const h = ['<div class="view-inner"><h2>Measured streams per device (' + T.steps +
      (T.steps === 1 ? ' step' : ' steps') + ', ' + micros(T.span_us) + ')</h2>',
      '<table class="summary"><tr><th>device</th><th>compute busy</th><th>comm busy</th>' +
      '<th>exposed comm</th><th>per step</th></tr>'];
    T.per_device.forEach((p, d) => h.push('<tr><td>' + esc(devices[d]) + '</td><td>' +
      micros(p.compute_us / T.steps) + '</td><td>' + micros(p.comm_us / T.steps) +
      '</td><td data-field="exposed">' + micros(p.exposed_us / T.steps) + '</td><td>' +
      micros(T.span_us / T.steps) + ' wall</td></tr>'));
    h.push('</table><p class="note">Per step. Red under a comm row: communication no compute ' +
      'overlapped (exposed). Wheel to zoom, drag to pan, click a span to select its node.</p>');
    h.push('<canvas id="timeline" width="' + TL.width + '" height="' +
      (TL.top + TL.rows.length * TL.rowH + 10) + '"></canvas>');
    h.push('<h3 id="timeline-selection-title">Spans of the selected node</h3>' +
      '<ul id="timeline-selection"></ul></div>');
    v.innerHTML = h.join('');
    const c = $('timeline');
    let drag = null;
    c.addEventListener('wheel', (e) => {
      e.preventDefault();
      const r = c.getBoundingClientRect();
      const at = timeAt(e.clientX - r.left);
      const f = Math.exp(e.deltaY * 0.0015);
      TL.t0 = at - (at - TL.t0) * f;
      TL.t1 = at + (TL.t1 - at) * f;
      paintTimeline();
    }, {passive: false});
    c.addEventListener('mousedown', (e) => (drag = {x: e.clientX, t0: TL.t0, t1: TL.t1, moved: false}));
    window.addEventListener('mousemove', (e) => {
      if (!drag) return;
      const dt = (e.clientX - drag.x) / (TL.width - TL.left) * (drag.t1 - drag.t0);
      if (Math.abs(e.clientX - drag.x) > 3) drag.moved = true;
      TL.t0 = drag.t0 - dt;
      TL.t1 = drag.t1 - dt;
      paintTimeline();
    });
    window.addEventListener('mouseup', () => setTimeout(() => (drag = null), 0));
    c.addEventListener('click', (e) => {
      if (drag && drag.moved) return;
      const r = c.getBoundingClientRect();
      const k = spanAt(e.clientX - r.left, e.clientY - r.top);
      if (k >= 0) select(T.spans[k * 6]);
    });
    $('timeline-selection').addEventListener('click', (e) => {
      const a = e.target.closest('a');
      if (a && a.dataset.node !== undefined) select(Number(a.dataset.node), {reveal: true});
    });
    timelineSelection();
  }
  const timeAt = (x) => TL.t0 + (x - TL.left) / (TL.width - TL.left) * (TL.t1 - TL.t0);
  const xAt = (t) => TL.left + (t - TL.t0) / (TL.t1 - TL.t0) * (TL.width - TL.left);
  function spanAt(x, y) {
    const r = Math.floor((y - TL.top) / TL.rowH);
    if (r < 0 || r >= TL.rows.length || x < TL.left) return -1;
    const t = timeAt(x), s = T.spans;
    const slack = 2 / (TL.width - TL.left) * (TL.t1 - TL.t0);  // a span thinner than a pixel
    for (const k of TL.rows[r].spans)
      if (s[k * 6 + 4] - slack <= t && t <= s[k * 6 + 4] + s[k * 6 + 5] + slack) return k;
    return -1;
  }
  // Where span k is drawn, in the canvas's coordinates.
  function spanPoint(k) {
    const s = T.spans, key = s[k * 6 + 1] * 3 + s[k * 6 + 2];
    const r = TL.rows.findIndex((row) => row.key === key);
    return [xAt(s[k * 6 + 4] + s[k * 6 + 5] / 2), TL.top + r * TL.rowH + TL.rowH / 2];
  }
  function paintTimeline() {
    const c = $('timeline');
    if (!T || !c) return;
    const g = c.getContext('2d'), s = T.spans;
    g.clearRect(0, 0, c.width, c.height);
    g.font = '11px sans-serif';
    const colours = ['#9db7f0', '#f0a0a0', '#86d886'];
    const mine = new Set(spansOf.get(selected) || []);
    TL.rows.forEach((row, r) => {
      const y = TL.top + r * TL.rowH;
      const d = Math.floor(row.key / 3), stream = row.key % 3;
      g.fillStyle = r % 2 ? '#f6f7fa' : '#fff';
      g.fillRect(0, y, c.width, TL.rowH);
      g.fillStyle = '#334';
      g.fillText(devices[d] + ' ' + STREAMS[stream], 4, y + 15);
      for (const k of row.spans) {
        const a = s[k * 6 + 4], w = s[k * 6 + 5];
        if (a > TL.t1 || a + w < TL.t0) continue;
        const x0 = Math.max(xAt(a), TL.left), x1 = Math.min(xAt(a + w), TL.width);
        g.fillStyle = stream === 1 ? '#f5b26b' : stream === 2 ? '#c8c8c8' : colours[nodes.phase[s[k * 6]]];
        g.fillRect(x0, y + 3, Math.max(x1 - x0, 0.6), TL.rowH - 8);
      }
      if (stream === 1) {
        // Exposed communication: red over the comm slices' exposed parts and a bar beneath.
        const e = T.exposed;
        for (let k = 0; k * 3 < e.length; k++) {
          if (e[k * 3] !== d) continue;
          const x0 = Math.max(xAt(e[k * 3 + 1]), TL.left), x1 = Math.min(xAt(e[k * 3 + 2]), TL.width);
          if (x1 <= x0) continue;
          g.fillStyle = '#d6272855';
          g.fillRect(x0, y + 3, Math.max(x1 - x0, 0.6), TL.rowH - 8);
          g.fillStyle = '#d62728';
          g.fillRect(x0, y + TL.rowH - 4, Math.max(x1 - x0, 0.6), 3);
        }
      }
    });
    // The selected node's spans, outlined.
    g.strokeStyle = '#1f4fc7';
    g.lineWidth = 2;
    for (const k of mine) {
      const key = s[k * 6 + 1] * 3 + s[k * 6 + 2];
      const r = TL.rows.findIndex((row) => row.key === key);
      const x0 = xAt(s[k * 6 + 4]), x1 = xAt(s[k * 6 + 4] + s[k * 6 + 5]);
      g.strokeRect(Math.max(x0, TL.left) - 1, TL.top + r * TL.rowH + 1, Math.max(x1 - x0, 1) + 2, TL.rowH - 4);
    }
    g.lineWidth = 1;
    // The axis.
    g.fillStyle = '#334';
    for (let k = 0; k <= 5; k++) {
      const t = TL.t0 + (TL.t1 - TL.t0) * k / 5;
      g.fillText(micros(t - TL.full[0]), TL.left + (TL.width - TL.left) * k / 5 - (k === 5 ? 50 : 0), 14);
    }
  }
  function timelineSelection() {
    const list = $('timeline-selection');
    if (!T) return;
    const mine = spansOf.get(selected) || [];
    document.body.dataset.highlightedSpans = String(mine.length);
    if (!list) return;
    const s = T.spans;
    $('timeline-selection-title').innerHTML = 'Spans of ' + (selected >= 0 ? nodeLink(selected) : 'the selected node');
    list.innerHTML = mine.slice(0, 50).map((k) => '<li class="highlighted" data-span="' + k + '">' +
      esc(devices[s[k * 6 + 1]]) + '/' + STREAMS[s[k * 6 + 2]] + ' step ' + s[k * 6 + 3] + ': ' +
      micros(s[k * 6 + 5]) + ' at ' + micros(s[k * 6 + 4] - TL.full[0]) + '</li>').join('') +
      (mine.length ? '' : '<li>none: the node did not run in the traced steps</li>');
    if (mine.length && currentView === 'timeline') {
      // Bring the first one into view when it is outside.
      const a = s[mine[0] * 6 + 4];
      if (a < TL.t0 || a > TL.t1) {
        const w = TL.t1 - TL.t0;
        TL.t0 = a - w / 2;
        TL.t1 = a + w / 2;
      }
    }
    paintTimeline();
  }

  // ---- training -------------------------------------------------------------------------
  function drawTraining() {
    const v = $('view-training');
    const M = D.metrics;
    if (!M) {
      v.innerHTML = '<div class="view-inner"><p class="note">No learning curves: give ' +
        '<span class="mono">--metrics FILE.csv</span>, written by <span class="mono">tandem ' +
        'train --metrics</span>.</p></div>';
      return;
    }
    function chart(title, series, id) {
      const W = 520, H = 260, L = 50, B = 30;
      let lo = Infinity, hi = -Infinity;
      for (const s of series) for (const y of s.values) {
        lo = Math.min(lo, y);
        hi = Math.max(hi, y);
      }
      if (hi === lo) hi = lo + 1;
      const e0 = M[0][0], e1 = Math.max(M[M.length - 1][0], e0 + 1);
      const X = (e) => L + (e - e0) / (e1 - e0) * (W - L - 10);
      const Y = (y) => H - B - (y - lo) / (hi - lo) * (H - B - 20);
      const out = ['<svg class="chart" id="' + id + '" width="' + W + '" height="' + H + '">',
        '<text x="' + L + '" y="14">' + esc(title) + '</text>',
        '<line class="axis" x1="' + L + '" y1="' + (H - B) + '" x2="' + (W - 10) + '" y2="' + (H - B) + '"/>',
        '<line class="axis" x1="' + L + '" y1="20" x2="' + L + '" y2="' + (H - B) + '"/>',
        '<text x="' + (W / 2) + '" y="' + (H - 4) + '">epoch</text>',
        ...M.filter((m, j) => j % Math.ceil(M.length / 10) === 0)
          .map((m) => '<text x="' + (X(m[0]) - 3) + '" y="' + (H - B + 13) + '">' + m[0] + '</text>'),
        '<text x="4" y="' + (Y(hi) + 4) + '">' + hi.toPrecision(3) + '</text>',
        '<text x="4" y="' + (Y(lo) + 4) + '">' + lo.toPrecision(3) + '</text>'];
      series.forEach((s, k) => {
        const pts = M.map((m, j) => X(m[0]) + ',' + Y(s.values[j])).join(' ');
        out.push('<polyline fill="none" stroke="' + s.colour + '" stroke-width="2" points="' + pts + '"/>');
        M.forEach((m, j) => out.push('<circle r="3" fill="' + s.colour + '" cx="' + X(m[0]) +
          '" cy="' + Y(s.values[j]) + '"><title>epoch ' + m[0] + ': ' + s.values[j] + '</title></circle>'));
        out.push('<text x="' + (W - 160) + '" y="' + (32 + 14 * k) + '" style="fill:' + s.colour +
          '">' + esc(s.name) + '</text>');
      });
      out.push('</svg>');
      return out.join('');
    }
    v.innerHTML = '<div class="view-inner"><h2>Learning curves (' + M.length + ' epochs)</h2>' +
      chart('loss', [{name: 'train loss', colour: '#1f77b4', values: M.map((m) => m[1])}], 'chart-loss') +
      chart('accuracy', [{name: 'train accuracy', colour: '#ff7f0e', values: M.map((m) => m[2])},
        {name: 'test accuracy', colour: '#2ca02c', values: M.map((m) => m[3])}], 'chart-accuracy') +
      '</div>';
  }

  // ---- start ----------------------------------------------------------------------------
  $('title').textContent = D.module + ' @' + D.graph + ' · ' +
    (devices.length ? devices.length + (devices.length === 1 ? ' device' : ' devices') : 'not replicated');
  $('source').textContent = D.source;
  if (!T) {
    $('colour').querySelector('option[value="time"]').disabled = true;
  }
  const setupDone = performance.now();
  buildTree();
  render();
  fit();
  document.body.dataset.setupMs = (setupDone - scriptStart).toFixed(1);
  document.body.dataset.firstRenderMs = performance.now().toFixed(1);
  // When the first frame with the graph is on screen (docs/PERF.md's figure): the frame
  // after this script, then a task after it.
  requestAnimationFrame(() => setTimeout(() => {
    document.body.dataset.graphPaintedMs = performance.now().toFixed(1);
  }, 0));
  for (const e of performance.getEntriesByType('paint'))
    document.body.dataset[e.name === 'first-contentful-paint' ? 'fcpMs' : 'fpMs'] = e.startTime.toFixed(1);
  if (window.PerformanceObserver)
    new PerformanceObserver((list) => {
      for (const e of list.getEntries())
        document.body.dataset[e.name === 'first-contentful-paint' ? 'fcpMs' : 'fpMs'] = e.startTime.toFixed(1);
    }).observe({type: 'paint', buffered: true});

  // Actions named after '#do=' (a;b;c) run as clicks on the page, as a person would make
  // them: the tests and the screenshots drive the page this way.
  function runActions(text) {
    for (const action of text.split(';')) {
      if (!action) continue;
      const colon = action.indexOf(':');
      const verb = colon < 0 ? action : action.slice(0, colon);
      const arg = colon < 0 ? '' : decodeURIComponent(action.slice(colon + 1));
      const click = (el) => {
        if (!el) throw new Error(action + ': nothing to click');
        el.dispatchEvent(new MouseEvent('click', {bubbles: true}));
      };
      if (verb === 'expand' || verb === 'collapse') {
        if ((verb === 'expand') !== expanded.has(arg))
          click(document.querySelector('#tree .tree-row[data-tree-scope="' + CSS.escape(arg) + '"]'));
      } else if (verb === 'view') {
        click(document.querySelector('.tab[data-view="' + CSS.escape(arg) + '"]'));
      } else if (verb === 'colour') {
        $('colour').value = arg;
        $('colour').dispatchEvent(new Event('change'));
      } else if (verb === 'search') {
        $('search').value = arg;
        $('search').dispatchEvent(new Event('input'));
        click(document.querySelector('#search-results li'));
      } else if (verb === 'select-op') {
        // The first node of that op (a bucket's collective first), found in the graph.
        let i = -1;
        for (let k = 0; k < N && i < 0; k++)
          if (opName(k) === arg && (!isCollective(k) || (collective(k).parameters || []).length))
            i = k;
        if (i < 0) throw new Error(action + ': no such node');
        if (reveal(i)) render();
        click(document.querySelector('#viewport .item[data-node="' + i + '"]'));
      } else if (verb === 'select') {
        // A node by name (its first result's, without the %), revealed and centred.
        const i = nodes.name.indexOf(arg.replace(/^%/, ''));
        if (i < 0) throw new Error(action + ': no such node');
        if (reveal(i)) render();
        click(document.querySelector('#viewport .item[data-node="' + i + '"]'));
        centreOn(i);
      } else if (verb === 'click-span') {
        const k = Number(arg);
        const [x, y] = spanPoint(k);
        const r = $('timeline').getBoundingClientRect();
        $('timeline').dispatchEvent(new MouseEvent('click', {bubbles: true,
          clientX: r.left + x, clientY: r.top + y}));
      } else if (verb === 'zoom-span') {
        const k = Number(arg), s = T.spans;
        const a = s[k * 6 + 4], w = Math.max(s[k * 6 + 5], 1);
        TL.t0 = a - 20 * w;
        TL.t1 = a + 20 * w;
        paintTimeline();
      } else if (verb === 'fit') {
        fit();
      } else if (verb === 'zoom') {
        view = {k: Number(arg) || 1, x: 10, y: 10};
        applyView();
      } else {
        throw new Error('unknown action ' + verb);
      }
    }
  }
  const hash = decodeURIComponent(location.hash.slice(1));
  if (hash.startsWith('do=')) {
    try {
      runActions(hash.slice(3));
      document.body.dataset.actions = 'done';
    } catch (e) {
      document.body.dataset.actions = 'failed: ' + e.message;
      log(String(e.stack || e));
    }
  }
  document.body.dataset.ready = '1';
})();
