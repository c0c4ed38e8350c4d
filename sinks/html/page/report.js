'use strict';
const pageErrors = [];
window.addEventListener('error', e => pageErrors.push(String(e.message)));
const data = JSON.parse(document.getElementById('loupe-data').textContent);
const diffMode = !!data.base;

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function fmt(v, unit) {
  const u = unit || '';
  const scale = u === 'ns' ? [[1e9, 's'], [1e6, 'ms'], [1e3, 'us'], [1, 'ns']]
    : u === 'bytes' ? [[1 << 30, 'GiB'], [1 << 20, 'MiB'], [1 << 10, 'KiB'], [1, 'B']]
    : null;
  if (scale) for (const [d, s] of scale) if (Math.abs(v) >= d || d === 1)
    return (v / d).toFixed(d === 1 ? 0 : 2).replace(/\.00$/, '') + ' ' + s;
  return String(v) + (u && u !== 'count' ? ' ' + u : '');
}
const pct = (part, whole) => whole ? (100 * part / whole).toFixed(2) : '0.00';
// A bucket of integers [lo, hi) as the same set with the upper side closed, the side log2
// buckets count (a power of two tops its bucket, as in Prometheus).
function range(lo, hi, unit) {
  const open = hi >= 18446744073709551615;
  return (lo === 0 ? '[' + fmt(0, unit) : '(' + fmt(lo - 1, unit)) + ', ' +
    (open ? '\u221e)' : fmt(hi - 1, unit) + ']');
}
function hue(name) {
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
  return name.endsWith(' [k]') ? 'hsl(' + (190 + h % 30) + ',55%,70%)'
    : 'hsl(' + (10 + h % 40) + ',80%,' + (60 + h % 15) + '%)';
}

// Stacks (root first) into a tree; a third column is the base run's weight.
function buildTree(stacks) {
  const root = {name: 'all', value: 0, base: 0, children: new Map(), parent: null};
  for (const [frames, v, b] of stacks) {
    root.value += v;
    root.base += b || 0;
    let node = root;
    for (const f of frames) {
      let c = node.children.get(f);
      if (!c) {
        c = {name: f, value: 0, base: 0, children: new Map(), parent: node};
        node.children.set(f, c);
      }
      c.value += v;
      c.base += b || 0;
      node = c;
    }
  }
  // Children sorted by name once, so the layout is stable and zoom/resize do not re-sort.
  const sort = n => {
    n.kids = [...n.children.values()].sort((a, b) => a.name < b.name ? -1 : 1);
    n.kids.forEach(sort);
  };
  sort(root);
  return root;
}

const tip = document.getElementById('tip');
const kRow = 18;
// Box chrome: 1 px border and 3 px padding a side, and 1 px of slack for the sub-pixel
// difference between canvas measurement and DOM text layout.
const kChrome = 9;
const kFont = '11px ui-monospace,"DejaVu Sans Mono",monospace';
const measureCtx = document.createElement('canvas').getContext('2d');
measureCtx.font = kFont;
const textWidth = s => measureCtx.measureText(s).width;
const kMinLabel = 2 * textWidth('M');  // narrower: no label at all, not a lone ellipsis

// The longest label that fits `px`: the name, a prefix of it with an ellipsis, or nothing.
function fitLabel(name, px) {
  const avail = px - kChrome;
  if (avail < kMinLabel) return '';
  if (textWidth(name) <= avail) return name;
  let lo = 0, hi = name.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (textWidth(name.slice(0, mid) + '\u2026') <= avail) lo = mid; else hi = mid - 1;
  }
  return lo ? name.slice(0, lo) + '\u2026' : '';
}

// Differential colour: the change of the frame's share of its run, red grew, blue shrank,
// deeper the larger the change (relative to the largest change in this graph). Shares,
// not raw values, so runs of different lengths compare.
function diffShare(g, n) {
  const now = g.root.value ? n.value / g.root.value : 0;
  const before = g.baseTotal ? n.base / g.baseTotal : 0;
  return now - before;
}

