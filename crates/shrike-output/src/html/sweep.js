/* Shrike report, sweep. Over connections: throughput against connections with the fitted
 * Universal Scalability Law drawn over the points, p50/p99 against connections, server CPU on
 * an axis up to the cores the server may use with a 90 % line. Over rates: p50/p99 against
 * the offered rate, and the achieved rate against it beside the y = x line. Then the findings
 * and a table of every point. A comparison draws the candidate dashed with hollow markers, so
 * both stay visible where they overlap. Drawn with the kit in plot.js; records what it drew on
 * the DOM as the result report does. */
(function () {
  var DATA = JSON.parse(document.getElementById("shrike-data").textContent);
  var SW = DATA.sweep;
  var root = document.getElementById("report");
  var RATE = SW.axis === "rate";
  var AXIS = RATE ? "offered rate (requests/s, all workers)" : "connections per worker";

  function section(title, note) {
    var s = el("section", {}, root);
    el("h2", {}, s, title);
    if (note) el("p", { "class": "note" }, s, note);
    return s;
  }
  function mean(xs) { return xs.reduce(function (a, b) { return a + b; }, 0) / xs.length; }
  function sd(xs) {
    if (xs.length < 2) return 0;
    var m = mean(xs);
    return Math.sqrt(xs.reduce(function (a, x) { return a + (x - m) * (x - m); }, 0) / (xs.length - 1));
  }
  function byInstance() {
    return SW.instances.map(function (name) {
      return SW.points.filter(function (p) { return p.instance === name; })
        .sort(function (a, b) { return a.level - b.level; });
    });
  }
  // Instance i's style: the baseline solid with filled markers, the candidate dashed with
  // hollow ones, so one never hides the other.
  function style(i) { return i === 0 ? { dash: null, marker: "dot" } : { dash: "7 4", marker: "ring" }; }
  function pick(p, f) {
    var v = p.iterations.map(f).filter(function (x) { return x != null && isFinite(x); });
    return v.length ? { mean: mean(v), sd: sd(v) } : null;
  }
  // The grid as the x axis: its own levels as ticks, linear (a log scale makes linear
  // scaling look exponential) unless the report was asked for log axes and the grid spans
  // 8× or more, with a margin that keeps the end points off the frame.
  function gridAxis() {
    var levels = [];
    SW.points.forEach(function (p) { if (levels.indexOf(p.level) < 0) levels.push(p.level); });
    levels.sort(function (a, b) { return a - b; });
    var x0 = levels[0], x1 = levels[levels.length - 1];
    var log = !!DATA.log_axes && x0 > 0 && x1 / x0 >= 8;
    var min = log ? x0 / 1.25 : Math.max(0, x0 - (x1 - x0) * 0.05 - (x1 === x0 ? 1 : 0));
    var max = log ? x1 * 1.25 : x1 + (x1 - x0) * 0.05 + (x1 === x0 ? 1 : 0);
    var ticks = levels.length <= 14 ? levels : null;
    return { kind: log ? "log" : "lin", min: min, max: max, ticks: ticks,
             fmt: fmtInt, label: AXIS };
  }

  // Mean over iterations per point, ±sd bars as reference segments, one series per instance.
  function perPoint(f, series, items, ys, name) {
    byInstance().forEach(function (pts, i) {
      var st = style(i);
      var vals = pts.map(function (p) { var v = pick(p, f); return [p.level, v]; });
      series.push({ name: SW.instances[i] + (name ? " " + name : ""), file: SW.instances[i],
        color: color(i), dash: st.dash, dots: true, marker: st.marker, size: 3,
        pts: vals.map(function (v) { return [v[0], v[1] && v[1].mean]; }) });
      vals.forEach(function (v) {
        if (!v[1]) return;
        ys.push(v[1].mean + v[1].sd);
        if (v[1].sd > 0) series.push({ name: "sd", file: "bar", color: color(i), ref: true,
          width: 1.5, pts: [[v[0], v[1].mean - v[1].sd], [v[0], v[1].mean + v[1].sd]] });
      });
      items.push([SW.instances[i] + (name ? " " + name : ""), color(i), st.dash ? "dash" : ""]);
    });
  }

  function throughput() {
    var s = section("Throughput against connections",
      "Mean over iterations, bars ± one standard deviation; the thin line is the fitted " +
      "Universal Scalability Law, drawn only where it fits (R² ≥ 0.9, four levels or more).");
    var fig = el("figure", { "data-plot": "throughput", id: "plot-throughput" }, s);
    var series = [], items = [], ys = [0];
    perPoint(function (it) { return it.throughput_rps; }, series, items, ys);
    var ax = gridAxis();
    (DATA.peaks || []).forEach(function (pk) {
      var i = SW.instances.indexOf(pk.instance), u = pk.usl;
      if (!u || !u.fits) return;
      var pts = [];
      for (var k = 0; k <= 80; k++) {
        var c = ax.kind === "log" ? ax.min * Math.pow(ax.max / ax.min, k / 80)
                                  : ax.min + (ax.max - ax.min) * k / 80;
        if (c < 1 / SW.workers) continue;
        var n = c * SW.workers;
        pts.push([c, u.lambda * n / (1 + u.sigma * (n - 1) + u.kappa * n * (n - 1))]);
      }
      series.push({ name: pk.instance + " USL", file: "usl-" + pk.instance, color: color(i),
        width: 1, dash: "2 2", pts: pts });
      items.push([pk.instance + " USL fit (R² " + u.r2.toFixed(2) + ")", color(i), "dot"]);
    });
    chart(fig, {
      id: "throughput", title: "throughput",
      x: ax,
      y: { kind: "lin", min: 0, max: Math.max.apply(null, ys) * 1.1 || 1, fmt: fmtRate,
           label: "responses/s" },
      series: series,
    });
    legend(s, items);
  }

  // p50 and p99 (from the schedule) against the grid: for a rate sweep the plot that answers
  // it, for a connections sweep where the latency went as the throughput flattened.
  function latency() {
    var s = section(RATE ? "Latency against offered rate" : "Latency against connections",
      "Latency from the schedule, mean over iterations; p50 thin and dotted with diamonds, " +
      "p99 thick." +
      (RATE ? " ✕: a point with server errors." : ""));
    var fig = el("figure", { "data-plot": "latency-load", id: "plot-latency-load" }, s);
    var series = [], items = [], ys = [];
    byInstance().forEach(function (pts, i) {
      var st = style(i);
      // p50 and p99 differ in width, dash and marker, not in width alone.
      [["p50", 1.2, "2 3", "diamond"], ["p99", 2.4, st.dash, st.marker]].forEach(function (q) {
        var vals = pts.map(function (p) {
          var v = pick(p, function (it) { return it.latency_s[q[0]]; });
          return [p.level, v && v.mean * 1e9];
        });
        vals.forEach(function (v) { if (v[1] > 0) ys.push(v[1]); });
        var errs = pts.map(function (p) {
          return p.iterations.some(function (it) { return it.errors > 0; }); });
        series.push({ name: SW.instances[i] + " " + q[0], file: SW.instances[i] + "-" + q[0],
          color: color(i), dash: q[2], width: q[1], dots: true, size: 3,
          marker: function (k) { return errs[k] ? "cross" : q[3]; }, pts: vals });
        items.push([SW.instances[i] + " " + q[0], color(i), "mark-" + q[3]]);
      });
    });
    if (!ys.length) { el("p", { "class": "empty" }, s, "No point measured any latency."); return; }
    var ylo = Math.min.apply(null, ys), yhi = Math.max.apply(null, ys);
    var yd = DATA.log_axes ? logDomain(ylo, yhi) : [0, yhi * 1.1];
    chart(fig, {
      id: "latency-load", title: "latency",
      x: gridAxis(),
      y: { kind: DATA.log_axes ? "log" : "lin", min: yd[0], max: yd[1], fmt: fmtDur,
           label: "latency" },
      series: series,
    });
    legend(s, items);
  }

  // A rate sweep: what was achieved against what was offered, beside y = x.
  function achieved() {
    var s = section("Achieved against offered rate",
      "Responses per second; the grey line is y = x, where every offered request is answered.");
    var fig = el("figure", { "data-plot": "achieved", id: "plot-achieved" }, s);
    var series = [], items = [], ys = [0];
    perPoint(function (it) { return it.throughput_rps; }, series, items, ys);
    var ax = gridAxis();
    ys.push(ax.max);
    series.push({ name: "offered", file: "offered", color: "#9aa5b1", ref: true, width: 1,
      dash: "3 3", pts: [[ax.min, ax.min], [ax.max, ax.max]] });
    items.push(["y = x", "#9aa5b1", "dash"]);
    chart(fig, {
      id: "achieved", title: "achieved rate", x: ax,
      y: { kind: "lin", min: 0, max: Math.max.apply(null, ys) * 1.05, fmt: fmtRate,
           label: "responses/s" },
      series: series,
    });
    legend(s, items);
  }

  function serverCpu() {
    var cores = SW.server_cores;
    var s = section("Server CPU",
      "Cores the server used, every process and thread, mean over iterations" +
      (cores ? "; the axis ends at the " + cores + " cores the server may use, the dashed " +
       "line marks 90 % of them (saturated)." : "; the cores it may use are unknown."));
    var fig = el("figure", { "data-plot": "server-cpu", id: "plot-server-cpu" }, s);
    var series = [], items = [], ys = [0];
    perPoint(function (it) { return it.server.cpu_cores; }, series, items, ys);
    var ax = gridAxis();
    var ymax = Math.max(Math.max.apply(null, ys) * 1.1, cores || 0) || 1;
    if (cores) {
      series.push({ name: "90%", file: "saturated", color: "#b42318", ref: true, width: 1,
        dash: "5 4", pts: [[ax.min, 0.9 * cores], [ax.max, 0.9 * cores]],
        label: "90% of " + cores + " cores" });
    }
    chart(fig, {
      id: "server-cpu", title: "server CPU", x: ax,
      y: { kind: "lin", min: 0, max: ymax, fmt: function (v) { return sig(v, 3); }, label: "cores" },
      series: series,
    });
    legend(s, items);
  }

  function findings() {
    var s = section("Findings");
    if (DATA.failed) el("p", { "class": "banner failed" }, s, "FAILED: " + DATA.failed);
    else if (!DATA.complete) el("p", { "class": "banner unsettled" }, s,
      "INCOMPLETE: the sweep was interrupted; these are the points measured so far.");
    (DATA.peaks || []).forEach(function (p) {
      var u = p.usl, level = p.connections != null ? p.connections : p.rate;
      var what = p.peaked === false ?
        ": STILL RISING at the grid's end (extend the grid to find the peak): " : ": peak ";
      el("p", {}, s, p.instance + what + fmtRate(p.throughput_rps.mean) + " ± " +
        sig(p.throughput_rps.sd, 2) + " responses/s at " + (RATE ? fmtRate(level) + "/s" :
        level + " connections per worker") + ", p99 " + fmtDur(p.p99_s * 1e9) +
        (p.server_cpu_cores != null ? ", server CPU " + p.server_cpu_cores.toFixed(2) + " cores" : "") +
        (p.saturated === false ? " — the server never saturated its CPU" : ""));
      if (!u) return;
      if (u.fits) {
        var peak = u.predicted_peak_concurrency;
        el("p", { "class": "note" }, s, "USL: λ " + fmtRate(u.lambda) + "/s, σ " +
          u.sigma.toFixed(4) + ", κ " + u.kappa.toExponential(2) + ", R² " + u.r2.toFixed(3) +
          "; " + (u.predicted_peak_beyond_grid ?
            "predicted peak not stated: it lies beyond twice the grid's largest concurrency" :
          peak == null ? "no predicted peak (κ = 0: throughput only flattens)" :
          "predicted peak at " + sig(peak / SW.workers, 3) + " connections per worker"));
      } else {
        el("p", { "class": "note" }, s, "USL: no fit, no predicted peak: " + u.why);
      }
    });
    var c = DATA.comparison;
    if (c) {
      ["throughput", "p50", "p99"].forEach(function (k) {
        var x = c[k];
        var pct = function (v) { return (v >= 0 ? "+" : "") + (100 * v).toFixed(1) + "%"; };
        el("p", {}, s, SW.instances[1] + " " + k + " at " + c.level + ": " + (x == null ? "–" :
          pct(x.relative) + " (95% CI " + pct(x.ci95[0]) + " to " + pct(x.ci95[1]) + ")" +
          (x.within_noise ? ": within noise" : "")));
      });
    }
  }

  function table() {
    var s = section("Every point", "Mean over iterations (throughput ± standard deviation); " +
      "errors are the server's, summed over iterations.");
    var t = el("table", {}, s);
    var h = el("tr", {}, el("thead", {}, t));
    ["instance", RATE ? "rate" : "connections", "throughput", "± sd", "p50", "p99", "errors",
     "server CPU", "server RSS", "ctx switches/s", "client CPU", "iterations"]
      .forEach(function (c) { el("th", {}, h, c); });
    var body = el("tbody", {}, t);
    byInstance().forEach(function (pts) {
      pts.forEach(function (p) {
        var tr = el("tr", {}, body);
        var tp = pick(p, function (it) { return it.throughput_rps; });
        var v = function (f, fmt) { var x = pick(p, f); return x ? fmt(x.mean) : "–"; };
        el("td", {}, tr, p.instance);
        el("td", {}, tr, RATE ? fmtRate(p.level) + "/s" : String(p.level));
        el("td", {}, tr, tp ? fmtRate(tp.mean) + "/s" : "–");
        el("td", {}, tr, tp ? fmtRate(tp.sd) : "–");
        el("td", {}, tr, v(function (it) { return it.latency_s.p50; }, function (x) { return fmtDur(x * 1e9); }));
        el("td", {}, tr, v(function (it) { return it.latency_s.p99; }, function (x) { return fmtDur(x * 1e9); }));
        el("td", {}, tr, fmtInt(p.iterations.reduce(function (a, it) { return a + it.errors; }, 0)));
        el("td", {}, tr, v(function (it) { return it.server.cpu_cores; }, function (x) { return x.toFixed(2); }));
        el("td", {}, tr, v(function (it) { return it.server.rss_max_bytes; },
          function (x) { return (x / 1048576).toFixed(1) + " MiB"; }));
        el("td", {}, tr, v(function (it) { return it.server.ctx_switches_per_s; }, fmtInt));
        el("td", {}, tr, v(function (it) { return it.client_cpu_cores; }, function (x) { return x.toFixed(2); }));
        el("td", {}, tr, String(p.iterations.length));
      });
    });
  }

  function stamp() { stampPage(root, { "data-points": SW.points.length }); }

  var sub = el("p", { "class": "sub" });
  sub.textContent = "sweep over " + SW.axis + ", " + SW.instances.join(" vs ") + " · " + DATA.generator;
  document.querySelector("header").appendChild(sub);
  var ns = root.querySelector("noscript");
  if (ns) root.removeChild(ns);
  var parts = RATE ? [findings, latency, achieved, serverCpu, table]
                   : [findings, throughput, latency, serverCpu, table];
  parts.forEach(function (part) {
    try { part(); } catch (e) { renderErrors.push(part.name + ": " + (e && e.stack || e)); }
  });
  stamp();
})();
