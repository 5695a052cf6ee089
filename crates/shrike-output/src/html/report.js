/* Shrike report: draws the embedded results as tables and SVG plots. No libraries and no
 * network: everything it needs is in the page. After drawing it records what it drew on the
 * DOM (body data-render/data-errors, per plot data-series/data-paths/data-width/data-height/
 * data-ymax)
 * so tests and scripts can check a rendered report without a screenshot. */
"use strict";
var renderErrors = [];
window.onerror = function (msg, src, line) {
  renderErrors.push(msg + (line ? " (line " + line + ")" : ""));
};

(function () {
  var SVG = "http://www.w3.org/2000/svg";
  var COLORS = ["#1f63c6", "#d4351c", "#2a9d3a", "#8e44ad", "#e08a00", "#00838f", "#7a5230",
                "#c2185b"];
  var DATA = JSON.parse(document.getElementById("shrike-data").textContent);
  var FILES = DATA.files;
  var LAT = { scheduled: "scheduled-to-response", service: "service time" };
  var root = document.getElementById("report");
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

  // ---- the chart: axes, grid, series paths, legend, hover tooltip ----
  // o = {id, x: {kind, min, max, fmt, ticks, label}, y: {...}, series: [{name, file, color,
  //      dash, width, pts: [[x, y|null]...], ref}], legend: [[label, color, style]...]}
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
      var path = sv("path", { "class": s.ref ? "ref" : "series", d: d, stroke: s.color,
                              "stroke-width": s.width || 2, "data-file": s.file }, plot);
      if (s.dash) path.setAttribute("stroke-dasharray", s.dash);
      if (!s.ref) { files[s.file] = true; drawn.push(s); }
      // Dots mark interval points while they are few enough to tell apart.
      if (s.dots && s.pts.length <= 150) {
        s.pts.forEach(function (p) {
          if (p[1] == null || (o.y.kind === "log" && p[1] <= 0)) return;
          sv("circle", { cx: x(p[0]), cy: y(p[1]), r: 2.2, fill: s.color }, plot);
        });
      }
    });
    fig.setAttribute("data-series", Object.keys(files).length);
    fig.setAttribute("data-paths", drawn.length);
    fig.setAttribute("data-ymax", o.y.max);
    hover(fig, svg, o, x, y, m, W, H, drawn);
    return svg;
  }

  function legend(parent, items) {
    var l = el("div", { "class": "legend" }, parent);
    items.forEach(function (it) {
      var s = el("span", {}, l);
      swatch(s, it[1], it[2]);
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
      tip.style.display = "none";
    });
  }

  // Radio buttons that redraw a plot; the first choice starts checked.
  function radios(parent, name, choices, draw) {
    choices.forEach(function (c, i) {
      var lab = el("label", {}, parent);
      var r = el("input", { type: "radio", name: name, value: c[0] }, lab);
      if (i === 0) r.checked = true;
      r.addEventListener("change", function () {
        try { draw(c[0]); } catch (e) { renderErrors.push(name + ": " + (e && e.stack || e)); }
        stamp();
      });
      lab.append(" " + c[1]);
    });
  }

  function section(title, note) {
    var s = el("section", {}, root);
    el("h2", {}, s, title);
    if (note) el("p", { "class": "note" }, s, note);
    return s;
  }
  function figure(parent, id) { return el("figure", { "data-plot": id, id: "plot-" + id }, parent); }

  // ---- summary table: one column per file, then candidate / baseline ratios ----
  function pctOf(stat, q) {
    var p = stat.summary.filter(function (s) { return s[0] === q; })[0];
    return stat.count ? p && p[1] : null;
  }
  function summary() {
    var s = section("Summary", FILES.length > 1 ?
      "The first result (" + FILES[0].label + ") is the baseline; ratios are each result " +
      "divided by it, coloured when they differ by more than 5%." : null);
    var rows = [
      ["Target", function (f) { return f.target || "–"; }, null, "text"],
      ["Protocol", function (f) { return f.protocol || "–"; }, null, "text"],
      ["Started", function (f) { return f.started.replace("T", " ").replace(/\.\d+Z$/, "Z"); },
       null, "text"],
      ["Duration", function (f) { return fmtSecs(f.duration_s); }, function (f) { return f.duration_s; }],
      ["Workers", function (f) { return fmtInt(f.workers); }, function (f) { return f.workers; }],
      ["Requested rate (/s)", function (f) { return fmtRate(f.requested_rps); },
       function (f) { return f.requested_rps; }],
      ["Achieved rate (/s)", function (f) { return fmtRate(f.achieved_rps); },
       function (f) { return f.achieved_rps; }, null,
       // More is better only at the same offered rate; otherwise the ratio is just arithmetic.
       function (f) { return f.requested_rps === FILES[0].requested_rps ? 1 : 0; }],
      ["Requests sent", function (f) { return fmtInt(f.requests); }, function (f) { return f.requests; }],
      ["Responses", function (f) { return fmtInt(f.responses); }, function (f) { return f.responses; }],
      ["Errors", function (f) { return fmtInt(f.errors); }, function (f) { return f.errors; }, null, -1,
       function (f) {
         var k = Object.keys(f.error_counters);
         return k.length ? k.map(function (n) { return n + " " + f.error_counters[n]; }).join(", ")
                         : "4xx, 5xx, other status, resets, connection failures";
       }],
      ["Open-loop overflow", function (f) { return fmtInt(f.overflow); },
       function (f) { return f.overflow; }, null, -1],
      ["Termination", function (f) { return f.termination.description; }, null, "text"],
    ];
    [["scheduled", "Scheduled-to-response latency (coordinated-omission-free)"],
     ["service", "Service time (request sent to response end)"]].forEach(function (g) {
      rows.push([g[1]]);
      [[0.5, "p50"], [0.9, "p90"], [0.99, "p99"], [0.999, "p99.9"], [1, "max"]].forEach(function (q) {
        var get = function (f) { return pctOf(f.latency[g[0]], q[0]); };
        rows.push([q[1], function (f) { return fmtDur(get(f)); }, get, null, -1]);
      });
      var mean = function (f) { return f.latency[g[0]].count ? f.latency[g[0]].mean : null; };
      rows.push(["mean", function (f) { return fmtDur(mean(f)); }, mean, null, -1]);
    });
    var t = el("table", { id: "summary" }, s);
    var hr = el("tr", {}, el("thead", {}, t));
    el("th", {}, hr, "");
    FILES.forEach(function (f, i) { var th = el("th", {}, hr); swatch(th, color(i)); th.append(f.label); });
    FILES.slice(1).forEach(function (f) { el("th", {}, hr, f.label + " / " + FILES[0].label); });
    var body = el("tbody", {}, t);
    rows.forEach(function (r) {
      var tr = el("tr", {}, body);
      if (r.length === 1) {
        tr.className = "group";
        el("td", { colspan: 2 * FILES.length }, tr, r[0]);
        return;
      }
      el("td", {}, tr, r[0]);
      FILES.forEach(function (f) {
        var td = el("td", r[3] ? { "class": r[3] } : {}, tr, r[1](f));
        if (r[0] === "Termination" && f.termination.failure) td.className += " worse";
        if (r[5]) td.title = r[5](f);
      });
      FILES.slice(1).forEach(function (f) {
        var td = el("td", {}, tr, "");
        if (!r[2]) return;
        var a = r[2](FILES[0]), b = r[2](f);
        if (a == null || b == null || !isFinite(a) || !isFinite(b)) return;
        if (a === 0) { td.textContent = b === 0 ? "1.00×" : "–"; return; }
        var ratio = b / a;
        td.textContent = (ratio >= 100 ? ratio.toFixed(0) : ratio.toFixed(2)) + "×";
        var dir = typeof r[4] === "function" ? r[4](f) : r[4];
        if (dir && Math.abs(ratio - 1) > 0.05) {
          td.className = (ratio > 1) === (dir > 0) ? "better" : "worse";
        }
      });
    });
  }

  // ---- latency by percentile, on HdrHistogram's "nines" axis ----
  // x = -log10(1 - q), capped at log10(count): N samples resolve at most that many nines.
  function nines(q, n) {
    var cap = Math.log10(Math.max(n, 10));
    return q >= 1 ? cap : Math.min(-Math.log10(1 - q), cap);
  }
  function latencyLegend(parent, kinds) {
    var items = FILES.map(function (f, i) { return [f.label, color(i)]; });
    if (kinds.length > 1) {
      items.push(["solid: " + LAT.scheduled, "#555"]);
      items.push(["dashed: " + LAT.service, "#555", "dash"]);
    }
    legend(parent, items);
  }
  function spectrum() {
    var s = section("Latency by percentile",
      "Each result's full percentile spectrum from its stored histogram. Solid: " +
      "scheduled-to-response (from when each request was due; includes queueing a stalled " +
      "target causes). Dashed: service time (from the actual send). The x-axis is " +
      "logarithmic in nines; the last point of each line is the maximum.");
    var series = [], lo = Infinity, hi = 0, maxX = 1;
    FILES.forEach(function (f, i) {
      ["scheduled", "service"].forEach(function (k) {
        var st = f.latency[k];
        if (!st.count) return;
        var pts = st.spectrum.map(function (p) { return [nines(p[0], st.count), p[1]]; });
        pts.forEach(function (p) { if (p[1] > 0) lo = Math.min(lo, p[1]); hi = Math.max(hi, p[1]); });
        maxX = Math.max(maxX, pts[pts.length - 1][0]);
        series.push({ name: f.label + " " + LAT[k], file: i, color: color(i),
                      dash: k === "service" ? "6 4" : null, pts: pts });
      });
    });
    if (!series.length) { el("p", { "class": "empty" }, s, "No latency samples recorded."); return; }
    latencyLegend(s, ["scheduled", "service"]);
    var xmax = Math.ceil(maxX - 1e-9), ticks = [];
    for (var k = 0; k <= xmax; k++) ticks.push(k);
    var controls = el("div", { "class": "controls" }, s);
    var fig = figure(s, "spectrum");
    // Log by default (tails span decades); linear as HdrHistogram's own plotter draws it.
    var draw = function (kind) {
      fig.textContent = "";
      var yd = kind === "log" ? logDomain(lo, hi) : [0, hi * 1.05];
      chart(fig, {
        id: "spectrum", title: "Latency by percentile",
        x: { kind: "lin", min: 0, max: xmax, ticks: ticks, fmt: fmtNines, label: "percentile" },
        y: { kind: kind, min: yd[0], max: yd[1], fmt: fmtDur, label: "latency" },
        series: series,
      });
    };
    radios(controls, "spectrum-y", [["log", "log latency axis"], ["lin", "linear"]], draw);
    draw("log");
  }

  // ---- latency histogram: counts per log-spaced bin, as % of each result's samples ----
  function histogram() {
    var s = section("Latency distribution",
      "Share of requests per latency bin (" + DATA.histogram.bins_per_decade +
      " bins per decade, log scale), so results with different request counts compare.");
    var h = DATA.histogram;
    if (!h.count) { el("p", { "class": "empty" }, s, "No latency samples recorded."); return; }
    var controls = el("div", { "class": "controls" }, s);
    var fig = figure(s, "histogram");
    var draw = function (kind) {
      fig.textContent = "";
      var edge = function (i) { return Math.pow(10, (h.first + i) / h.bins_per_decade); };
      var series = [], top = 0;
      FILES.forEach(function (f, fi) {
        var st = f.latency[kind];
        if (!st.count) return;
        var pts = [[edge(0), 0]];
        st.bins.forEach(function (c, i) {
          var pct = 100 * c / st.count;
          top = Math.max(top, pct);
          pts.push([edge(i), pct], [edge(i + 1), pct]);
        });
        pts.push([edge(st.bins.length), 0]);
        series.push({ name: f.label, file: fi, color: color(fi), pts: pts });
      });
      legend(fig, FILES.map(function (f, i) { return [f.label, color(i)]; }));
      chart(fig, {
        id: "histogram", title: "Latency distribution",
        x: { kind: "log", min: edge(0), max: edge(h.count), fmt: fmtDur, label: LAT[kind] },
        y: { kind: "lin", min: 0, max: Math.max(top * 1.08, 1), fmt: fmtPct,
             label: "% of requests" },
        series: series,
      });
    };
    radios(controls, "hist-kind", [["scheduled", LAT.scheduled], ["service", LAT.service]], draw);
    draw("scheduled");
  }

  // ---- over time, from the interval series ----
  function overTime() {
    var s = section("Over time",
      "From the interval snapshots (--stats-interval). Points sit at the middle of each " +
      "interval; a final interval shorter than a quarter of the others gets no rate point.");
    var withData = FILES.filter(function (f) { return f.intervals.length; });
    if (!withData.length) {
      el("p", { "class": "empty", "data-empty": "timeseries" }, s,
         "No time series recorded (run with --stats-interval).");
      return;
    }
    var missing = FILES.filter(function (f) { return !f.intervals.length; });
    if (missing.length) {
      el("p", { "class": "note", "data-empty": "timeseries-partial" }, s,
         "No time series recorded for " + missing.map(function (f) { return f.label; }).join(", ") +
         " (run with --stats-interval).");
    }
    var tmax = 0;
    FILES.forEach(function (f) {
      f.intervals.forEach(function (iv) { tmax = Math.max(tmax, iv.start_s + iv.duration_s); });
    });
    var xAxis = { kind: "lin", min: 0, max: tmax || 1, fmt: fmtSecs, label: "time since start" };
    var mid = function (iv) { return iv.start_s + iv.duration_s / 2; };
    // A run's last interval is often a sliver (the tail after the final tick): a rate over a
    // few microseconds is noise, so intervals under a quarter of the usual length get no rate
    // point. Their responses still count in every total.
    FILES.forEach(function (f) {
      var d = f.intervals.map(function (iv) { return iv.duration_s; }).sort(function (a, b) { return a - b; });
      var usual = d.length ? d[Math.floor(d.length / 2)] : 0;
      f.intervals.forEach(function (iv) { iv.sliver = iv.duration_s < usual / 4; });
    });
    var perSec = function (n, iv) {
      return iv.duration_s > 0 && !iv.sliver ? n / iv.duration_s : null;
    };
    var fileLegend = FILES.map(function (f, i) { return [f.label, color(i)]; });

    // Throughput, with each result's requested rate as a dotted reference.
    var h3 = el("h2", {}, s, "Throughput");
    h3.style.fontSize = "15px";
    var series = [], top = 0;
    FILES.forEach(function (f, i) {
      if (!f.intervals.length) return;
      var pts = f.intervals.map(function (iv) { return [mid(iv), perSec(iv.responses, iv)]; });
      pts.forEach(function (p) { top = Math.max(top, p[1] || 0); });
      series.push({ name: f.label, file: i, color: color(i), pts: pts, dots: true });
      if (f.requested_rps) {
        top = Math.max(top, f.requested_rps);
        series.push({ name: f.label + " requested", file: i, color: color(i), ref: true,
                      dash: "2 4", width: 1.5, pts: [[0, f.requested_rps], [tmax, f.requested_rps]] });
      }
    });
    legend(s, fileLegend.concat([["dotted: requested rate", "#555", "dot"]]));
    chart(figure(s, "throughput"), {
      id: "throughput", x: xAxis,
      y: { kind: "lin", min: 0, max: Math.max(top * 1.1, 1), fmt: fmtRate, label: "responses/s" },
      series: series,
    });

    // Errors (and open-loop overflow, dashed, when any).
    h3 = el("h2", {}, s, "Errors");
    h3.style.fontSize = "15px";
    series = [];
    top = 0;
    var anyOverflow = false;
    FILES.forEach(function (f, i) {
      if (!f.intervals.length) return;
      var pts = f.intervals.map(function (iv) { return [mid(iv), perSec(iv.errors, iv)]; });
      pts.forEach(function (p) { top = Math.max(top, p[1] || 0); });
      series.push({ name: f.label + " errors", file: i, color: color(i), pts: pts, dots: true });
      if (f.intervals.some(function (iv) { return iv.overflow > 0; })) {
        anyOverflow = true;
        var ov = f.intervals.map(function (iv) { return [mid(iv), perSec(iv.overflow, iv)]; });
        ov.forEach(function (p) { top = Math.max(top, p[1] || 0); });
        series.push({ name: f.label + " overflow", file: i, color: color(i), dash: "6 4", pts: ov });
      }
    });
    if (top === 0) {
      // A flat line at zero would take a whole plot to say one thing.
      el("p", { "class": "empty", "data-empty": "errors" }, s,
         "No errors or open-loop overflow in any interval.");
    } else {
      legend(s, anyOverflow ? fileLegend.concat([["dashed: open-loop overflow", "#555", "dash"]])
                            : fileLegend);
      chart(figure(s, "errors"), {
        id: "errors", x: xAxis,
        y: { kind: "lin", min: 0, max: top * 1.1, fmt: fmtRate, label: "errors/s" },
        series: series,
      });
    }

    // Latency percentiles per interval.
    h3 = el("h2", {}, s, "Latency (" + LAT.scheduled + ")");
    h3.style.fontSize = "15px";
    series = [];
    var lo = Infinity, hi = 0;
    FILES.forEach(function (f, i) {
      if (!f.intervals.length) return;
      [[0.99, "p99", null], [0.5, "p50", "6 4"]].forEach(function (q) {
        var pts = f.intervals.map(function (iv) {
          var st = iv.latency.scheduled;
          var p = st && st.percentiles.filter(function (x) { return x[0] === q[0]; })[0];
          var v = p ? p[1] : null;
          if (v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
          return [mid(iv), v];
        });
        series.push({ name: f.label + " " + q[1], file: i, color: color(i), dash: q[2], pts: pts,
                      dots: true });
      });
    });
    legend(s, fileLegend.concat([["solid: p99", "#555"], ["dashed: p50", "#555", "dash"]]));
    var yd = hi > 0 ? logDomain(lo, hi) : [1e3, 1e6];
    chart(figure(s, "latency-time"), {
      id: "latency-time", x: xAxis,
      y: { kind: "log", min: yd[0], max: yd[1], fmt: fmtDur, label: "latency" },
      series: series,
    });
  }

  // ---- tables keyed by name, one column per file ----
  function keyedTable(parent, id, head, keys, cell, markDiff) {
    var t = el("table", { id: id }, parent);
    var hr = el("tr", {}, el("thead", {}, t));
    el("th", {}, hr, head);
    FILES.forEach(function (f, i) { var th = el("th", {}, hr); swatch(th, color(i)); th.append(f.label); });
    var body = el("tbody", {}, t);
    keys.forEach(function (k) {
      var tr = el("tr", {}, body);
      el("td", {}, tr, k);
      var texts = FILES.map(function (f, i) { return cell(f, k, i, el("td", {}, tr)); });
      if (markDiff && texts.some(function (v) { return v !== texts[0]; })) tr.className = "diff";
    });
    return t;
  }
  function union(get) {
    var seen = {}, out = [];
    FILES.forEach(function (f) {
      get(f).forEach(function (row) {
        var k = String(row[0]);
        if (!seen[k]) { seen[k] = true; out.push(k); }
      });
    });
    return out;
  }
  function lookup(rows, k) {
    for (var i = 0; i < rows.length; i++) if (String(rows[i][0]) === k) return rows[i][1];
    return null;
  }
  function statusCodes() {
    var s = section("Status codes", "Responses per exact status code, and share of each result's responses.");
    var codes = union(function (f) { return f.status_codes; }).sort();
    if (!codes.length) {
      var any = FILES.some(function (f) { return f.responses > 0; });
      el("p", { "class": "empty" }, s, any ?
         "These results do not record exact status codes; the benchmark.http_Nxx counters " +
         "below count responses by class." : "No responses received.");
      return;
    }
    keyedTable(s, "status-codes", "status", codes, function (f, k, i, td) {
      var n = lookup(f.status_codes, k) || 0;
      var pct = f.responses ? 100 * n / f.responses : 0;
      td.textContent = fmtInt(n) + " (" + fmtPct(pct) + ")";
      var c = k.charAt(0) === "2" ? color(i) : k.charAt(0) === "3" ? "#8a939c" : "#b42318";
      el("span", { "class": "bar", style: "width:" + Math.max(1, pct * 1.2).toFixed(1) +
                   "px;background:" + c }, td);
      return String(n);
    });
  }
  function counters() {
    var s = section("Counters", "Every non-zero counter (summed over workers).");
    var names = union(function (f) { return f.counters; }).sort();
    if (!names.length) { el("p", { "class": "empty" }, s, "No counter was incremented."); return; }
    keyedTable(s, "counters", "counter", names, function (f, k, i, td) {
      var v = lookup(f.counters, k);
      td.textContent = fmtInt(v || 0);
      return String(v);
    });
  }
  function options() {
    var s = section("Options", FILES.length > 1 ?
      "Every option each run was given; highlighted rows differ between results." :
      "Every option the run was given.");
    var keys = union(function (f) { return f.options; });
    if (!keys.length) { el("p", { "class": "empty" }, s, "No options recorded."); return; }
    keyedTable(s, "options", "option", keys, function (f, k, i, td) {
      var v = lookup(f.options, k);
      td.className = "text";
      td.textContent = v == null ? "–" : v;
      return v;
    }, true);
  }

  // ---- machine-readable status: what was drawn, how big, and any errors ----
  function stamp() {
    var figs = document.querySelectorAll("figure[data-plot]");
    for (var i = 0; i < figs.length; i++) {
      var svg = figs[i].querySelector("svg");
      var box = svg ? svg.getBoundingClientRect() : { width: 0, height: 0 };
      figs[i].setAttribute("data-width", Math.round(box.width));
      figs[i].setAttribute("data-height", Math.round(box.height));
    }
    document.body.setAttribute("data-errors", renderErrors.length);
    document.body.setAttribute("data-files", FILES.length);
    document.body.setAttribute("data-render", renderErrors.length ? "error" : "ok");
    var box = document.getElementById("render-errors");
    if (renderErrors.length) {
      if (!box) box = el("pre", { id: "render-errors" }, root);
      box.textContent = "Errors while drawing this report:\n" + renderErrors.join("\n");
    }
  }

  var sub = el("p", { "class": "sub" });
  sub.textContent = FILES.length + (FILES.length === 1 ? " result" : " results") + ": " +
    FILES.map(function (f) { return f.label; }).join(", ") + " · " + DATA.generator;
  document.querySelector("header").appendChild(sub);
  var ns = root.querySelector("noscript");
  if (ns) root.removeChild(ns);
  tip = el("div", { "class": "tip" });
  // Each part draws on its own: one failing still leaves the rest, and the error is recorded.
  [summary, spectrum, histogram, overTime, statusCodes, counters, options].forEach(function (part) {
    try { part(); } catch (e) { renderErrors.push(part.name + ": " + (e && e.stack || e)); }
  });
  stamp();
})();
