// tpscope report: lays out the embedded data (timelines on Canvas, bars as
// SVG, sortable tables). It derives no number: every value and label comes
// from the data; it only maps times to pixels and formats axis ticks.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("tpscope-data").textContent);
  var app = document.getElementById("app");
  var api = { ready: false, renderMs: 0, timelines: [], scatters: [] };
  window.tpscopeReport = api;

  var KIND_COLORS = {
    gemm: "#4e79a7", moe_gemm: "#f28e2b", attention: "#e15759", norm: "#76b7b2",
    elementwise: "#59a14f", router: "#edc948", embedding: "#9c755f", collective: "#b07aa1"
  };
  var SPARE_COLORS = ["#bab0ac", "#ff9da7", "#86bcb6", "#d37295", "#a0cbe8", "#8cd17d"];
  var SERIES_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1"];
  var SVGNS = "http://www.w3.org/2000/svg";

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function svg(tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  // fmtNum writes a value with about four significant digits.
  function fmtNum(v) {
    var a = Math.abs(v);
    if (a >= 1000) return v.toFixed(0);
    if (a >= 10) return v.toFixed(1);
    if (a >= 1) return v.toFixed(2);
    return a === 0 ? "0" : v.toFixed(3);
  }
  // fmtTick writes an axis value with the decimals its step needs.
  function fmtTick(v, step) { return v.toFixed(Math.max(0, -Math.floor(Math.log10(step) + 1e-9))); }
  function fmtUs(v) { return fmtNum(v) + " us"; }
  // list is an array of the data as encoded: Go writes an empty list as
  // null (a scatter series with no point, a table with no row).
  function list(a) { return a || []; }
  // niceStep is the smallest of 1, 2, 5 x 10^n that is >= raw.
  function niceStep(raw) {
    var p = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = raw / p;
    return p * (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10);
  }
  function tickLabel(t, step) {
    if (step >= 1000) return (t / 1000).toFixed(Math.max(0, -Math.floor(Math.log10(step / 1000)))) + " ms";
    return t.toFixed(Math.max(0, -Math.floor(Math.log10(step)))) + " us";
  }

  // ---- timeline -------------------------------------------------------
  function Timeline(tl, index) {
    var LANE_H = 20, LANE_GAP = 3, GROUP_GAP = 10, AXIS_H = 24, GUTTER = 200, PAD_R = 14, PAD_B = 8;
    var dpr = window.devicePixelRatio || 1;
    var ops = list(tl.ops), lanes = list(tl.lanes), kinds = list(tl.kinds);
    var colorOf = {}, spare = 0;
    kinds.forEach(function (k) { colorOf[k] = KIND_COLORS[k] || SPARE_COLORS[spare++ % SPARE_COLORS.length]; });
    var opColor = ops.map(function (o) {
      if (!colorOf[o.kind]) colorOf[o.kind] = KIND_COLORS[o.kind] || SPARE_COLORS[spare++ % SPARE_COLORS.length];
      return colorOf[o.kind];
    });

    // Columnar copies of the boxes and each lane's place.
    var L = lanes.map(function (lane) {
      var boxes = list(lane.boxes), n = boxes.length;
      var l = { label: lane.label, measured: lane.measured, rank: lane.rank, n: n,
        op: new Int32Array(n), start: new Float64Array(n), dur: new Float64Array(n), crit: new Uint8Array(n),
        link: new Int32Array(n).fill(-1), maxDur: 0, y: 0 };
      for (var i = 0; i < n; i++) {
        var b = boxes[i];
        l.op[i] = b[0]; l.start[i] = b[1]; l.dur[i] = b[2]; l.crit[i] = b.length > 3 && b[3] ? 1 : 0;
        if (b[2] > l.maxDur) l.maxDur = b[2];
      }
      return l;
    });
    var y = AXIS_H + 4;
    L.forEach(function (l, i) {
      if (i > 0) y += (l.rank !== L[i - 1].rank) ? GROUP_GAP : LANE_GAP;
      l.y = y;
      y += LANE_H;
    });
    var H = y + PAD_B;
    var links = list(tl.links);
    links.forEach(function (k, ki) { list(k.boxes).forEach(function (r) { L[r.lane].link[r.box] = ki; }); });
    var fullEnd = tl.end_us > 0 ? tl.end_us * 1.01 : 1;
    var view = { t0: 0, t1: fullEnd };
    var drawn = new Array(L.length).fill(0);
    var hover = null; // {lane, box}

    var wrap = el("div", "tl");
    var bar = el("div", "tl-bar");
    kinds.forEach(function (k) {
      var s = el("span", "sw"); var i = el("i"); i.style.background = colorOf[k]; s.append(i, document.createTextNode(k)); bar.append(s);
    });
    var c = el("span", "sw"); c.append(el("i", "crit"), document.createTextNode("critical path")); bar.append(c);
    if (links.length) { var lk = el("span", "sw"); lk.append(el("i", "link"), document.createTextNode("collective across its group")); bar.append(lk); }
    var reset = el("button", null, "Reset zoom");
    bar.append(reset, el("span", "hint", "wheel: zoom, drag: pan, double-click: reset, hover: op"));
    var holder = el("div", "tl-canvas");
    var canvas = el("canvas");
    canvas.setAttribute("data-timeline", String(index));
    var tip = el("div", "tip");
    holder.append(canvas);
    document.body.append(tip);
    wrap.append(bar, holder);
    var ctx = canvas.getContext("2d");
    var W = 800;

    function scale() { return (W - GUTTER - PAD_R) / (view.t1 - view.t0); }
    function xOf(t) { return GUTTER + (t - view.t0) * scale(); }
    function tOf(x) { return view.t0 + (x - GUTTER) / scale(); }
    // lowerBound: first index with start >= t.
    function lowerBound(a, t) {
      var lo = 0, hi = a.length;
      while (lo < hi) { var m = (lo + hi) >> 1; if (a[m] < t) lo = m + 1; else hi = m; }
      return lo;
    }

    function resize() {
      W = Math.max(400, holder.clientWidth);
      canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
      canvas.style.width = W + "px"; canvas.style.height = H + "px";
      draw();
    }

    function draw() {
      var t0 = performance.now();
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, W, H);
      var s = scale(), plotR = W - PAD_R;
      // Lane backgrounds.
      L.forEach(function (l) { ctx.fillStyle = l.measured ? "#eef3f8" : "#f7f7f7"; ctx.fillRect(GUTTER, l.y, plotR - GUTTER, LANE_H); });
      // Axis and grid.
      var step = niceStep((view.t1 - view.t0) / Math.max(2, (plotR - GUTTER) / 90));
      ctx.font = "11px system-ui, sans-serif"; ctx.textBaseline = "middle"; ctx.textAlign = "center";
      for (var t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
        var x = Math.round(xOf(t)) + 0.5;
        ctx.fillStyle = "#e3e7eb"; ctx.fillRect(x, AXIS_H, 1, H - AXIS_H - PAD_B);
        ctx.fillStyle = "#5d6873"; ctx.fillText(tickLabel(t, step), x, AXIS_H / 2);
      }
      ctx.save();
      ctx.beginPath(); ctx.rect(GUTTER, 0, plotR - GUTTER, H); ctx.clip();
      // Collectives across their group, behind the boxes: a band on each
      // member's lane and a line joining the members (through the lanes
      // between them, which the band leaves alone).
      for (var k = 0; k < links.length; k++) {
        var refs = links[k].boxes, lo = Infinity, hi = -Infinity, top = Infinity, bot = -Infinity;
        for (var r = 0; r < refs.length; r++) {
          var ll = L[refs[r].lane], bi = refs[r].box;
          lo = Math.min(lo, ll.start[bi]); hi = Math.max(hi, ll.start[bi] + ll.dur[bi]);
          top = Math.min(top, ll.y); bot = Math.max(bot, ll.y + LANE_H);
        }
        if (hi < view.t0 || lo > view.t1) continue;
        var x0 = xOf(lo), w = Math.max(1, (hi - lo) * s);
        ctx.fillStyle = "rgba(123,63,160,0.14)";
        for (var r2 = 0; r2 < refs.length; r2++) ctx.fillRect(x0, L[refs[r2].lane].y, w, LANE_H);
        ctx.fillStyle = "rgba(123,63,160,0.55)"; ctx.fillRect(x0, top, 1, bot - top);
      }
      // Boxes, then the critical-path strip under each critical box.
      for (var li = 0; li < L.length; li++) {
        var l = L[li], n = 0;
        var i = lowerBound(l.start, view.t0 - l.maxDur);
        var lastX = -1, lastOp = -1;
        for (; i < l.n && l.start[i] <= view.t1; i++) {
          var st = l.start[i], du = l.dur[i];
          if (st + du < view.t0) continue;
          n++;
          var bx = GUTTER + (st - view.t0) * s, bw = du * s;
          ctx.fillStyle = opColor[l.op[i]];
          if (du === 0) {
            ctx.globalAlpha = 0.6; ctx.fillRect(bx, l.y + LANE_H * 0.3, 1, LANE_H * 0.4); ctx.globalAlpha = 1;
          } else if (bw < 1) {
            // Sub-pixel boxes: one pixel per column and colour is enough.
            var px = Math.floor(bx);
            if (px !== lastX || l.op[i] !== lastOp) ctx.fillRect(px, l.y + 1, 1, LANE_H - 2);
            lastX = px;
          } else {
            ctx.fillRect(bx, l.y + 1, bw > 2 ? bw - 0.5 : bw, LANE_H - 2);
          }
          lastOp = l.op[i];
          if (l.crit[i]) { ctx.fillStyle = "#111"; ctx.fillRect(bx, l.y + LANE_H - 3, Math.max(1, bw), 3); }
        }
        drawn[li] = n;
      }
      // Hovered box and its collective's members.
      if (hover) {
        var marks = [hover];
        var hl = L[hover.lane].link[hover.box];
        if (hl >= 0) marks = links[hl].boxes.map(function (r) { return { lane: r.lane, box: r.box }; });
        ctx.strokeStyle = "#000"; ctx.lineWidth = 1.5;
        marks.forEach(function (m) {
          var l = L[m.lane];
          ctx.strokeRect(xOf(l.start[m.box]) - 1, l.y, Math.max(2, l.dur[m.box] * s) + 2, LANE_H);
        });
      }
      ctx.restore();
      // Gutter labels.
      ctx.fillStyle = "#fff"; ctx.fillRect(0, AXIS_H, GUTTER, H - AXIS_H);
      ctx.textAlign = "right"; ctx.font = "12px system-ui, sans-serif";
      L.forEach(function (l) { ctx.fillStyle = l.measured ? "#2f5d8a" : "#1d2329"; ctx.fillText(l.label, GUTTER - 8, l.y + LANE_H / 2, GUTTER - 14); });
      canvas.setAttribute("data-drawn", drawn.join(","));
      return performance.now() - t0;
    }

    var pending = false;
    function redraw() { if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; draw(); }); } }

    function boxAt(mx, my) {
      for (var li = 0; li < L.length; li++) {
        var l = L[li];
        if (my < l.y || my >= l.y + LANE_H) continue;
        var t = tOf(mx), tol = 3 / scale(), best = -1, bestD = Infinity;
        var i = lowerBound(l.start, t - tol - l.maxDur);
        for (; i < l.n && l.start[i] <= t + tol; i++) {
          var a = l.start[i], b = a + l.dur[i];
          if (b < t - tol) continue;
          var d = (t >= a && t <= b) ? 0 : Math.min(Math.abs(t - a), Math.abs(t - b));
          if (d < bestD || (d === bestD && l.dur[i] < l.dur[best])) { best = i; bestD = d; }
        }
        return best >= 0 ? { lane: li, box: best } : null;
      }
      return null;
    }

    // showTip places the tooltip at the mouse's viewport position (cx, cy).
    function showTip(h, cx, cy) {
      var l = L[h.lane], op = ops[l.op[h.box]];
      tip.textContent = "";
      tip.append(el("div", "id", op.id));
      tip.append(el("div", "meta", op.kind + " \u00b7 " + l.label + " \u00b7 start " + fmtUs(l.start[h.box]) + ", duration " + fmtUs(l.dur[h.box])));
      if (l.crit[h.box]) tip.append(el("div", "crit", "on the critical path"));
      if (op.fields && op.fields.length) {
        var tb = el("table");
        op.fields.forEach(function (f) { var tr = el("tr"); tr.append(el("td", null, f.name), el("td", null, f.value)); tb.append(tr); });
        tip.append(tb);
      }
      tip.style.display = "block";
      var tw = tip.offsetWidth, th = tip.offsetHeight;
      var left = cx + 14, topY = cy + 14;
      if (left + tw > window.innerWidth) left = Math.max(0, cx - tw - 14);
      if (topY + th > window.innerHeight) topY = Math.max(0, cy - th - 14);
      tip.style.left = left + "px"; tip.style.top = topY + "px";
    }
    function hideTip() { tip.style.display = "none"; }

    var dragging = null;
    function local(e) { var r = canvas.getBoundingClientRect(); return { x: e.clientX - r.left, y: e.clientY - r.top }; }
    canvas.addEventListener("wheel", function (e) {
      var p = local(e);
      if (p.x < GUTTER) return;
      e.preventDefault();
      var span = view.t1 - view.t0;
      if (e.shiftKey) { var dt = (e.deltaY || e.deltaX) / scale(); view.t0 += dt; view.t1 += dt; redraw(); return; }
      var tm = tOf(p.x);
      var ns = Math.min(fullEnd * 4, Math.max(0.05, span * Math.exp(e.deltaY * 0.0015)));
      view.t0 = tm - (tm - view.t0) * ns / span; view.t1 = view.t0 + ns;
      redraw();
    }, { passive: false });
    canvas.addEventListener("mousedown", function (e) {
      var p = local(e); dragging = { x: p.x, t0: view.t0, t1: view.t1 }; canvas.classList.add("drag"); hideTip();
    });
    window.addEventListener("mouseup", function () { if (dragging) { dragging = null; canvas.classList.remove("drag"); } });
    canvas.addEventListener("mousemove", function (e) {
      var p = local(e);
      if (dragging) {
        var dt = (p.x - dragging.x) / scale();
        view.t0 = dragging.t0 - dt; view.t1 = dragging.t1 - dt; redraw(); return;
      }
      var h = boxAt(p.x, p.y);
      var changed = (h === null) !== (hover === null) || (h && (h.lane !== hover.lane || h.box !== hover.box));
      hover = h;
      if (h) showTip(h, e.clientX, e.clientY); else hideTip();
      if (changed) redraw();
    });
    canvas.addEventListener("mouseleave", function () { hover = null; hideTip(); redraw(); });
    canvas.addEventListener("dblclick", function () { view.t0 = 0; view.t1 = fullEnd; redraw(); });
    reset.addEventListener("click", function () { view.t0 = 0; view.t1 = fullEnd; redraw(); });
    window.addEventListener("resize", function () { resize(); });

    this.element = wrap;
    this.start = resize;
    // Test and tooling hooks.
    this.laneCounts = function () {
      return L.map(function (l, i) { return { label: l.label, measured: l.measured, rank: l.rank, boxes: l.n, drawn: drawn[i] }; });
    };
    this.boxCenter = function (lane, box) {
      var l = L[lane], r = canvas.getBoundingClientRect();
      var a = Math.max(xOf(l.start[box]), GUTTER), b = Math.min(xOf(l.start[box] + l.dur[box]), W - PAD_R);
      return { x: r.left + (a + b) / 2, y: r.top + l.y + LANE_H / 2, id: ops[l.op[box]].id };
    };
    this.widestBox = function (lane) {
      var l = L[lane], best = 0;
      for (var i = 1; i < l.n; i++) if (l.dur[i] > l.dur[best]) best = i;
      return best;
    };
    this.zoom = function (t0, t1) { view.t0 = t0; view.t1 = t1; return draw(); };
    this.redraw = function () { return draw(); };
    this.tooltip = function () { return tip.style.display === "none" ? "" : tip.textContent; };
  }

  // ---- bars -----------------------------------------------------------
  function Bars(b) {
    var NOTE_W = 90, WIDTH = 980, BAR_H = 11, ROW_GAP = 8, TOP = 24, AXIS = 22;
    var bseries = list(b.series), rows = list(b.rows), ns = bseries.length;
    // The label column holds the longest label (at the bars' 11 px): a
    // fixed 190 cut a qualified one ("box-rtxpro6000-switch (conditional)")
    // at the chart's left edge.
    var LABEL_W = 190, meter = document.createElement("canvas").getContext("2d");
    meter.font = "11px " + getComputedStyle(document.body).fontFamily;
    rows.forEach(function (r) { LABEL_W = Math.max(LABEL_W, Math.ceil(meter.measureText(r.label).width) + 16); });
    LABEL_W = Math.min(LABEL_W, WIDTH / 2);
    var plotW = WIDTH - LABEL_W - NOTE_W - 60;
    var rowH = ns * BAR_H + ROW_GAP;
    var max = b.ref_line || 0;
    rows.forEach(function (r) { list(r.values).forEach(function (v) { if (!v.missing) max = Math.max(max, v.v, v.hi || 0); }); });
    if (!(max > 0)) max = 1;
    var H = TOP + rows.length * rowH + AXIS;
    var root = svg("svg", { viewBox: "0 0 " + WIDTH + " " + H, role: "img" });
    var sx = function (v) { return LABEL_W + v / max * plotW; };
    bseries.forEach(function (s, i) {
      var x = LABEL_W + i * 170;
      root.append(svg("rect", { x: x, y: 4, width: 11, height: 11, fill: SERIES_COLORS[i % SERIES_COLORS.length] }));
      root.append(svg("text", { x: x + 16, y: 13 }, s));
    });
    var step = niceStep(max / 6);
    var axis = svg("g", { "class": "axis" });
    for (var t = 0; t <= max + 1e-9; t += step) {
      axis.append(svg("line", { x1: sx(t), x2: sx(t), y1: TOP - 2, y2: H - AXIS + 2, stroke: "#e3e7eb" }));
      axis.append(svg("text", { x: sx(t), y: H - 6, "text-anchor": "middle" }, fmtTick(t, step) + (b.unit ? " " + b.unit : "")));
    }
    root.append(axis);
    rows.forEach(function (r, ri) {
      var y0 = TOP + ri * rowH;
      root.append(svg("text", { x: LABEL_W - 8, y: y0 + ns * BAR_H / 2 + 4, "text-anchor": "end" }, r.label));
      list(r.values).forEach(function (v, vi) {
        var y = y0 + vi * BAR_H;
        if (v.missing) { root.append(svg("text", { x: LABEL_W + 4, y: y + BAR_H - 2, fill: "#8a949e" }, "not measured")); return; }
        var rect = svg("rect", { x: LABEL_W, y: y + 1, width: Math.max(0.5, sx(v.v) - LABEL_W), height: BAR_H - 2, fill: SERIES_COLORS[vi % SERIES_COLORS.length] });
        var title = bseries[vi] + ": " + fmtNum(v.v) + (b.unit ? " " + b.unit : "");
        if (v.hi > 0) title += " (spread " + fmtNum(v.lo) + "\u2013" + fmtNum(v.hi) + ")";
        rect.append(svg("title", {}, title));
        root.append(rect);
        var end = sx(v.v);
        if (v.hi > 0) {
          root.append(svg("line", { x1: sx(v.lo), x2: sx(v.hi), y1: y + BAR_H / 2, y2: y + BAR_H / 2, stroke: "#222", "stroke-width": 1 }));
          root.append(svg("line", { x1: sx(v.lo), x2: sx(v.lo), y1: y + 2, y2: y + BAR_H - 2, stroke: "#222" }));
          root.append(svg("line", { x1: sx(v.hi), x2: sx(v.hi), y1: y + 2, y2: y + BAR_H - 2, stroke: "#222" }));
          end = Math.max(end, sx(v.hi));
        }
        root.append(svg("text", { x: end + 4, y: y + BAR_H - 2, fill: "#5d6873" }, fmtNum(v.v)));
      });
      if (r.note) root.append(svg("text", { x: WIDTH - NOTE_W + 80, y: y0 + ns * BAR_H / 2 + 4, "text-anchor": "end" }, r.note));
    });
    if (b.ref_line > 0) root.append(svg("line", { x1: sx(b.ref_line), x2: sx(b.ref_line), y1: TOP - 4, y2: H - AXIS, stroke: "#333", "stroke-dasharray": "4 3" }));
    var wrap = el("div", "bars");
    wrap.append(root);
    this.element = wrap;
  }

  // ---- scatter --------------------------------------------------------
  // Linear axes from 0 to a nice step past the largest value (points,
  // reference lines and marks included), so nothing leaves the plot.
  function Scatter(sc) {
    var WIDTH = 980, HEIGHT = 520, L = 78, R = 24, T = 16, B = 54, LEG_H = 20;
    var series = list(sc.series).map(function (s) {
      return { name: s.name, points: list(s.points), labels: list(s.labels), line: s.line, faint: s.faint };
    });
    var vl = list(sc.v_lines), hl = list(sc.h_lines), marks = list(sc.marks);
    var PER_ROW = 3, LEG_W = 300;
    var top = T + LEG_H * Math.ceil((series.length + (vl.length + hl.length > 0 ? 1 : 0) + (marks.length > 0 ? 1 : 0)) / PER_ROW);
    var maxX = 0, maxY = 0;
    series.forEach(function (s) { s.points.forEach(function (p) { maxX = Math.max(maxX, p[0]); maxY = Math.max(maxY, p[1]); }); });
    vl.forEach(function (l) { maxX = Math.max(maxX, l.at); });
    hl.forEach(function (l) { maxY = Math.max(maxY, l.at); });
    marks.forEach(function (m) { maxX = Math.max(maxX, m.x); maxY = Math.max(maxY, m.y); });
    if (!(maxX > 0)) maxX = 1;
    if (!(maxY > 0)) maxY = 1;
    var stepX = niceStep(maxX / 8), stepY = niceStep(maxY / 6);
    var x1 = Math.ceil(maxX * 1.04 / stepX) * stepX, y1 = Math.ceil(maxY * 1.06 / stepY) * stepY;
    var pw = WIDTH - L - R, ph = HEIGHT - top - B;
    var sx = function (v) { return L + v / x1 * pw; }, sy = function (v) { return top + ph - v / y1 * ph; };
    var root = svg("svg", { viewBox: "0 0 " + WIDTH + " " + HEIGHT, role: "img" });
    var axis = svg("g", { "class": "axis" });
    for (var t = 0; t <= x1 + 1e-9; t += stepX) {
      axis.append(svg("line", { x1: sx(t), x2: sx(t), y1: top, y2: top + ph, stroke: "#eceff2" }));
      axis.append(svg("text", { x: sx(t), y: top + ph + 16, "text-anchor": "middle" }, fmtTick(t, stepX)));
    }
    for (t = 0; t <= y1 + 1e-9; t += stepY) {
      axis.append(svg("line", { x1: L, x2: L + pw, y1: sy(t), y2: sy(t), stroke: "#eceff2" }));
      axis.append(svg("text", { x: L - 6, y: sy(t) + 4, "text-anchor": "end" }, fmtTick(t, stepY)));
    }
    axis.append(svg("rect", { x: L, y: top, width: pw, height: ph, fill: "none", stroke: "#9aa5b1" }));
    axis.append(svg("text", { x: L + pw / 2, y: HEIGHT - 14, "text-anchor": "middle" }, sc.x_label));
    axis.append(svg("text", { x: 16, y: top + ph / 2, "text-anchor": "middle", transform: "rotate(-90 16 " + (top + ph / 2) + ")" }, sc.y_label));
    root.append(axis);
    var legend = [], drawn = 0, hover = [], next = 0, last = SERIES_COLORS[0];
    series.forEach(function (s, i) {
      // A joined series (a front) takes the colour of the points before
      // it, so a box's points and its front read as one.
      var color = s.faint ? "#a8b0b8" : s.line ? last : SERIES_COLORS[next++ % SERIES_COLORS.length];
      if (!s.faint && !s.line) last = color;
      legend.push({ name: s.name, color: color, line: s.line });
      if (s.line && s.points.length > 1) {
        root.append(svg("polyline", { points: s.points.map(function (p) { return sx(p[0]) + "," + sy(p[1]); }).join(" "), fill: "none", stroke: color, "stroke-width": 2 }));
      }
      s.points.forEach(function (p, pi) {
        var c = svg("circle", { cx: sx(p[0]), cy: sy(p[1]), r: s.line ? 4 : 3, fill: s.faint ? "none" : color, stroke: color, "stroke-width": 1.2, "data-series": i });
        var label = (s.labels && s.labels[pi] ? s.labels[pi] + ": " : "") + sc.x_label + " " + fmtNum(p[0]) + ", " + sc.y_label + " " + fmtNum(p[1]);
        c.append(svg("title", {}, s.name + " \u2014 " + label));
        root.append(c);
        hover.push({ x: sx(p[0]), y: sy(p[1]), label: label });
        drawn++;
      });
    });
    vl.forEach(function (l) {
      root.append(svg("line", { x1: sx(l.at), x2: sx(l.at), y1: top, y2: top + ph, stroke: "#c0392b", "stroke-dasharray": "6 4", "stroke-width": 1.5 }));
      // Right of the line where it leaves room, else left of it: a line
      // near the right edge (an SLO past the fastest run) ran its label
      // out of the chart.
      var right = sx(l.at) < L + pw * 0.6;
      root.append(svg("text", { x: sx(l.at) + (right ? 4 : -4), y: top + 12, fill: "#c0392b", "text-anchor": right ? "start" : "end" }, l.label));
    });
    hl.forEach(function (l) {
      root.append(svg("line", { x1: L, x2: L + pw, y1: sy(l.at), y2: sy(l.at), stroke: "#c0392b", "stroke-dasharray": "6 4", "stroke-width": 1.5 }));
      root.append(svg("text", { x: L + pw - 4, y: sy(l.at) - 4, fill: "#c0392b", "text-anchor": "end" }, l.label));
    });
    marks.forEach(function (m) {
      root.append(svg("circle", { cx: sx(m.x), cy: sy(m.y), r: 8, fill: "none", stroke: "#111", "stroke-width": 2 }));
      var right = sx(m.x) < L + pw * 0.7;
      root.append(svg("text", { x: sx(m.x) + (right ? 12 : -12), y: sy(m.y) - 10, "text-anchor": right ? "start" : "end", "font-weight": "600" }, m.label));
    });
    if (vl.length + hl.length > 0) legend.push({ name: (vl.concat(hl))[0].label, color: "#c0392b", dash: true });
    if (marks.length > 0) legend.push({ name: "chosen", color: "#111", ring: true });
    legend.forEach(function (g, i) {
      var x = L + (i % PER_ROW) * LEG_W, y = T + Math.floor(i / PER_ROW) * LEG_H;
      if (g.dash) root.append(svg("line", { x1: x, x2: x + 16, y1: y + 6, y2: y + 6, stroke: g.color, "stroke-dasharray": "4 3", "stroke-width": 2 }));
      else if (g.ring) root.append(svg("circle", { cx: x + 8, cy: y + 6, r: 6, fill: "none", stroke: g.color, "stroke-width": 2 }));
      else {
        if (g.line) root.append(svg("line", { x1: x, x2: x + 16, y1: y + 6, y2: y + 6, stroke: g.color, "stroke-width": 2 }));
        root.append(svg("circle", { cx: x + 8, cy: y + 6, r: 4, fill: g.color }));
      }
      root.append(svg("text", { x: x + 22, y: y + 10 }, g.name));
    });
    var wrap = el("div", "scatter");
    wrap.append(root);
    this.element = wrap;
    // Test hooks: points drawn, and the data-space extent the axes cover.
    this.pointCount = function () { return drawn; };
    this.extent = function () { return { x1: x1, y1: y1, maxX: maxX, maxY: maxY }; };
    this.inside = function () {
      var r = root.getBoundingClientRect(), k = r.width / WIDTH;
      return hover.every(function (h) { return h.x >= L - 0.5 && h.x <= L + pw + 0.5 && h.y >= top - 0.5 && h.y <= top + ph + 0.5; }) && k > 0;
    };
  }

  // ---- table ----------------------------------------------------------
  function Table(t) {
    var wrap = el("div", "tablewrap");
    var tb = el("table", "data");
    var head = el("tr");
    var body = el("tbody");
    var columns = list(t.columns);
    var rows = list(t.rows).map(function (r) {
      var tr = el("tr", r.tone || null), cells = list(r.cells);
      cells.forEach(function (c, i) { tr.append(el("td", columns[i].numeric ? "num" : null, c)); });
      return { tr: tr, cells: cells };
    });
    var sortCol = -1, asc = true;
    function key(c, numeric) {
      if (!numeric) return c;
      var m = /[-+]?\d*\.?\d+(e[-+]?\d+)?/i.exec(c.replace(/^x/, ""));
      return m ? parseFloat(m[0]) : -Infinity;
    }
    columns.forEach(function (col, i) {
      var th = el("th", col.numeric ? "num" : null, col.name);
      th.addEventListener("click", function () {
        asc = sortCol === i ? !asc : !col.numeric; sortCol = i;
        head.querySelectorAll("th").forEach(function (h) { h.classList.remove("sorted", "asc"); });
        th.classList.add("sorted"); if (asc) th.classList.add("asc");
        rows.sort(function (a, b) {
          var x = key(a.cells[i], col.numeric), y = key(b.cells[i], col.numeric);
          return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
        });
        rows.forEach(function (r) { body.append(r.tr); });
      });
      head.append(th);
    });
    rows.forEach(function (r) { body.append(r.tr); });
    var thead = el("thead"); thead.append(head);
    tb.append(thead, body);
    wrap.append(tb);
    this.element = wrap;
  }

  var started = [];
  list(data.sections).forEach(function (s) {
    var sec = el("section", "sec");
    sec.append(el("h2", null, s.title));
    if (s.lines && s.lines.length) {
      var ul = el("ul", "lines");
      s.lines.forEach(function (l) { ul.append(el("li", null, l)); });
      sec.append(ul);
    }
    if (s.timeline) { var tl = new Timeline(s.timeline, api.timelines.length); api.timelines.push(tl); sec.append(tl.element); started.push(tl); }
    if (s.bars) sec.append(new Bars(s.bars).element);
    if (s.scatter) { var sc = new Scatter(s.scatter); api.scatters.push(sc); sec.append(sc.element); }
    if (s.table) sec.append(new Table(s.table).element);
    app.append(sec);
  });
  started.forEach(function (tl) { tl.start(); });
  api.renderMs = performance.now();
  api.ready = true;
  document.body.setAttribute("data-ready", "1");
})();