// An icicle flame graph (root on top) laid out in pixels of its container's width: labels
// fit their box or are cut with an ellipsis or left out. A click zooms into a box, a click
// on an ancestor zooms back out; the search highlights matching frames and gives their
// share; reset clears both; the layout is redone when the width changes.
class FlameGraph {
  constructor(container, profile) {
    this.profile = profile;
    this.root = buildTree(profile.stacks);
    this.baseTotal = profile.base_total || this.root.base;
    this.term = '';
    const ctl = el('div', {class: 'fg-ctl'});
    this.input = el('input', {type: 'search', class: 'fg-search', placeholder: 'search frames',
                              'aria-label': 'search frames'});
    this.resetButton = el('button', {type: 'button', class: 'fg-reset'}, 'reset');
    this.found = el('span', {class: 'fg-found'});
    ctl.append(this.input, this.resetButton, this.found);
    this.bar = el('div', {class: 'fg-bar'});
    this.box = el('div', {class: 'fg'});
    container.append(ctl, this.bar, this.box);
    this.input.addEventListener('input', () => this.search(this.input.value));
    this.resetButton.addEventListener('click', () => this.reset());
    this.box.addEventListener('click', e => {
      const b = e.target.closest('.fg-box');
      if (b) this.zoom(b.node);
    });
    this.box.addEventListener('mousemove', e => {
      const b = e.target.closest('.fg-box');
      if (!b) { tip.style.display = 'none'; return; }
      tip.textContent = this.describe(b.node);
      tip.style.display = 'block';
      tip.style.left = Math.max(0, Math.min(e.clientX + 12, window.innerWidth - 320)) + 'px';
      tip.style.top = (e.clientY + 14) + 'px';
    });
    this.box.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
    if (diffMode) {
      this.maxChange = 0;
      const visit = n => {
        n.kids.forEach(c => {
          this.maxChange = Math.max(this.maxChange, Math.abs(diffShare(this, c)));
          visit(c);
        });
      };
      visit(this.root);
    }
    this.zoom(this.root);
  }
  describe(n) {
    let s = n.name + ' \u2014 ' + fmt(n.value, this.profile.unit) + ' (' +
      pct(n.value, this.root.value) + '% of all';
    if (this.focus !== this.root && this.focus !== n && this.isUnder(n, this.focus))
      s += ', ' + pct(n.value, this.focus.value) + '% of the zoomed frame';
    s += ')';
    if (diffMode) {
      const d = 100 * diffShare(this, n);
      s += '; base ' + fmt(n.base, this.profile.unit) + ' (' + pct(n.base, this.baseTotal) +
        '%) \u2192 ' + pct(n.value, this.root.value) + '%, ' + (d >= 0 ? '+' : '') +
        d.toFixed(2) + ' pp';
    }
    return s;
  }
  isUnder(n, a) { for (let p = n; p; p = p.parent) if (p === a) return true; return false; }
  matches(n) {
    return this.term !== '' && n.parent !== null && n.name.toLowerCase().includes(this.term);
  }
  // The weight under matching frames, each stack counted once (a match below a match adds
  // nothing), as flamegraph.pl's search does.
  matched(n) {
    if (this.matches(n)) return n.value;
    let s = 0;
    for (const c of n.kids) s += this.matched(c);
    return s;
  }
  colour(n) {
    if (!n.parent) return '#ccc';
    if (!diffMode) return hue(n.name);
    const d = diffShare(this, n);
    const i = this.maxChange ? Math.min(1, Math.abs(d) / this.maxChange) : 0;
    const c = Math.round(235 - 215 * i);
    if (Math.abs(d) < 1e-12) return 'rgb(235,235,235)';
    return d > 0 ? 'rgb(255,' + c + ',' + c + ')' : 'rgb(' + c + ',' + c + ',255)';
  }
  zoom(focus) {
    this.focus = focus;
    this.layout();
  }
  search(term) {
    this.term = term.trim().toLowerCase();
    this.layout();
  }
  reset() {
    this.input.value = '';
    this.term = '';
    this.zoom(this.root);
  }
  layout() {
    const focus = this.focus;
    const W = this.box.clientWidth;
    this.width = W;
    this.box.textContent = '';
    const path = [];
    for (let p = focus.parent; p; p = p.parent) path.unshift(p);
    let maxDepth = 0;
    // Pixel edges are rounded once each, so neighbours share an edge and never overlap.
    const add = (n, left, right, depth, ancestor) => {
      const label = fitLabel(n.name, right - left);
      // Border and padding would widen a box narrower than them past its neighbour's edge.
      const cls = 'fg-box' + (ancestor ? ' fg-anc' : '') + (this.matches(n) ? ' fg-match' : '') +
        (label === '' && right - left < kChrome + kMinLabel ? ' fg-thin' : '') +
        (diffMode && n.parent
          ? (diffShare(this, n) > 0 ? ' fg-grew' : diffShare(this, n) < 0 ? ' fg-shrank' : '')
          : '');
      const b = el('div', {class: cls});
      b.node = n;
      b.style.left = left + 'px';
      b.style.width = (right - left) + 'px';
      b.style.top = (depth * kRow) + 'px';
      b.style.background = this.colour(n);
      // Dark text on the deepest reds and blues would not read.
      if (diffMode && n.parent && this.maxChange &&
        Math.abs(diffShare(this, n)) > 0.6 * this.maxChange)
        b.style.color = '#fff';
      b.textContent = label;
      this.box.appendChild(b);
      maxDepth = Math.max(maxDepth, depth);
    };
    path.forEach((n, i) => add(n, 0, W, i, true));
    const walk = (n, x0, x1, depth) => {
      const left = Math.round(x0), right = Math.round(x1);
      if (right - left < 1) return;  // under a pixel: neither it nor its children show
      add(n, left, right, depth, false);
      let cx = x0;
      for (const c of n.kids) {
        const cw = n.value ? (x1 - x0) * c.value / n.value : 0;
        walk(c, cx, cx + cw, depth + 1);
        cx += cw;
      }
    };
    walk(focus, 0, W, path.length);
    this.box.style.height = ((maxDepth + 1) * kRow + 2) + 'px';
    this.bar.textContent = (focus === this.root ? 'all' : 'zoomed: ' + this.describe(focus)) +
      ' \u2014 click a box to zoom, an ancestor to zoom out';
    if (this.term) {
      const all = this.matched(this.root);
      let s = 'matched: ' + pct(all, this.root.value) + '% of all';
      if (focus !== this.root)
        s += ', ' + pct(this.matched(focus), focus.value) + '% of the zoomed frame';
      this.found.textContent = s;
    } else {
      this.found.textContent = '';
    }
  }
  relayoutIfResized() { if (this.box.clientWidth !== this.width) this.layout(); }
}

