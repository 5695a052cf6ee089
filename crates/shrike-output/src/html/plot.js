/* Shrike report, part 1: a small SVG plotting kit (DOM helpers, unit formatting, scales,
 * line charts with legend and hover tooltip). No libraries and no network: the page carries
 * everything it needs. Part 2 (report.js) lays out the report with it; both share one script
 * element, so these top-level names are that script's. */
"use strict";
// Errors anywhere in the page are collected here and stamped on the DOM after drawing.
var renderErrors = [];
window.onerror = function (msg, src, line) {
  renderErrors.push(msg + (line ? " (line " + line + ")" : ""));
};

var SVG = "http://www.w3.org/2000/svg";
var COLORS = ["#1f63c6", "#d4351c", "#2a9d3a", "#8e44ad", "#e08a00", "#00838f", "#7a5230",
              "#c2185b"];
// The one tooltip, moved between plots on hover.
var tip = null;

function color(i) { return COLORS[i % COLORS.length]; }

// ---- DOM helpers ----
function el(tag, attrs, parent, text) {
  var e = document.createElement(tag);
  for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text != null) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function sv(tag, attrs, parent, text) {
  var e = document.createElementNS(SVG, tag);
  for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text != null) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function swatch(parent, c, style) {
  el("span", { "class": "swatch " + (style || ""), style: "border-top-color:" + c }, parent);
}

// ---- number formatting: durations in ns pick µs/ms/s by magnitude ----
function sig(v, n) { return String(Number(v.toPrecision(n))); }
function fmtDur(ns) {
  if (ns == null || !isFinite(ns)) return "–";
  var a = Math.abs(ns);
  if (a < 1e3) return sig(ns, 3) + " ns";
  if (a < 1e6) return sig(ns / 1e3, 3) + " µs";
  if (a < 1e9) return sig(ns / 1e6, 3) + " ms";
  return sig(ns / 1e9, 3) + " s";
}
function fmtInt(n) { return n == null ? "–" : Math.round(n).toLocaleString("en-US"); }
function fmtRate(v) {
  if (v == null || !isFinite(v)) return "–";
  return v >= 1000 ? fmtInt(v) : sig(v, 4);
}
function fmtSecs(s) {
  if (s == null) return "–";
  return s < 120 ? sig(s, 4) + " s" : sig(s / 60, 3) + " min";
}
function fmtPct(v) { return (v >= 10 ? v.toFixed(1) : sig(v, 2)) + "%"; }
function fmtNines(x) {
  var q = 1 - Math.pow(10, -x);
  if (x <= 0) return "0%";
  var d = Math.max(0, Math.ceil(x - 1e-9) - 2);
  return (100 * q).toFixed(Math.min(d + 1, 8)).replace(/\.?0+$/, "") + "%";
}

// ---- scales and ticks ----
function scale(kind, d0, d1, r0, r1) {
  var f = kind === "log" ? Math.log10 : function (v) { return v; };
  var a = f(d0), b = f(d1);
  if (b === a) { b = a + 1; }
  var s = function (v) { return r0 + (f(v) - a) / (b - a) * (r1 - r0); };
  s.inv = function (p) {
    var t = a + (p - r0) / (r1 - r0) * (b - a);
    return kind === "log" ? Math.pow(10, t) : t;
  };
  return s;
}
function linTicks(d0, d1, n) {
  var span = d1 - d0 || 1, step = Math.pow(10, Math.floor(Math.log10(span / n)));
  var err = span / n / step;
  step *= err >= 5 ? 10 : err >= 2 ? 5 : err >= 1.5 ? 2 : 1;
  var out = [];
  for (var v = Math.ceil(d0 / step) * step; v <= d1 + step * 1e-9; v += step) out.push(v);
  return out;
}
function logTicks(d0, d1) {
  var out = [], lo = Math.floor(Math.log10(d0)), hi = Math.ceil(Math.log10(d1));
  var mult = hi - lo > 5 ? [1] : hi - lo > 2 ? [1, 3] : [1, 2, 5];
  for (var k = lo; k <= hi; k++) {
    mult.forEach(function (m) {
      var v = m * Math.pow(10, k);
      if (v >= d0 * 0.999 && v <= d1 * 1.001) out.push(v);
    });
  }
  return out;
}
// A log domain widened to whole decades, so the ends carry labels.
function logDomain(lo, hi) {
  lo = Math.max(lo, 1e-9);
  hi = Math.max(hi, lo * 1.0001);
  return [Math.pow(10, Math.floor(Math.log10(lo))), Math.pow(10, Math.ceil(Math.log10(hi)))];
}

