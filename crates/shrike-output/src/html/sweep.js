/* Shrike report, sweep: throughput and server CPU against the grid (one line per instance,
 * error bars from iterations), latency percentiles at each instance's peak, the findings and
 * every point. Drawn with the kit in plot.js; records what it drew on the DOM as the result
 * report does. */
(function () {
  var DATA = JSON.parse(document.getElementById("shrike-data").textContent);
  var SW = DATA.sweep;
  var root = document.getElementById("report");
  var AXIS = SW.axis === "rate" ? "offered rate (requests/s)" : "connections per worker";

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

  // A value per point (mean over iterations) with ±sd bars drawn as reference segments.
  function plotOver(id, title, ylabel, fmt, pick) {
    var s = section(title, "Mean over iterations; bars: ± one standard deviation.");
    var fig = el("figure", { "data-plot": id, id: "plot-" + id }, s);
    var series = [], items = [], ys = [0], xs = [];
    byInstance().forEach(function (pts, i) {
      var vals = pts.map(function (p) {
        var v = p.iterations.map(pick).filter(function (x) { return x != null && isFinite(x); });
        return [p.level, v.length ? mean(v) : null, v.length ? sd(v) : 0];
      });
      series.push({ name: SW.instances[i], file: SW.instances[i], color: color(i), dots: true,
        pts: vals.map(function (v) { return [v[0], v[1]]; }) });
      vals.forEach(function (v) {
        xs.push(v[0]);
        if (v[1] == null) return;
        ys.push(v[1] + v[2]);
        series.push({ name: "sd", file: "bar", color: color(i), ref: true, width: 1.5,
          pts: [[v[0], v[1] - v[2]], [v[0], v[1] + v[2]]] });
      });
      items.push([SW.instances[i], color(i), ""]);
    });
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    var log = x1 / Math.max(x0, 1) >= 8;
    var xd = log ? logDomain(x0, x1) : [Math.max(0, x0 - 1), x1 + 1];
    chart(fig, {
      id: id, title: title,
      x: { kind: log ? "log" : "lin", min: xd[0], max: xd[1], fmt: fmtInt, label: AXIS },
      y: { kind: "lin", min: 0, max: Math.max.apply(null, ys) * 1.1 || 1, fmt: fmt, label: ylabel },
      series: series,
    });
    legend(s, items);
  }

  function findings() {
    var s = section("Findings", DATA.complete ? null :
      "INCOMPLETE: the sweep was interrupted; these are the points measured so far.");
    (DATA.peaks || []).forEach(function (p, i) {
      var u = p.usl;
      el("p", {}, s, p.instance + ": peak " + fmtRate(p.throughput_rps.mean) + " ± " +
        fmtRate(p.throughput_rps.sd) + " responses/s at " + (p.connections || p.rate) + ", p99 " +
        fmtDur(p.p99_s * 1e9) + (p.server_cpu_cores != null ? ", server CPU " +
        p.server_cpu_cores.toFixed(2) + " cores" : "") + (p.saturated === false ?
        " — the server never saturated its CPU" : ""));
      if (u) el("p", { "class": "note" }, s, "USL: λ " + fmtRate(u.lambda) + "/s, σ " +
        u.sigma.toFixed(4) + ", κ " + u.kappa.toExponential(2) + ", R² " + u.r2.toFixed(3) +
        ", predicted peak " + (u.predicted_peak_concurrency == null ? "none" :
        fmtRate(u.predicted_peak_concurrency)) + " connections in all");
    });
    var c = DATA.comparison;
    if (c) {
      ["throughput", "p50", "p99"].forEach(function (k) {
        var x = c[k];
        el("p", {}, s, "candidate " + k + " at " + c.level + ": " + (x == null ? "–" :
          fmtPct(100 * x.relative).replace(/^(?!-)/, "+") + " (95% CI " + (100 * x.ci95[0]).toFixed(1) +
          "% to " + (100 * x.ci95[1]).toFixed(1) + "%)" + (x.within_noise ? ": within noise" : "")));
      });
    }
  }

  // Latency percentiles at each instance's peak, one line per instance.
  function latencyAtPeak() {
    var s = section("Latency at the peak", "Latency from the schedule, mean over iterations.");
    var fig = el("figure", { "data-plot": "latency-peak", id: "plot-latency-peak" }, s);
    var qs = ["p50", "p90", "p99", "p999", "max"], series = [], ys = [], items = [];
    (DATA.peaks || []).forEach(function (pk, i) {
      var level = pk.connections != null ? pk.connections : pk.rate;
      var p = SW.points.filter(function (x) { return x.instance === pk.instance && x.level === level; })[0];
      if (!p) return;
      var pts = qs.map(function (q, k) {
        var v = p.iterations.map(function (it) { return it.latency_s[q]; }).filter(function (x) { return x != null; });
        var m = v.length ? mean(v) * 1e9 : null;
        if (m) ys.push(m);
        return [k, m];
      });
      series.push({ name: pk.instance, file: pk.instance, color: color(i), dots: true, pts: pts });
      items.push([pk.instance + " at " + level, color(i), ""]);
    });
    if (!ys.length) { el("p", { "class": "empty" }, s, "No latency at the peak."); return; }
    var yd = logDomain(Math.min.apply(null, ys), Math.max.apply(null, ys));
    chart(fig, {
      id: "latency-peak", title: "latency at the peak",
      x: { kind: "lin", min: -0.2, max: 4.2, ticks: [0, 1, 2, 3, 4],
           fmt: function (v) { return ["p50", "p90", "p99", "p99.9", "max"][Math.round(v)] || ""; },
           label: "percentile" },
      y: { kind: "log", min: yd[0], max: yd[1], fmt: fmtDur, label: "latency" },
      series: series,
    });
    legend(s, items);
  }

  function stamp() { stampPage(root, { "data-points": SW.points.length }); }

  var sub = el("p", { "class": "sub" });
  sub.textContent = "sweep over " + SW.axis + ", " + SW.instances.join(" vs ") + " · " + DATA.generator;
  document.querySelector("header").appendChild(sub);
  var ns = root.querySelector("noscript");
  if (ns) root.removeChild(ns);
  [findings,
   function throughput() { plotOver("throughput", "Throughput", "responses/s", fmtRate,
     function (it) { return it.throughput_rps; }); },
   function serverCpu() { plotOver("server-cpu", "Server CPU", "cores",
     function (v) { return sig(v, 3); }, function (it) { return it.server.cpu_cores; }); },
   latencyAtPeak].forEach(function (part) {
    try { part(); } catch (e) { renderErrors.push(part.name + ": " + (e && e.stack || e)); }
  });
  stamp();
})();