function renderFindings() {
  const host = document.getElementById('findings');
  host.hidden = false;
  host.appendChild(el('h2', {}, 'Findings'));
  if (!data.findings.length) {
    host.appendChild(el('p', {class: 'muted'}, 'nothing stands out by the rules'));
    return;
  }
  const ul = el('ul');
  for (const f of data.findings) ul.appendChild(el('li', {}, f));
  host.appendChild(ul);
}

function histogramSection(h) {
  const sec = el('section', {class: 'histogram'});
  const labels = Object.entries(h.labels).map(([k, v]) => k + '=' + v).join(' ');
  sec.appendChild(el('h3', {}, h.name + (labels ? ' {' + labels + '}' : '')));
  const bars = el('div', {class: 'hist'}), xs = el('div', {class: 'hist-x'});
  const top = Math.max(1, ...h.buckets.map(b => b[2]));
  for (const [lo, hi, n] of h.buckets) {
    const bar = el('div', {title: range(lo, hi, h.unit) + ': ' + n});
    bar.style.height = Math.max(1, 100 * n / top) + '%';
    bars.appendChild(bar);
    xs.appendChild(el('span', {}, fmt(lo ? lo - 1 : 0, h.unit)));
  }
  sec.append(bars, xs);
  const t = el('table', {class: 'pct'});
  const head = el('tr');
  for (const c of ['count', 'min', 'mean', 'max', ...h.percentiles.map(p => 'p' + (100 * p.q))])
    head.appendChild(el('th', {}, c));
  const row = el('tr');
  row.appendChild(el('td', {}, String(h.count)));
  row.appendChild(el('td', {}, fmt(h.min, h.unit)));
  row.appendChild(el('td', {}, fmt(h.count ? Math.round(h.sum / h.count) : 0, h.unit)));
  row.appendChild(el('td', {}, fmt(h.max, h.unit)));
  for (const p of h.percentiles)
    row.appendChild(el('td', {title: 'true value in ' + range(p.lower, p.upper, h.unit)},
      fmt(p.value, h.unit)));
  t.append(head, row);
  sec.appendChild(t);
  return sec;
}

