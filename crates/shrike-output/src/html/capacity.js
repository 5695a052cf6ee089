/* Shrike report, capacity search: the answers first, then latency against offered load with
 * every trial a point marked pass, fail or invalid, each objective a labelled line of its own
 * colour and each goal's answer a labelled vertical line; for a concurrency search, the
 * throughput each level achieved with the answer marked; then every trial. Several searches
 * (`shrike report a.json b.json`) come side by side: each goal's answers in one table with the
 * change from the first, every search's trials on one latency chart, then each search's own
 * sections under its label. Drawn with the kit in plot.js; records what it drew on the DOM as
 * the result report does (body data-render/data-errors, per plot data-series/data-paths/
 * data-width/data-height). */
(function () {
  var DATA = JSON.parse(document.getElementById("shrike-data").textContent);
  var page = document.getElementById("report");

  // One search's sections into `root`; `tag` keeps plot ids apart when there are several.
  function renderOne(DATA, root, tag) {
  var CAP = DATA.capacity;
  var RATE = CAP.search === "rate";
  var UNIT = RATE ? "/s" : " " + (CAP.unit || "connections");
  function fmtLevel(v) { return RATE ? fmtRate(v) + "/s" : fmtInt(v); }
  function fmtAmount(v) { return RATE ? fmtLevel(v) : fmtInt(v) + UNIT; }
  // Colours: percentiles 0–2, goals' answers from 3, objectives after the goals.
  function goalColor(i) { return color(3 + i); }
  function sloColor(i) { return color(3 + CAP.goals.length + i); }

  function section(title, note) {
    var s = el("section", {}, root);
    el("h2", {}, s, title);
    if (note) el("p", { "class": "note" }, s, note);
    return s;
  }

  // A trial's standing over every goal: pass (all), fail (all), mixed, or invalid.
  function standing(t) {
    if (t.invalid != null || t.verdicts.every(function (v) { return v === "invalid"; })) return "invalid";
    var passes = t.verdicts.filter(function (v) { return v === "pass"; }).length;
    if (passes === t.verdicts.length) return "pass";
    return passes === 0 ? "fail" : "mixed";
  }
  var SHAPE = { pass: "dot", fail: "cross", mixed: "diamond", invalid: "ring" };

  // Responses per second of the passing trials at a level (a concurrency answer's throughput).
  function throughputAt(level) {
    var at = CAP.trials.filter(function (t) { return t.level === level && standing(t) !== "invalid"; });
    if (!at.length) return null;
    return at.reduce(function (a, t) { return a + t.responses_rps; }, 0) / at.length;
  }

  function answers() {
    var s = section("Answers");
    if (!DATA.complete) {
      el("p", { "class": "banner unsettled" }, s,
        "INCOMPLETE: the search was interrupted; these are the best answers known so far.");
    }
    CAP.goals.forEach(function (g) {
      var usable = g.status === "found" || (g.status === "generator_bound" && g.max != null);
      if (!usable) el("p", { "class": "banner " + (g.status === "inconsistent" ||
        g.status === "unfinished" ? "unsettled" : "failed") }, s, g.summary);
    });
    var t = el("table", {}, s);
    var h = el("tr", {}, el("thead", {}, t));
    var cols = ["goal", RATE ? "max rate" : "max concurrency"];
    if (!RATE) cols.push("throughput there");
    cols.concat(["status", "fails at", "trials there"]).forEach(function (c) { el("th", {}, h, c); });
    var body = el("tbody", {}, t);
    CAP.goals.forEach(function (g, i) {
      var tr = el("tr", {}, body);
      var td = el("td", {}, tr);
      // The colour of the goal's answer line in the plots.
      swatch(td, goalColor(i));
      td.append(g.name);
      el("td", {}, tr, g.max == null ? "–" : fmtLevel(g.max));
      if (!RATE) el("td", {}, tr, g.max == null ? "–" : fmtRate(throughputAt(g.max)) + " responses/s");
      el("td", {}, tr, g.status.replace(/_/g, " "));
      el("td", {}, tr, g.failed_at == null ? "–" : fmtLevel(g.failed_at));
      el("td", {}, tr, String(g.trials_at_answer));
    });
    CAP.goals.forEach(function (g) { el("p", { "class": "note" }, s, g.summary); });
  }

  // The answer of each goal as a labelled vertical line over [y0, y1].
  function answerLines(series, y0, y1) {
    CAP.goals.forEach(function (g, i) {
      if (g.max == null) return;
      series.push({ name: "answer " + g.name, file: "answer", color: goalColor(i), ref: true,
        width: 1.5, dash: "6 3", pts: [[g.max, y0], [g.max, y1]], labelRow: i,
        label: (g.status === "found" ? "max " : "passed ") + fmtAmount(g.max) });
    });
  }

  // Every trial's latency (each percentile an objective names, p99 if none) against the load
  // it offered: a point per trial, shaped by its verdict, and a thin line through each
  // level's median so repeated trials at one level are points, not a zigzag.
  function latency() {
    var s = section("Latency against offered load",
      "Latency from the schedule (free of coordinated omission) unless an objective names " +
      "service time. Each trial is a point: ● passed every goal, ✕ failed every goal, ◆ " +
      "passed some, ○ invalid (the load generator was the limit; plotted but never judged). " +
      "Larger points are full-length confirmations. Horizontal lines: the objectives; dashed " +
      "vertical lines: each goal's answer.");
    var fig = el("figure", { "data-plot": "latency-load", id: "plot-latency-load" + tag }, s);
    var trials = CAP.trials.slice().sort(function (a, b) { return a.level - b.level; });
    var metrics = [];
    CAP.slos.forEach(function (o) {
      if (o.metric === "errors" || o.metric === "achieved") return;
      if (metrics.indexOf(o.metric) < 0) metrics.push(o.metric);
    });
    if (!metrics.length) metrics = ["p99"];
    // Each objective's metric as the trial measured it (seconds), or p99 from the schedule.
    function value(t, m) {
      var v = t.objectives && m in t.objectives ? t.objectives[m] : t.latency_s[m];
      return v == null ? null : v * 1e9;
    }
    var conf = trials.filter(function (t) { return t.confirmation; });
    var series = [], items = [], ys = [];
    metrics.forEach(function (m, k) {
      var pts = trials.map(function (t) { return [t.level, value(t, m)]; });
      if (!pts.some(function (p) { return p[1] != null; })) return;
      pts.forEach(function (p) { if (p[1] > 0) ys.push(p[1]); });
      // Median per level over the trials that were judged.
      var levels = [], med = [];
      trials.forEach(function (t) { if (levels.indexOf(t.level) < 0) levels.push(t.level); });
      levels.forEach(function (l) {
        var v = trials.filter(function (t) { return t.level === l && standing(t) !== "invalid"; })
          .map(function (t) { return value(t, m); }).filter(function (x) { return x != null; })
          .sort(function (a, b) { return a - b; });
        med.push([l, v.length ? v[Math.floor(v.length / 2)] : null]);
      });
      series.push({ name: m + " (median per level)", file: "median-" + m, color: color(k),
        width: 1, pts: med });
      series.push({ name: m, file: m, color: color(k), line: false,
        marker: function (i) { return SHAPE[standing(trials[i])]; }, size: 3.2, pts: pts });
      series.push({ name: m + " confirmation", file: "confirmation", color: color(k), ref: true,
        line: false, size: 5.5, marker: function (i) { return SHAPE[standing(conf[i])]; },
        pts: conf.map(function (t) { return [t.level, value(t, m)]; }) });
      items.push([m, color(k), ""]);
    });
    if (!ys.length) { el("p", { "class": "empty" }, s, "No trial measured any latency."); return; }
    var x0 = trials[0].level, x1 = trials[trials.length - 1].level;
    var pad = (x1 - x0) * 0.04 || 1;
    CAP.slos.forEach(function (o, i) {
      if (o.metric === "errors" || o.metric === "achieved") return;
      ys.push(o.bound);
      series.push({ name: "SLO " + o.slo, file: "slo", color: sloColor(i), dash: "2 3", ref: true,
        width: 1.5, pts: [[x0 - pad, o.bound], [x1 + pad, o.bound]], label: o.slo,
        labelAt: "start" });
      items.push(["objective " + o.slo, sloColor(i), "dash"]);
    });
    var yd = logDomain(Math.min.apply(null, ys), Math.max.apply(null, ys));
    answerLines(series, yd[0], yd[1]);
    CAP.goals.forEach(function (g, i) {
      if (g.max != null) items.push(["answer: " + g.name, goalColor(i), "dash"]);
    });
    [["passed every goal", "dot"], ["failed every goal", "cross"], ["passed some goals", "diamond"],
     ["invalid", "ring"]].forEach(function (m) { items.push([m[0], "#5f6b76", "mark-" + m[1]]); });
    chart(fig, {
      id: "latency-load" + tag, title: "latency against offered load",
      x: { kind: "lin", min: Math.max(0, x0 - pad), max: x1 + pad, fmt: fmtLevel,
           label: RATE ? "offered rate (requests/s, all workers)" : (CAP.unit || "connections") + " per worker" },
      y: { kind: "log", min: yd[0], max: yd[1], fmt: fmtDur, label: "latency" },
      series: series,
    });
    legend(s, items);
  }

  // A concurrency search answers in connections (or requests in flight); what a user also
  // needs is the throughput that bought: responses per second against the level.
  function throughput() {
    if (RATE) return;
    var s = section("Throughput against concurrency",
      "Responses per second each trial achieved; dashed vertical lines: each goal's answer.");
    var fig = el("figure", { "data-plot": "throughput-level", id: "plot-throughput-level" + tag }, s);
    var trials = CAP.trials.slice().sort(function (a, b) { return a.level - b.level; });
    if (!trials.length) { el("p", { "class": "empty" }, s, "No trial ran."); return; }
    var pts = trials.map(function (t) { return [t.level, t.responses_rps]; });
    var ymax = Math.max.apply(null, pts.map(function (p) { return p[1]; })) * 1.15 || 1;
    var series = [{ name: "responses/s", file: "throughput", color: color(0), line: false,
      size: 3.2, marker: function (i) { return SHAPE[standing(trials[i])]; }, pts: pts }];
    answerLines(series, 0, ymax);
    var x0 = trials[0].level, x1 = trials[trials.length - 1].level, pad = (x1 - x0) * 0.04 || 1;
    chart(fig, {
      id: "throughput-level" + tag, title: "throughput against concurrency",
      x: { kind: "lin", min: Math.max(0, x0 - pad), max: x1 + pad, fmt: fmtInt,
           label: (CAP.unit || "connections") + " per worker" },
      y: { kind: "lin", min: 0, max: ymax, fmt: fmtRate, label: "responses/s" },
      series: series,
    });
  }

  // Every goal holds an errors objective (the user's, or the default the search states): its
  // bound is drawn against each trial's error share, as the latency bounds are above.
  function errors() {
    var s = section("Errors against offered load",
      "The server's errors (statuses, timeouts, resets, refused connections) over the requests " +
      "tried, each trial; dotted: each errors objective" +
      (CAP.slos.some(function (o) { return o.implied; }) ? " (the default, as no errors " +
        "objective was given)" : "") + "; dashed vertical lines: each goal's answer.");
    var fig = el("figure", { "data-plot": "errors-level", id: "plot-errors-level" + tag }, s);
    var trials = CAP.trials.slice().sort(function (a, b) { return a.level - b.level; });
    if (!trials.length) { el("p", { "class": "empty" }, s, "No trial ran."); return; }
    var pts = trials.map(function (t) { return [t.level, 100 * t.error_ratio]; });
    var bounds = CAP.slos.filter(function (o) { return o.metric === "errors"; });
    var ymax = Math.max.apply(null, pts.map(function (p) { return p[1]; })
      .concat(bounds.map(function (o) { return 100 * o.bound; }))) * 1.15 || 1;
    var series = [{ name: "errors %", file: "errors", color: color(0), line: false,
      size: 3.2, marker: function (i) { return SHAPE[standing(trials[i])]; }, pts: pts }];
    var items = [["errors, each trial", color(0), "mark-dot"]];
    var x0 = trials[0].level, x1 = trials[trials.length - 1].level, pad = (x1 - x0) * 0.04 || 1;
    bounds.forEach(function (o, i) {
      series.push({ name: "SLO " + o.slo, file: "slo", color: sloColor(i), dash: "2 3", ref: true,
        width: 1.5, pts: [[x0 - pad, 100 * o.bound], [x1 + pad, 100 * o.bound]], label: o.slo });
      items.push(["objective " + o.slo + (o.implied ? " (default)" : ""), sloColor(i), "dash"]);
    });
    answerLines(series, 0, ymax);
    chart(fig, {
      id: "errors-level" + tag, title: "errors against offered load",
      x: { kind: "lin", min: Math.max(0, x0 - pad), max: x1 + pad, fmt: fmtLevel,
           label: RATE ? "offered rate (requests/s, all workers)" :
             (CAP.unit || "connections") + " per worker" },
      y: { kind: "lin", min: 0, max: ymax, fmt: function (v) { return fmtPct(v); },
           label: "errors" },
      series: series,
    });
    legend(s, items);
  }

  function trialTable() {
    var s = section("Trials", "* a full-length confirmation trial. Errors are the server's " +
      "(statuses, timeouts, resets, refused connections); overflow is the client's: requests " +
      "due while every connection was busy, never sent.");
    var t = el("table", {}, s);
    var h = el("tr", {}, el("thead", {}, t));
    ["#", "offered", "achieved", "p50", "p99", "p99.9", "service p99", "errors", "overflow", "duration"]
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
      el("td", {}, tr, fmtPct(100 * (x.overflow_ratio || 0)));
      el("td", {}, tr, fmtSecs(x.duration_s));
      x.verdicts.forEach(function (v) { el("td", { "class": "verdict-" + v }, tr, v); });
      if (x.invalid || x.cause) tr.title = x.invalid || x.cause;
    });
  }

  [answers, latency, errors, throughput, trialTable].forEach(function (part) {
    try { part(); } catch (e) { renderErrors.push(part.name + ": " + (e && e.stack || e)); }
  });
  }

  // Each goal (by name) in every search: its answer there, and the change from the first's.
  function sideBySide(inputs) {
    var s = el("section", {}, page);
    el("h2", {}, s, "Side by side");
    var first = inputs[0].doc.capacity;
    var rate = first.search === "rate";
    var mixed = inputs.some(function (x) { return x.doc.capacity.search !== first.search; });
    if (mixed) {
      el("p", { "class": "banner failed" }, s, "These searches answer different questions " +
        "(rate and concurrency): their answers are shown, not compared.");
    }
    inputs.forEach(function (x) {
      if (!x.doc.complete) el("p", { "class": "banner unsettled" }, s,
        "INCOMPLETE: " + x.label + "'s search was interrupted; its answers are the best known so far.");
    });
    var names = [];
    inputs.forEach(function (x) {
      x.doc.capacity.goals.forEach(function (g) { if (names.indexOf(g.name) < 0) names.push(g.name); });
    });
    var t = el("table", { id: "side-by-side" }, s);
    var h = el("tr", {}, el("thead", {}, t));
    el("th", {}, h, "goal");
    inputs.forEach(function (x, j) {
      el("th", {}, h, x.label);
      if (j > 0 && !mixed) el("th", {}, h, "change");
    });
    var body = el("tbody", {}, t);
    names.forEach(function (name) {
      var tr = el("tr", { "data-goal": name }, body);
      el("td", {}, tr, name);
      var base = null;
      inputs.forEach(function (x, j) {
        var cap = x.doc.capacity;
        var g = cap.goals.filter(function (g) { return g.name === name; })[0];
        var usable = g && g.max != null && (g.status === "found" || g.status === "generator_bound");
        var text = !g ? "not a goal" : g.max == null ? "– (" + g.status.replace(/_/g, " ") + ")" :
          (cap.search === "rate" ? fmtRate(g.max) + "/s" : fmtInt(g.max) + " " + (cap.unit || "connections")) +
          (g.status === "found" ? "" : " (" + g.status.replace(/_/g, " ") + ")");
        el("td", { "data-max": g && g.max != null ? String(g.max) : "" }, tr, text);
        if (j === 0) { base = usable ? g.max : null; return; }
        if (mixed) return;
        var change = usable && base ? g.max / base - 1 : null;
        el("td", { "data-change": change == null ? "" : String(change) }, tr,
          change == null ? "–" : (change >= 0 ? "+" : "") + (100 * change).toFixed(1) + "%");
      });
    });
    el("p", { "class": "note" }, s, "Each goal's highest " + (rate ? "rate" : "concurrency") +
      " that met it, in each search; change: from " + inputs[0].label + "'s. A goal whose " +
      "answer is not settled (interrupted, bounded, inconsistent) is shown with its status and " +
      "not compared.");
    if (!mixed) overlay(inputs, s);
  }

  // Every search's trials on one chart of latency against offered load: the first objective's
  // percentile (p99 when none names one), a colour per search, the objectives as dotted lines.
  function overlay(inputs, s) {
    var first = inputs[0].doc.capacity;
    var rate = first.search === "rate";
    var metric = "p99";
    first.slos.some(function (o) {
      if (o.metric === "errors" || o.metric === "achieved") return false;
      metric = o.metric; return true;
    });
    var fig = el("figure", { "data-plot": "latency-load-side-by-side", id: "plot-latency-load-side-by-side" }, s);
    var series = [], items = [], ys = [], xs = [];
    inputs.forEach(function (x, j) {
      var trials = x.doc.capacity.trials.slice().sort(function (a, b) { return a.level - b.level; });
      var pts = trials.map(function (t) {
        var v = t.objectives && metric in t.objectives ? t.objectives[metric] : t.latency_s[metric];
        return [t.level, v == null ? null : v * 1e9];
      });
      pts.forEach(function (p) { xs.push(p[0]); if (p[1] > 0) ys.push(p[1]); });
      series.push({ name: x.label + " " + metric, file: "input-" + (j + 1), color: color(j),
        width: 1.2, dash: j ? "6 3" : null, dots: true, marker: j ? "ring" : "dot", size: 3.2,
        pts: pts });
      items.push([x.label, color(j), j ? "dash" : ""]);
    });
    if (!ys.length) { el("p", { "class": "empty" }, s, "No trial measured any latency."); return; }
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs), pad = (x1 - x0) * 0.04 || 1;
    first.slos.forEach(function (o, i) {
      if (o.metric !== metric) return;
      ys.push(o.bound);
      series.push({ name: "SLO " + o.slo, file: "slo", color: color(inputs.length + i), dash: "2 3",
        ref: true, width: 1.5, pts: [[x0 - pad, o.bound], [x1 + pad, o.bound]], label: o.slo,
        labelAt: "start" });
      items.push(["objective " + o.slo, color(inputs.length + i), "dash"]);
    });
    var yd = logDomain(Math.min.apply(null, ys), Math.max.apply(null, ys));
    chart(fig, {
      id: "latency-load-side-by-side", title: metric + " against offered load, each search",
      x: { kind: "lin", min: Math.max(0, x0 - pad), max: x1 + pad,
           fmt: rate ? function (v) { return fmtRate(v) + "/s"; } : fmtInt,
           label: rate ? "offered rate (requests/s, all workers)" : (first.unit || "connections") + " per worker" },
      y: { kind: "log", min: yd[0], max: yd[1], fmt: fmtDur, label: metric + " latency" },
      series: series,
    });
    legend(s, items);
  }

  var ns = page.querySelector("noscript");
  if (ns) page.removeChild(ns);
  var inputs = DATA.side_by_side || [{ label: null, doc: DATA }];
  var trials = inputs.reduce(function (n, x) { return n + x.doc.capacity.trials.length; }, 0);
  var sub = el("p", { "class": "sub" });
  sub.textContent = inputs.length > 1 ?
    inputs.length + " capacity searches side by side (" + inputs.map(function (x) { return x.label; })
      .join(", ") + "), " + trials + " trials · " + DATA.generator :
    "capacity search (" + DATA.capacity.search + "), " + trials + " trials · " + DATA.generator;
  document.querySelector("header").appendChild(sub);
  if (inputs.length > 1) {
    try { sideBySide(inputs); } catch (e) { renderErrors.push("sideBySide: " + (e && e.stack || e)); }
  }
  inputs.forEach(function (x, j) {
    var box = page;
    if (inputs.length > 1) {
      box = el("div", { "class": "input", "data-input": x.label }, page);
      el("h2", { "class": "input-label" }, box, x.label);
    }
    renderOne(x.doc, box, j ? "-" + (j + 1) : "");
  });
  stampPage(page, { "data-trials": trials, "data-inputs": inputs.length });
})();
