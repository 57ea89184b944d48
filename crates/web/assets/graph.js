// A tiny renderer of Mermaid's `graph`/`flowchart` subset as SVG: nodes
// (`id`, `id[label]`, `id["label"]`, `id(label)`, `id{label}`), edges
// (`-->`, `---`, `-.->`, `==>`, with `|label|`), directions TD/TB/LR/BT/RL.
// Other statements (subgraph, style, classDef, click) are skipped. Layout:
// layers by longest path from the sources, ordered within a layer by the
// mean position of their parents. Enough for module graphs, not a Mermaid.
"use strict";
window.weirGraph = (function () {
  const NODE = /^([A-Za-z0-9_.:\/-]+)\s*(?:\[\s*"?(.*?)"?\s*\]|\(\s*"?(.*?)"?\s*\)|\{\s*"?(.*?)"?\s*\})?/;
  const EDGE = /^\s*(-->|---|-\.->|==>|--)\s*(?:\|([^|]*)\|)?\s*/;

  function parse(text) {
    const lines = text.split(/\r?\n|;/).map((l) => l.trim()).filter(Boolean);
    const head = lines.length ? lines[0].match(/^(graph|flowchart)\s*(TD|TB|LR|BT|RL)?\s*$/i) : null;
    if (!head) return null;
    const dir = (head[2] || "TD").toUpperCase();
    const nodes = new Map();
    const edges = [];
    const node = (m) => {
      const id = m[1];
      const label = m[2] ?? m[3] ?? m[4];
      if (!nodes.has(id)) nodes.set(id, { id, label: id });
      if (label !== undefined && label !== "") nodes.get(id).label = label;
      return id;
    };
    for (const line of lines.slice(1)) {
      if (/^(subgraph|end$|style |classDef |class |click |linkStyle |%%)/.test(line)) continue;
      let rest = line;
      let m = rest.match(NODE);
      if (!m) continue;
      let from = node(m);
      rest = rest.slice(m[0].length);
      for (;;) {
        const e = rest.match(EDGE);
        if (!e) break;
        rest = rest.slice(e[0].length);
        const n = rest.match(NODE);
        if (!n) break;
        const to = node(n);
        rest = rest.slice(n[0].length).trim();
        edges.push({ from, to, label: e[2] ? e[2].trim() : "" });
        from = to;
      }
    }
    return { dir, nodes: [...nodes.values()], edges };
  }

  function layout(g) {
    const parents = new Map(g.nodes.map((n) => [n.id, []]));
    for (const e of g.edges) if (e.from !== e.to) parents.get(e.to).push(e.from);
    // Longest path, cycle-safe: at most |nodes| rounds of relaxation.
    const level = new Map(g.nodes.map((n) => [n.id, 0]));
    for (let round = 0; round < g.nodes.length; round++) {
      let changed = false;
      for (const e of g.edges) {
        if (e.from === e.to) continue;
        const want = level.get(e.from) + 1;
        if (want > level.get(e.to) && want < g.nodes.length) { level.set(e.to, want); changed = true; }
      }
      if (!changed) break;
    }
    const layers = [];
    for (const n of g.nodes) (layers[level.get(n.id)] ||= []).push(n);
    const pos = new Map();
    layers.forEach((layer, i) => {
      if (i > 0) {
        const mean = (n) => {
          const ps = parents.get(n.id).filter((p) => pos.has(p));
          return ps.length ? ps.reduce((s, p) => s + pos.get(p), 0) / ps.length : 1e9;
        };
        layer.sort((a, b) => mean(a) - mean(b));
      }
      layer.forEach((n, j) => pos.set(n.id, j));
    });
    return layers.filter(Boolean);
  }

  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  }

  function render(text) {
    const g = parse(text);
    if (!g || !g.nodes.length) return null;
    const layers = layout(g);
    const horizontal = g.dir === "LR" || g.dir === "RL";
    const H = 30, GAP_MAIN = 60, GAP_CROSS = 18;
    const width = (n) => Math.min(260, 16 + 7 * String(n.label).length);
    const box = new Map();
    let extentMain = 0, extentCross = 0;
    let main = 10;
    for (const layer of layers) {
      let cross = 10;
      const thick = horizontal ? Math.max(...layer.map(width)) : H;
      for (const n of layer) {
        const w = width(n);
        const b = horizontal
          ? { x: main, y: cross, w, h: H }
          : { x: cross, y: main, w, h: H };
        box.set(n.id, b);
        cross += (horizontal ? H : w) + GAP_CROSS;
      }
      extentCross = Math.max(extentCross, cross);
      main += thick + GAP_MAIN;
      extentMain = main;
    }
    const W = horizontal ? extentMain : extentCross;
    const Hh = horizontal ? extentCross : extentMain;
    const flip = g.dir === "BT" || g.dir === "RL";
    const at = (b) => (flip ? (horizontal ? { ...b, x: W - b.x - b.w } : { ...b, y: Hh - b.y - b.h }) : b);
    const out = [`<svg class="graph" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${Hh}" width="${W}" height="${Hh}">`,
      '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#8893a8"/></marker></defs>'];
    for (const e of g.edges) {
      const a = at(box.get(e.from)), b = at(box.get(e.to));
      let x1, y1, x2, y2;
      if (horizontal) {
        const fwd = a.x < b.x;
        x1 = fwd ? a.x + a.w : a.x; y1 = a.y + a.h / 2; x2 = fwd ? b.x : b.x + b.w; y2 = b.y + b.h / 2;
      } else {
        const fwd = a.y < b.y;
        x1 = a.x + a.w / 2; y1 = fwd ? a.y + a.h : a.y; x2 = b.x + b.w / 2; y2 = fwd ? b.y : b.y + b.h;
      }
      out.push(`<line x1="${x1}" y1="${y1}" x2="${x2}" y2="${y2}" marker-end="url(#arrow)"/>`);
      if (e.label) out.push(`<text class="elabel" x="${(x1 + x2) / 2 + 3}" y="${(y1 + y2) / 2 - 3}">${esc(e.label)}</text>`);
    }
    for (const n of g.nodes) {
      const b = at(box.get(n.id));
      out.push(`<g><rect x="${b.x}" y="${b.y}" width="${b.w}" height="${b.h}" rx="5"/>` +
        `<text x="${b.x + 8}" y="${b.y + 19}">${esc(n.label).slice(0, 40)}</text><title>${esc(n.label)}</title></g>`);
    }
    out.push("</svg>");
    return out.join("");
  }

  return { parse, render };
})();