// The flat view first, as perf report and pprof -top open: the program's functions (its
// language's frames when it has them) by self and total share.
function functionsTable(rows) {
  const t = el('table', {class: 'functions'});
  const head = el('tr');
  for (const c of ['self', 'total', 'function']) head.appendChild(el('th', {class: c === 'function' ? 'l' : ''}, c));
  t.appendChild(head);
  const pct = v => (100 * v).toFixed(1) + '%';
  for (const [fn, self, total] of rows) {
    const r = el('tr');
    r.appendChild(el('td', {}, pct(self)));
    r.appendChild(el('td', {}, pct(total)));
    r.appendChild(el('td', {class: 'l'}, fn));
    t.appendChild(r);
  }
  return t;
}

// One section per profiler instance, in the order the profile lists them; producers the
// profile does not list (the host's own records) follow by name.
function renderProfilers() {
  const host = document.getElementById('profilers');
  const order = [...data.profilers];
  const seen = [...data.profiles, ...data.histograms].map(x => x.plugin);
  for (const p of [...new Set(seen)].sort()) if (!order.includes(p)) order.push(p);
  window.flameGraphs = [];
  if (diffMode)
    host.appendChild(el('div', {class: 'diff-note'}, 'Differential flame graphs against ' +
      data.base + ': widths are this run; red frames grew, blue ones shrank (change of their ' +
      'share of the run, deeper = larger).'));
  for (const plugin of order) {
    const profiles = data.profiles.filter(p => p.plugin === plugin);
    const hists = data.histograms.filter(h => h.plugin === plugin);
    if (!profiles.length && !hists.length) continue;
    const sec = el('section', {class: 'profiler', 'data-plugin': plugin});
    sec.appendChild(el('h2', {}, plugin || '(unnamed producer)'));
    host.appendChild(sec);
    for (const p of profiles) {
      const sub = el('section', {class: 'profile'});
      sub.appendChild(el('h3', {}, p.name + ' (' + p.value + ', ' + fmt(
        p.stacks.reduce((a, s) => a + s[1], 0), p.unit) + ' in ' + p.stacks.length + ' stacks' +
        (diffMode ? '; base ' + fmt(p.base_total || 0, p.unit) : '') + ')'));
      sec.appendChild(sub);
      if ((p.functions || []).length > 1) sub.appendChild(functionsTable(p.functions));
      window.flameGraphs.push(new FlameGraph(sub, p));
    }
    for (const h of hists) sec.appendChild(histogramSection(h));
  }
}
window.addEventListener('resize',
  () => (window.flameGraphs || []).forEach(g => g.relayoutIfResized()));

function renderHealth() {
  const host = document.getElementById('health');
  host.appendChild(el('h2', {}, 'Health'));
  const bad = data.health.filter(h => h.severity !== 'ok').length;
  const lost = data.health.filter(h => h.severity !== 'ok' && h.value > 0 &&
    h.effect !== 'degraded').length;
  host.appendChild(el('div', {class: 'health-summary'}, data.health.length + ' checks, ' + bad +
    (!bad ? ' problems' : lost ? ' with data lost or a failure: this report is incomplete'
                               : ' with data degraded (nothing lost): see the shares below')));
  if (!data.health.length) return;
  const t = el('table', {class: 'health'});
  const head = el('tr');
  for (const c of ['severity', 'check', 'component', 'value', 'message'])
    head.appendChild(el('th', {class: 'l'}, c));
  t.appendChild(head);
  for (const h of data.health) {
    const r = el('tr', {class: h.severity});
    // "3 of 196 stacks (1.5%), degraded" when the producer gives the whole.
    let value = String(h.value);
    if (h.whole) value += ' of ' + h.whole + (h.whole_unit ? ' ' + h.whole_unit : '') + ' (' +
      (100 * h.value / h.whole).toPrecision(2) + '%)';
    if (h.effect && h.value > 0) value += ', ' + h.effect;
    for (const c of [h.severity, h.check, h.component, value, h.message])
      r.appendChild(el('td', {class: 'l'}, c));
    t.appendChild(r);
  }
  host.appendChild(t);
}

