// SPDX-License-Identifier: Apache-2.0
#include "report_page.hpp"

namespace loupe::sinks {
namespace {

constexpr const char* kHead = R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>loupe report</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0 24px 48px;color:#222;background:#fff}
h1{font-size:22px;margin:16px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 6px}.muted{color:#777}
.fg{position:relative;overflow:hidden;border:1px solid #ddd;background:#fafafa;margin:4px 0}
.fg-box{position:absolute;height:17px;box-sizing:border-box;border:1px solid #fff;overflow:hidden;
white-space:nowrap;font:11px/15px monospace;padding:0 3px;cursor:pointer;color:#222}
.fg-box:hover{border-color:#000}.fg-anc{opacity:.55}
.fg-bar{font:12px monospace;margin:4px 0;min-height:18px}
.tip{position:fixed;pointer-events:none;background:#333;color:#fff;padding:4px 8px;border-radius:4px;
font:12px monospace;display:none;z-index:10;max-width:600px}
.hist{display:flex;align-items:flex-end;gap:2px;height:120px;border-bottom:1px solid #999;margin:6px 0}
.hist div{background:#4a7bd0;min-width:14px;flex:1}
.hist-x{display:flex;gap:2px;font:10px monospace;color:#555}.hist-x span{flex:1;min-width:14px;overflow:hidden}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:2px 8px;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}
#selftest-result{white-space:pre-wrap;word-break:break-all;font-size:11px}
tr.warn td{background:#fff4d6}tr.error td{background:#fde0e0}
</style></head><body>
<h1 id="title">loupe report</h1><div class="muted" id="window"></div>
<div id="profiles"></div><div id="histograms"></div><div id="health"></div>
<div class="tip" id="tip"></div>
<pre id="selftest-result" hidden></pre>
<script id="loupe-data" type="application/json">)HTML";

constexpr const char* kTail = R"HTML(</script>
<script>
'use strict';
const pageErrors = [];
window.addEventListener('error', e => pageErrors.push(String(e.message)));
const data = JSON.parse(document.getElementById('loupe-data').textContent);

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function fmt(v, unit) {
  const u = unit || '';
  const scale = u === 'ns' ? [[1e9, 's'], [1e6, 'ms'], [1e3, 'us'], [1, 'ns']]
              : u === 'bytes' ? [[1 << 30, 'GiB'], [1 << 20, 'MiB'], [1 << 10, 'KiB'], [1, 'B']] : null;
  if (scale) for (const [d, s] of scale) if (Math.abs(v) >= d || d === 1)
    return (v / d).toFixed(d === 1 ? 0 : 2).replace(/\.00$/, '') + ' ' + s;
  return String(v) + (u && u !== 'count' ? ' ' + u : '');
}
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

// Stacks (root first) into a tree; children sorted by name so the layout is stable.
function buildTree(stacks) {
  const root = {name: 'all', value: 0, children: new Map(), parent: null};
  for (const [frames, v] of stacks) {
    root.value += v;
    let node = root;
    for (const f of frames) {
      let c = node.children.get(f);
      if (!c) { c = {name: f, value: 0, children: new Map(), parent: node}; node.children.set(f, c); }
      c.value += v;
      node = c;
    }
  }
  return root;
}

const tip = document.getElementById('tip');
const kRow = 18;

// An icicle flame graph (root on top): a click zooms into a box, a click on an ancestor
// (or on "all") zooms back out; hovering shows name, value and share of the whole.
class FlameGraph {
  constructor(container, profile) {
    this.profile = profile;
    this.root = buildTree(profile.stacks);
    this.bar = el('div', {class: 'fg-bar'});
    this.box = el('div', {class: 'fg'});
    container.append(this.bar, this.box);
    this.box.addEventListener('click', e => {
      const b = e.target.closest('.fg-box');
      if (b) this.zoom(b.node);
    });
    this.box.addEventListener('mousemove', e => {
      const b = e.target.closest('.fg-box');
      if (!b) { tip.style.display = 'none'; return; }
      tip.textContent = this.describe(b.node);
      tip.style.display = 'block';
      tip.style.left = Math.min(e.clientX + 12, window.innerWidth - 320) + 'px';
      tip.style.top = (e.clientY + 14) + 'px';
    });
    this.box.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
    this.zoom(this.root);
  }
  describe(n) {
    const share = this.root.value ? (100 * n.value / this.root.value).toFixed(2) : '0';
    return n.name + ' \u2014 ' + fmt(n.value, this.profile.unit) + ' (' + share + '% of all)';
  }
  depth(n) { let d = 0; for (let p = n.parent; p; p = p.parent) d++; return d; }
  zoom(focus) {
    this.focus = focus;
    this.box.textContent = '';
    const path = [];
    for (let p = focus.parent; p; p = p.parent) path.unshift(p);
    let maxDepth = 0;
    const add = (n, x, w, depth, ancestor) => {
      const b = el('div', {class: 'fg-box' + (ancestor ? ' fg-anc' : '')});
      b.node = n;
      b.style.left = (x * 100) + '%';
      b.style.width = (w * 100) + '%';
      b.style.top = (depth * kRow) + 'px';
      b.style.background = n.parent ? hue(n.name) : '#ccc';
      b.textContent = n.name;
      b.title = '';
      this.box.appendChild(b);
      maxDepth = Math.max(maxDepth, depth);
    };
    path.forEach((n, i) => add(n, 0, 1, i, true));
    const walk = (n, x, w, depth) => {
      add(n, x, w, depth, false);
      let cx = x;
      for (const c of [...n.children.values()].sort((a, b) => a.name < b.name ? -1 : 1)) {
        const cw = focus.value ? w * c.value / n.value : 0;
        if (cw * this.box.clientWidth >= 0.5 || cw >= 0.001) walk(c, cx, cw, depth + 1);
        cx += cw;
      }
    };
    walk(focus, 0, 1, path.length);
    this.box.style.height = ((maxDepth + 1) * kRow + 2) + 'px';
    this.bar.textContent = (focus === this.root ? 'all' : 'zoomed: ' + this.describe(focus)) +
      ' \u2014 click a box to zoom, an ancestor to zoom out';
  }
}

function renderProfiles() {
  const host = document.getElementById('profiles');
  if (!data.profiles.length) return;
  host.appendChild(el('h2', {}, 'Flame graphs'));
  window.flameGraphs = [];
  for (const p of data.profiles) {
    const sec = el('section', {class: 'profile'});
    sec.appendChild(el('h3', {}, p.name + ' (' + p.value + ', ' + fmt(
      p.stacks.reduce((a, s) => a + s[1], 0), p.unit) + ' in ' + p.stacks.length + ' stacks)'));
    host.appendChild(sec);
    window.flameGraphs.push(new FlameGraph(sec, p));
  }
}

function renderHistograms() {
  const host = document.getElementById('histograms');
  if (!data.histograms.length) return;
  host.appendChild(el('h2', {}, 'Histograms'));
  for (const h of data.histograms) {
    const sec = el('section', {class: 'histogram'});
    const labels = Object.entries(h.labels).map(([k, v]) => k + '=' + v).join(' ');
    sec.appendChild(el('h3', {}, h.name + (labels ? ' {' + labels + '}' : '') + ' \u2014 ' + h.plugin));
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
    host.appendChild(sec);
  }
}

function renderHealth() {
  const host = document.getElementById('health');
  host.appendChild(el('h2', {}, 'Health'));
  const bad = data.health.filter(h => h.severity !== 'ok').length;
  host.appendChild(el('div', {class: 'health-summary'}, data.health.length + ' checks, ' + bad +
    (bad ? ' with data lost or a failure: this report is incomplete' : ' problems')));
  if (!data.health.length) return;
  const t = el('table', {class: 'health'});
  const head = el('tr');
  for (const c of ['severity', 'check', 'component', 'value', 'message'])
    head.appendChild(el('th', {class: 'l'}, c));
  t.appendChild(head);
  for (const h of data.health) {
    const r = el('tr', {class: h.severity});
    for (const c of [h.severity, h.check, h.component, String(h.value), h.message])
      r.appendChild(el('td', {class: 'l'}, c));
    t.appendChild(r);
  }
  host.appendChild(t);
}

function selfTest() {
  const checks = [];
  const check = (name, ok, detail) => checks.push({name, ok: !!ok, detail: String(detail)});
  const graphs = window.flameGraphs || [];
  check('profiles rendered', graphs.length === data.profiles.length, graphs.length);
  graphs.forEach((g, i) => check('flame graph ' + i + ' has boxes',
    g.box.querySelectorAll('.fg-box').length > 1, g.box.querySelectorAll('.fg-box').length));
  // Zoom in the first graph with a box narrower than the whole: follow the heaviest
  // child down until the value drops below the root's.
  const heaviest = n => [...n.children.values()].sort((a, b) => b.value - a.value)[0];
  const narrow = g => {
    let t = g.root;
    while (t.children.size && t.value === g.root.value) t = heaviest(t);
    return t.value < g.root.value ? t : null;
  };
  const g = graphs.find(narrow);
  check('a graph with branches to zoom into', !!g, graphs.length);
  if (g) {
    const target = narrow(g);
    const box = [...g.box.querySelectorAll('.fg-box')].find(b => b.node === target);
    check('zoom target found', !!box, target ? target.name : 'none');
    if (box) {
      const before = parseFloat(box.style.width);
      box.dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: 10, clientY: 10}));
      check('hover shows name, value and share', tip.style.display === 'block' &&
        tip.textContent.startsWith(target.name + ' \u2014') && tip.textContent.includes('% of all'), tip.textContent);
      box.dispatchEvent(new MouseEvent('click', {bubbles: true}));
      const after = [...g.box.querySelectorAll('.fg-box')].find(b => b.node === target && !b.classList.contains('fg-anc'));
      check('click zooms', g.focus === target && after && parseFloat(after.style.width) === 100 && before < 100,
        'width ' + before + '% -> ' + (after ? after.style.width : 'gone'));
      check('zoomed bar names the focus', g.bar.textContent.startsWith('zoomed: ' + target.name), g.bar.textContent);
      const anc = g.box.querySelector('.fg-anc');
      check('ancestors stay visible', !!anc && anc.node === g.root, anc ? anc.textContent : 'none');
    }
  }
  check('histograms rendered', document.querySelectorAll('section.histogram').length === data.histograms.length,
    document.querySelectorAll('section.histogram').length);
  check('health rows rendered', document.querySelectorAll('table.health tr').length === data.health.length + 1 || !data.health.length,
    document.querySelectorAll('table.health tr').length);
  check('no page errors', pageErrors.length === 0, pageErrors.join('; '));
  const ok = checks.every(c => c.ok);
  const out = document.getElementById('selftest-result');
  out.textContent = JSON.stringify({ok, checks, errors: pageErrors});
  out.hidden = false;
  document.title = 'selftest:' + (ok ? 'ok' : 'fail');
}

document.getElementById('title').textContent = data.title;
document.title = data.title;
if (data.window.end_ns) {
  const s = new Date(data.window.start_ns / 1e6), d = (data.window.end_ns - data.window.start_ns) / 1e9;
  document.getElementById('window').textContent = 'session ' + s.toISOString() + ', ' + d.toFixed(1) + ' s';
}
renderProfiles();
renderHistograms();
renderHealth();
if (location.hash === '#selftest') selfTest();
</script></body></html>
)HTML";

}  // namespace

std::string render_report_page(const nlohmann::json& data) {
  // Inside <script>, "</" could close the element early: JSON allows "<\/" instead.
  std::string json = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string safe;
  safe.reserve(json.size());
  for (std::size_t i = 0; i < json.size(); ++i) {
    if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') {
      safe += "<\\/";
      ++i;
    } else {
      safe += json[i];
    }
  }
  return std::string(kHead) + safe + kTail;
}

}  // namespace loupe::sinks
