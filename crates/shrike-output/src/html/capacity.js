/* Shrike report, capacity search: latency against offered load with the objectives and the
 * answers marked, then the answers and every trial. Drawn with the kit in plot.js; records
 * what it drew on the DOM as the result report does (body data-render/data-errors, per plot
 * data-series/data-paths/data-width/data-height). */
(function () {
  var DATA = JSON.parse(document.getElementById("shrike-data").textContent);
  var CAP = DATA.capacity;
  var root = document.getElementById("report");
  var RATE = CAP.search === "rate";
  function fmtLevel(v) { return RATE ? fmtRate(v) + "/s" : fmtInt(v); }

  function section(title, note) {
    var s = el("section", {}, root);
    el("h2", {}, s, title);
    if (note) el("p", { "class": "note" }, s, note);
    return s;
  }

  function answers() {
    var s = section("Answers", DATA.complete ? null :
      "INCOMPLETE: the search was interrupted; these are the best answers known so far.");
    var t = el("table", {}, s);
    var h = el("tr", {}, el("thead", {}, t));
    ["goal", RATE ? "max rate" : "max concurrency", "status", "fails at", "trials"].forEach(
      function (c) { el("th", {}, h, c); });
    var body = el("tbody", {}, t);
    CAP.goals.forEach(function (g, i) {
      var tr = el("tr", {}, body);
      var td = el("td", {}, tr);
      // The colour of the goal's answer line in the plot.
      swatch(td, color(i + 3));
      td.append(g.name);
      el("td", {}, tr, g.max == null ? "–" : fmtLevel(g.max));
      el("td", {}, tr, g.status.replace(/_/g, " "));
      el("td", {}, tr, g.failed_at == null ? "–" : fmtLevel(g.failed_at));
      el("td", {}, tr, String(g.trials_at_answer));
    });
    CAP.goals.forEach(function (g) { el("p", { "class": "note" }, s, g.summary); });
  }

  // Latency percentiles of every valid trial against the load it offered; the objectives as
  // horizontal lines, each goal's answer as a vertical one.
  function latency() {
    var s = section("Latency against offered load",
      "Latency from the schedule (free of coordinated omission); dashed: service time p99. " +
      "Horizontal lines: latency objectives; vertical lines: each goal's answer. Invalid " +
      "trials (the generator was the limit) are left out.");
    var fig = el("figure", { "data-plot": "latency-load", id: "plot-latency-load" }, s);
    var trials = CAP.trials.filter(function (t) { return t.invalid == null && t.latency_s.p50 != null; })
      .slice().sort(function (a, b) { return a.level - b.level; });
    if (!trials.length) { el("p", { "class": "empty" }, s, "No valid trial measured any latency."); return; }
    var series = [], items = [];
    [["p50", "p50"], ["p99", "p99"], ["p999", "p99.9"]].forEach(function (q, i) {
      series.push({ name: q[1], file: q[0], color: color(i), dots: true,
        pts: trials.map(function (t) { return [t.level, t.latency_s[q[0]] * 1e9]; }) });
      items.push([q[1], color(i), ""]);
    });
    series.push({ name: "service p99", file: "service", color: color(0), dash: "5 4",
      pts: trials.map(function (t) { return [t.level, t.service_s.p99 * 1e9]; }) });
    items.push(["service p99", color(0), "dash"]);
    var ys = [];
    series.forEach(function (se) { se.pts.forEach(function (p) { if (p[1] > 0) ys.push(p[1]); }); });
    var x0 = trials[0].level, x1 = trials[trials.length - 1].level;
    CAP.slos.forEach(function (o) {
      if (o.metric === "errors" || o.metric === "achieved") return;
      ys.push(o.bound);
      series.push({ name: "SLO " + o.slo, file: "slo", color: "#666", dash: "2 3", ref: true,
        pts: [[x0, o.bound], [x1, o.bound]] });
    });
    var yd = logDomain(Math.min.apply(null, ys), Math.max.apply(null, ys));
    CAP.goals.forEach(function (g, i) {
      if (g.max == null) return;
      series.push({ name: "answer " + g.name, file: "answer", color: color(i + 3), ref: true,
        width: 1.5, pts: [[g.max, yd[0]], [g.max, yd[1]]] });
      items.push(["answer: " + g.name, color(i + 3), ""]);
    });
    var pad = (x1 - x0) * 0.04 || 1;
    chart(fig, {
      id: "latency-load", title: "latency against offered load",
      x: { kind: "lin", min: Math.max(0, x0 - pad), max: x1 + pad, fmt: fmtLevel,
           label: RATE ? "offered rate (requests/s)" : (CAP.unit || "connections") + " per worker" },
      y: { kind: "log", min: yd[0], max: yd[1], fmt: fmtDur, label: "latency" },
      series: series,
    });
    legend(s, items);
  }

  function trials() {
    var s = section("Trials", "* a full-length confirmation trial.");
    var t = el("table", {}, s);
    var h = el("tr", {}, el("thead", {}, t));
    ["#", "offered", "achieved", "p50", "p99", "p99.9", "service p99", "errors", "duration"]
      .concat(CAP.goals.map(function (g, i) { return "goal " + (i + 1); }))
      .forEach(function (c) { el("th", {}, h, c); });
    var body = el("tbody", {}, t);
    CAP.trials.forEach(function (x, i) {
      var tr = el("tr", { "class": x.invalid ? "invalid" : "" }, body);
      el("td", {}, tr, (i + 1) + (x.confirmation ? "*" : ""));
      el("td", {}, tr, fmtLevel(x.level));
      el("td", {}, tr, fmtRate(x.achieved_rps) + "/s");
      ["p50", "p99", "p999"].forEach(function (q) {
        el("td", {}, tr, fmtDur(x.latency_s[q] == null ? null : x.latency_s[q] * 1e9));
      });
      el("td", {}, tr, fmtDur(x.service_s.p99 == null ? null : x.service_s.p99 * 1e9));
      el("td", {}, tr, fmtPct(100 * x.error_ratio));
      el("td", {}, tr, fmtSecs(x.duration_s));
      x.verdicts.forEach(function (v) { el("td", { "class": "verdict-" + v }, tr, v); });
      if (x.invalid) tr.title = x.invalid;
    });
  }

  function stamp() { stampPage(root, { "data-trials": CAP.trials.length }); }

  var sub = el("p", { "class": "sub" });
  sub.textContent = "capacity search (" + CAP.search + "), " + CAP.trials.length +
    " trials · " + DATA.generator;
  document.querySelector("header").appendChild(sub);
  var ns = root.querySelector("noscript");
  if (ns) root.removeChild(ns);
  [answers, latency, trials].forEach(function (part) {
    try { part(); } catch (e) { renderErrors.push(part.name + ": " + (e && e.stack || e)); }
  });
  stamp();
})();