// A marker at (cx, cy): "dot" (filled), "ring" (hollow), "cross" (×), "diamond" (filled).
function marker(parent, shape, cx, cy, c, r) {
  r = r || 2.2;
  if (shape === "cross") {
    var d = "M" + (cx - r) + " " + (cy - r) + "L" + (cx + r) + " " + (cy + r) +
            "M" + (cx - r) + " " + (cy + r) + "L" + (cx + r) + " " + (cy - r);
    return sv("path", { d: d, stroke: c, "stroke-width": 2, fill: "none", "data-marker": shape }, parent);
  }
  if (shape === "diamond") {
    var q = r * 1.3;
    return sv("path", { d: "M" + cx + " " + (cy - q) + "L" + (cx + q) + " " + cy + "L" + cx + " " +
                        (cy + q) + "L" + (cx - q) + " " + cy + "Z", fill: c, "data-marker": shape }, parent);
  }
  var ring = shape === "ring";
  return sv("circle", { cx: cx, cy: cy, r: r, fill: ring ? "white" : c, stroke: c,
                        "stroke-width": ring ? 1.6 : 0, "data-marker": shape || "dot" }, parent);
}

// ---- the chart: axes, grid, series paths, legend, hover tooltip ----
// o = {id, x: {kind, min, max, fmt, ticks, label}, y: {...}, series: [{name, file, color,
//      dash, width, pts: [[x, y|null]...], ref, line (false: markers only), dots (markers on
//      the line), marker (a shape, or a function of the point's index), size, label (text at
//      the series' last point)}], legend: [[label, color, style]...]}
function chart(fig, o) {
  var W = 960, H = 330, m = { l: 72, r: 36, t: 10, b: 46 };
  var x = scale(o.x.kind, o.x.min, o.x.max, m.l, W - m.r);
  var y = scale(o.y.kind, o.y.min, o.y.max, H - m.b, m.t);
  var svg = sv("svg", { viewBox: "0 0 " + W + " " + H, role: "img",
                        "aria-label": o.title || o.id }, fig);
  var grid = sv("g", {}, svg);
  var xt = o.x.ticks || (o.x.kind === "log" ? logTicks(o.x.min, o.x.max)
                                              : linTicks(o.x.min, o.x.max, 8));
  var yt = o.y.ticks || (o.y.kind === "log" ? logTicks(o.y.min, o.y.max)
                                              : linTicks(o.y.min, o.y.max, 6));
  xt.forEach(function (v) {
    var px = x(v);
    sv("line", { "class": "grid", x1: px, x2: px, y1: m.t, y2: H - m.b }, grid);
    sv("text", { x: px, y: H - m.b + 16, "text-anchor": "middle" }, grid, o.x.fmt(v));
  });
  yt.forEach(function (v) {
    var py = y(v);
    sv("line", { "class": "grid", x1: m.l, x2: W - m.r, y1: py, y2: py }, grid);
    sv("text", { x: m.l - 6, y: py + 4, "text-anchor": "end" }, grid, o.y.fmt(v));
  });
  sv("rect", { "class": "frame", x: m.l, y: m.t, width: W - m.l - m.r,
               height: H - m.t - m.b }, svg);
  sv("text", { "class": "axis-label", x: (m.l + W - m.r) / 2, y: H - 8,
               "text-anchor": "middle" }, svg, o.x.label);
  sv("text", { "class": "axis-label", x: 14, y: (m.t + H - m.b) / 2, "text-anchor": "middle",
               transform: "rotate(-90 14 " + (m.t + H - m.b) / 2 + ")" }, svg, o.y.label);
  var clipId = "clip-" + o.id;
  var clip = sv("clipPath", { id: clipId }, sv("defs", {}, svg));
  sv("rect", { x: m.l, y: m.t - 2, width: W - m.l - m.r, height: H - m.t - m.b + 4 }, clip);
  var plot = sv("g", { "clip-path": "url(#" + clipId + ")" }, svg);
  var files = {}, drawn = [];
  o.series.forEach(function (s) {
    var d = "", pen = false;
    s.pts.forEach(function (p) {
      if (p[1] == null || !isFinite(p[1]) || (o.y.kind === "log" && p[1] <= 0)) {
        pen = false;
        return;
      }
      d += (pen ? "L" : "M") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1);
      pen = true;
    });
    if (!d) return;
    if (s.line !== false) {
      var path = sv("path", { "class": s.ref ? "ref" : "series", d: d, stroke: s.color,
                              "stroke-width": s.width || 2, "data-file": s.file }, plot);
      if (s.dash) path.setAttribute("stroke-dasharray", s.dash);
    }
    if (!s.ref) { files[s.file] = true; drawn.push(s); }
    // Markers show each point while they are few enough to tell apart.
    if ((s.dots || s.line === false) && s.pts.length <= 400) {
      s.pts.forEach(function (p, i) {
        if (p[1] == null || !isFinite(p[1]) || (o.y.kind === "log" && p[1] <= 0)) return;
        var shape = typeof s.marker === "function" ? s.marker(i) : s.marker;
        marker(plot, shape, x(p[0]), y(p[1]), s.color, s.size);
      });
    }
    if (s.label) {
      // At the series' last point (or its first: labelAt "start"), a row lower per labelRow
      // so labels of neighbouring lines do not overprint each other.
      var last = s.labelAt === "start" ? s.pts[0] : s.pts[s.pts.length - 1];
      var lx = Math.min(x(last[0]) + 4, W - m.r - 4);
      var ly = Math.max(y(last[1]) - 4, m.t + 12) + 14 * (s.labelRow || 0);
      var anchor = x(last[0]) > W - m.r - 160 ? "end" : "start";
      if (anchor === "end") lx = x(last[0]) - 4;
      sv("text", { "class": "series-label", x: lx, y: ly, style: "fill:" + s.color,
                   "text-anchor": anchor }, svg, s.label);
    }
  });
  fig.setAttribute("data-series", Object.keys(files).length);
  fig.setAttribute("data-paths", drawn.length);
  fig.setAttribute("data-ymax", o.y.max);
  hover(fig, svg, o, x, y, m, W, H, drawn);
  return svg;
}