// #selftest[&search=NAME]: the page checks its own behaviour at the window's width and
// writes the verdict into #selftest-result (and the title), for headless browser tests.
function selfTest(params) {
  const checks = [];
  const check = (name, ok, detail) => checks.push({name, ok: !!ok, detail: String(detail)});
  const graphs = window.flameGraphs || [];
  const boxes = g => [...g.box.querySelectorAll('.fg-box')];
  const live = g => boxes(g).filter(b => !b.classList.contains('fg-anc'));
  // Every label is its full name, a prefix with an ellipsis, or empty; its text fits the
  // box; boxes of one row never overlap and stay inside the graph.
  const labelsFit = (g, when) => {
    const bad = [];
    let full = 0, cut = 0, hidden = 0;
    const rows = new Map();
    for (const b of boxes(g)) {
      const label = b.textContent, name = b.node.name;
      if (label === '') hidden++;
      else if (label === name) full++;
      else if (label.endsWith('\u2026') && name.startsWith(label.slice(0, -1))) cut++;
      else bad.push('label "' + label + '" of "' + name + '"');
      if (b.scrollWidth > b.clientWidth)
        bad.push('"' + label + '" overflows: ' + b.scrollWidth + ' > ' + b.clientWidth);
      if (label !== '' && b.offsetWidth - kChrome < kMinLabel)
        bad.push('"' + label + '" in a box of ' + b.offsetWidth + ' px');
      const x = b.offsetLeft, w = b.offsetWidth;
      if (x < 0 || x + w > g.box.clientWidth) bad.push('"' + name + '" outside the graph');
      if (!rows.has(b.offsetTop)) rows.set(b.offsetTop, []);
      rows.get(b.offsetTop).push([x, w, name]);
    }
    for (const row of rows.values()) {
      row.sort((a, b) => a[0] - b[0]);
      for (let i = 1; i < row.length; i++)
        if (row[i][0] < row[i - 1][0] + row[i - 1][1])
          bad.push('"' + row[i][2] + '" overlaps "' + row[i - 1][2] + '"');
    }
    check('labels fit their boxes (' + when + ', graph ' + graphs.indexOf(g) + ')',
      bad.length === 0 && full > 0,
      'full ' + full + ', cut ' + cut + ', hidden ' + hidden +
        (bad.length ? '; ' + bad.slice(0, 5).join('; ') : ''));
    return {full, cut, hidden};
  };
  check('profiles rendered', graphs.length === data.profiles.length, graphs.length);
  const fit = {full: 0, cut: 0, hidden: 0};
  graphs.forEach((g, i) => {
    check('flame graph ' + i + ' has boxes', boxes(g).length > 1, boxes(g).length);
    const f = labelsFit(g, 'at ' + g.box.clientWidth + ' px');
    for (const k in fit) fit[k] += f[k];
  });

  // One section per producer, in the profile's order; the findings first of all.
  const secs = [...document.querySelectorAll('section.profiler')].map(s => s.dataset.plugin);
  const producers = new Set([...data.profiles, ...data.histograms].map(x => x.plugin));
  check('one section per profiler',
    secs.length === producers.size && secs.every(p => producers.has(p)), secs.join(','));
  const listed = secs.filter(p => data.profilers.includes(p));
  check('sections in profile order',
    listed.join() === data.profilers.filter(p => producers.has(p)).join() &&
      secs.slice(0, listed.length).join() === listed.join(),
    secs.join(','));
  const findings = document.getElementById('findings');
  const firstSection = document.querySelector('section');
  check('findings at the top', !data.findings.length || (firstSection === findings &&
    findings.querySelectorAll('li').length === data.findings.length &&
    [...document.querySelectorAll('section.profiler, #health')].every(s =>
      findings.compareDocumentPosition(s) & Node.DOCUMENT_POSITION_FOLLOWING)),
    data.findings.length + ' findings; first section: ' +
      (firstSection ? firstSection.id || firstSection.className : 'none'));

  // Zoom in a graph into its widest box that is narrower than the whole.
  const heaviest = n => [...n.kids].sort((a, b) => b.value - a.value)[0];
  const narrow = g => {
    const b = live(g).filter(x => x.node.parent && x.offsetWidth < g.box.clientWidth)
      .sort((x, y) => y.offsetWidth - x.offsetWidth)[0];
    return b ? b.node : null;
  };
  const g = graphs.find(narrow);
  check('a graph with branches to zoom into', !!g, graphs.length);
  if (g) {
    const target = narrow(g);
    const box = live(g).find(b => b.node === target);
    check('zoom target found', !!box, target ? target.name : 'none');
    if (box) {
      const before = box.offsetWidth;
      box.dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: 10, clientY: 10}));
      check('hover shows full name, value and share', tip.style.display === 'block' &&
        tip.textContent.startsWith(target.name + ' \u2014') &&
        tip.textContent.includes('% of all'), tip.textContent);
      box.dispatchEvent(new MouseEvent('click', {bubbles: true}));
      const after = live(g).find(b => b.node === target);
      check('click zooms', g.focus === target && after &&
        after.offsetWidth === g.box.clientWidth && before < g.box.clientWidth,
        'width ' + before + ' -> ' + (after ? after.offsetWidth : 'gone') + ' of ' +
          g.box.clientWidth + ' px');
      check('zoomed bar names the focus', g.bar.textContent.startsWith('zoomed: ' + target.name),
        g.bar.textContent);
      const anc = g.box.querySelector('.fg-anc');
      check('ancestors stay visible', !!anc && anc.node === g.root, anc ? anc.textContent : 'none');
      labelsFit(g, 'zoomed');
      g.resetButton.click();
    }
  }

  // Search: the frames whose name holds the term, and only they, are highlighted, and the
  // matched share is the weight under them; after a zoom the same search still works.
  const deepest = n => n.kids.length ? deepest(heaviest(n)) : n;
  const term = params.get('search') || (g ? deepest(g.root).name : '');
  const has = (n, t) => n.name.toLowerCase().includes(t) || n.kids.some(c => has(c, t));
  const sg = graphs.find(x => x.root.kids.some(c => has(c, term.toLowerCase())));
  check('search term is in the stacks', !!sg && term !== '', term);
  const result = {search: term};
  if (sg) {
    const type = t => { sg.input.value = t; sg.input.dispatchEvent(new Event('input')); };
    const highlighted = () => live(sg).filter(b => b.classList.contains('fg-match'));
    const expected = () => live(sg).filter(
      b => b.node.parent && b.node.name.toLowerCase().includes(term.toLowerCase()));
    const shareOf = () => {
      const m = /matched: ([0-9.]+)% of all/.exec(sg.found.textContent);
      return m ? parseFloat(m[1]) : -1;
    };
    type(term);
    const hl = highlighted();
    result.share = shareOf();
    check('search highlights the matching frames', hl.length > 0 &&
      hl.length === expected().length && hl.every(b => expected().includes(b)) &&
      getComputedStyle(hl[0]).backgroundColor === 'rgb(224, 64, 224)',
      hl.length + ' highlighted, ' + expected().length + ' match');
    check('search reports the matched share', result.share > 0 &&
      result.share.toFixed(2) === pct(sg.matched(sg.root), sg.root.value), sg.found.textContent);
    type('');
    // Zoom into the parent of the heaviest matching frame, then search again.
    const hits = [];
    const collect = n => {
      if (n.parent && n.name.toLowerCase().includes(term.toLowerCase())) hits.push(n);
      n.kids.forEach(collect);
    };
    collect(sg.root);
    const first = hits.sort((a, b) => b.value - a.value)[0];
    const target = first.parent.parent ? first.parent : first;
    const tbox = live(sg).find(b => b.node === target);
    if (tbox) tbox.dispatchEvent(new MouseEvent('click', {bubbles: true}));
    type(term);
    const zhl = highlighted();
    check('zoom then search still works', sg.focus === target && zhl.length > 0 &&
      zhl.length === expected().length && zhl.some(b => b.node === first) &&
      shareOf() === result.share && sg.found.textContent.includes('% of the zoomed frame'),
      'focus ' + sg.focus.name + ', ' + zhl.length + ' highlighted; ' + sg.found.textContent);
    sg.resetButton.click();
    check('reset clears zoom and search', sg.focus === sg.root && sg.input.value === '' &&
      highlighted().length === 0 && sg.found.textContent === '',
      sg.focus.name + ' ' + sg.found.textContent);
  }

  // A narrower window re-lays the graphs out to the new width, labels fitted again.
  if (graphs.length) {
    const rg = graphs[0], section = rg.box.parentElement, was = rg.box.clientWidth;
    section.style.width = '360px';
    window.dispatchEvent(new Event('resize'));
    const top = live(rg).find(b => b.node === rg.root);
    check('resize re-lays out',
      rg.box.clientWidth < was && top && top.offsetWidth === rg.box.clientWidth,
      was + ' -> ' + rg.box.clientWidth + ' px, root box ' + (top ? top.offsetWidth : 'none'));
    labelsFit(rg, 'resized to ' + rg.box.clientWidth + ' px');
    section.style.width = '';
    window.dispatchEvent(new Event('resize'));
  }

  // Differential graphs: every box that grew is red, every one that shrank blue.
  if (diffMode) {
    const grew = new Set(), shrank = new Set(), wrong = [];
    for (const dg of graphs) for (const b of live(dg)) {
      const m = /rgb\((\d+), (\d+), (\d+)\)/.exec(getComputedStyle(b).backgroundColor);
      const [r, , bl] = m ? [+m[1], +m[2], +m[3]] : [0, 0, 0];
      const d = diffShare(dg, b.node);
      if (!b.node.parent) continue;
      if (d > 0) {
        grew.add(b.node.name);
        if (!(r === 255 && bl < 255)) wrong.push(b.node.name + ' grew but ' + m);
      }
      if (d < 0) {
        shrank.add(b.node.name);
        if (!(bl === 255 && r < 255)) wrong.push(b.node.name + ' shrank but ' + m);
      }
    }
    result.grew = [...grew];
    result.shrank = [...shrank];
    check('differential colours: red grew, blue shrank',
      wrong.length === 0 && grew.size + shrank.size > 0,
      grew.size + ' grew, ' + shrank.size + ' shrank; ' + wrong.slice(0, 3).join('; '));
  }

  const histogramSections = document.querySelectorAll('section.histogram').length;
  check('histograms rendered', histogramSections === data.histograms.length, histogramSections);
  const healthRows = document.querySelectorAll('table.health tr').length;
  check('health rows rendered', healthRows === data.health.length + 1 || !data.health.length,
    healthRows);
  check('no page errors', pageErrors.length === 0, pageErrors.join('; '));
  const ok = checks.every(c => c.ok);
  const out = document.getElementById('selftest-result');
  out.textContent = JSON.stringify(
    {ok, width: window.innerWidth, labels: fit, checks, errors: pageErrors, ...result});
  out.hidden = false;
  document.title = 'selftest:' + (ok ? 'ok' : 'fail');
}

document.getElementById('title').textContent = data.title;
document.title = data.title;
if (data.window.end_ns) {
  const s = new Date(data.window.start_ns / 1e6);
  const d = (data.window.end_ns - data.window.start_ns) / 1e9;
  document.getElementById('window').textContent =
    'session ' + s.toISOString() + ', ' + d.toFixed(1) + ' s';
}
renderFindings();
renderProfilers();
renderHealth();
const hashParams = new URLSearchParams(location.hash.slice(1));
if (hashParams.has('selftest')) {
  try {
    selfTest(hashParams);
  } catch (e) {
    pageErrors.push('selftest: ' + e);
    const o = document.getElementById('selftest-result');
    o.textContent = JSON.stringify({ok: false, checks: [], errors: pageErrors});
    o.hidden = false;
  }
}