// Legend entries: [label, color, style]; a style "mark-SHAPE" shows that marker instead of a
// line ("mark-dot", "mark-ring", "mark-cross", "mark-diamond").
function legend(parent, items) {
  var l = el("div", { "class": "legend" }, parent);
  items.forEach(function (it) {
    var s = el("span", {}, l);
    if (it[2] && it[2].indexOf("mark-") === 0) {
      var icon = sv("svg", { width: 14, height: 14, viewBox: "0 0 14 14", "class": "mark" }, s);
      marker(icon, it[2].slice(5), 7, 7, it[1], 4);
    } else {
      swatch(s, it[1], it[2]);
    }
    s.appendChild(document.createTextNode(it[0]));
  });
}

// Tooltip: the point of each series nearest the cursor's x.
function hover(fig, svg, o, x, y, m, W, H, series) {
  var cursor = sv("line", { "class": "cursor", y1: m.t, y2: H - m.b, visibility: "hidden" },
                  svg);
  var area = sv("rect", { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b,
                          fill: "transparent" }, svg);
  area.addEventListener("mousemove", function (ev) {
    var box = svg.getBoundingClientRect();
    var px = (ev.clientX - box.left) * W / box.width;
    cursor.setAttribute("x1", px);
    cursor.setAttribute("x2", px);
    cursor.setAttribute("visibility", "visible");
    if (!tip) tip = el("div", { "class": "tip" });
    tip.textContent = "";
    el("b", {}, tip, o.x.fmt(x.inv(px)));
    series.forEach(function (s) {
      var best = null;
      s.pts.forEach(function (p) {
        if (p[1] == null) return;
        if (!best || Math.abs(x(p[0]) - px) < Math.abs(x(best[0]) - px)) best = p;
      });
      if (!best) return;
      var row = el("div", {}, tip);
      swatch(row, s.color, s.dash ? "dash" : "");
      row.appendChild(document.createTextNode(
        s.name + ": " + (o.y.tip || o.y.fmt)(best[1]) + " @ " + o.x.fmt(best[0])));
    });
    tip.style.display = "block";
    var fb = fig.getBoundingClientRect();
    var left = ev.clientX - fb.left + 14;
    if (left + tip.offsetWidth > fb.width) left = ev.clientX - fb.left - tip.offsetWidth - 14;
    tip.style.left = Math.max(0, left) + "px";
    tip.style.top = (ev.clientY - fb.top + 12) + "px";
    fig.appendChild(tip);
  });
  area.addEventListener("mouseleave", function () {
    cursor.setAttribute("visibility", "hidden");
    if (tip) tip.style.display = "none";
  });
}

// ---- machine-readable status, shared by every page: what was drawn, how big, and any errors.
// `extra` holds the page's own body attributes (data-files, data-trials, data-points).
function stampPage(root, extra) {
  var figs = document.querySelectorAll("figure[data-plot]");
  for (var i = 0; i < figs.length; i++) {
    var svg = figs[i].querySelector("svg");
    var box = svg ? svg.getBoundingClientRect() : { width: 0, height: 0 };
    figs[i].setAttribute("data-width", Math.round(box.width));
    figs[i].setAttribute("data-height", Math.round(box.height));
  }
  document.body.setAttribute("data-errors", renderErrors.length);
  for (var k in extra) document.body.setAttribute(k, extra[k]);
  document.body.setAttribute("data-render", renderErrors.length ? "error" : "ok");
  var pre = document.getElementById("render-errors");
  if (renderErrors.length) {
    if (!pre) pre = el("pre", { id: "render-errors" }, root);
    pre.textContent = "Errors while drawing this report:\n" + renderErrors.join("\n");
  }
}
