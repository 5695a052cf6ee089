/* Shrike report, part 2: draws the embedded results as tables and plots with the kit in
 * plot.js. After drawing it records what it drew on the DOM (body data-render/data-errors,
 * per plot data-series/data-paths/data-width/data-height/data-ymax), so tests and scripts can
 * check a rendered report without a screenshot. */
(function () {
  var DATA = JSON.parse(document.getElementById("shrike-data").textContent);
  var FILES = DATA.files;
  var LAT = { scheduled: "scheduled-to-response", service: "service time" };
  var root = document.getElementById("report");

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
  function figure(parent, id) {
    return el("figure", { "data-plot": id, id: "plot-" + id }, parent);
  }
  function empty(parent, text) { el("p", { "class": "empty" }, parent, text); }
  // One header cell per result, with its colour.
  function fileHeads(tr) {
    FILES.forEach(function (f, i) {
      var th = el("th", {}, tr);
      swatch(th, color(i));
      th.append(f.label);
    });
  }

  // ---- summary table: one column per file, then candidate / baseline ratios ----
  function pctOf(stat, q) {
    var p = stat.summary.filter(function (s) { return s[0] === q; })[0];
    return stat.count ? p && p[1] : null;
  }
  function summary() {
    var s = section("Summary", FILES.length > 1 ?
      "The first result (" + FILES[0].label + ") is the baseline; ratios are each result " +
      "divided by it, coloured when they differ by more than 5%." : null);
    // A row showing result field `key` with `fmt`; `dir` says whether more is better (1),
    // worse (-1) or neither (0) when colouring ratios.
    var field = function (label, key, fmt, dir) {
      return [label, function (f) { return fmt(f[key]); }, function (f) { return f[key]; }, null,
              dir];
    };
    var rows = [
      ["Target", function (f) { return f.target || "–"; }, null, "text"],
      ["Protocol", function (f) { return f.protocol || "–"; }, null, "text"],
      ["Started", function (f) { return f.started.replace("T", " ").replace(/\.\d+Z$/, "Z"); },
       null, "text"],
      field("Duration", "duration_s", fmtSecs),
      ["Workers", function (f) {
        // A fleet's result has an entry per generator: say both.
        return f.generators ? f.generators.length + " generators × " + fmtInt(f.workers) + " workers"
                            : fmtInt(f.workers);
      }, function (f) { return f.workers; }, null, 0],
      ["Requested rate (/s)", function (f) {
        return f.replay ? "as captured, at " + f.replay.time_scale + "× speed"
                        : fmtRate(f.requested_rps);
      }, function (f) { return f.requested_rps; }, null, 0],
      ["Achieved rate (/s)", function (f) { return fmtRate(f.achieved_rps); },
       function (f) { return f.achieved_rps; }, null,
       // More is better only at the same offered rate; otherwise the ratio is just arithmetic.
       function (f) { return f.requested_rps === FILES[0].requested_rps ? 1 : 0; }],
      field("Requests sent", "requests", fmtInt),
      field("Responses", "responses", fmtInt),
      field("Errors", "errors", fmtInt, -1).concat([function (f) {
         var k = Object.keys(f.error_counters);
         return k.length ? k.map(function (n) { return n + " " + f.error_counters[n]; }).join(", ")
                         : "4xx, 5xx, other status, resets, connection failures";
      }]),
      field("Open-loop overflow", "overflow", fmtInt, -1),
    ];
    // A replay's jobs and its canary diff lead what it adds to a run's rows.
    var replayed = function (key, fmt, dir) {
      return [key[0], function (f) { return f.replay ? fmt(f.replay[key[1]]) : "–"; },
              function (f) { return f.replay ? f.replay[key[1]] : null; }, null, dir];
    };
    if (FILES.some(function (f) { return f.replay; })) rows = rows.slice(0, 3).concat([
      replayed(["Jobs started", "jobs_started"], fmtInt),
      replayed(["Jobs completed", "jobs_completed"], fmtInt, 1),
      replayed(["Answers as captured", "canary_matched"], fmtInt, 1),
      replayed(["Answers that differ", "canary_differed"], fmtInt, -1),
    ].concat([[0.5, "p50"], [0.99, "p99"], [1, "max"]].map(function (q) {
      // How late requests left their captured time: whether the replay kept the capture's.
      var late = function (f) {
        var p = f.replay && f.replay.lateness.filter(function (x) { return x[0] === q[0]; })[0];
        return p ? p[1] : null;
      };
      return ["Send lateness " + q[1], function (f) { return fmtDur(late(f)); }, late, null, -1];
    })), rows.slice(3));
    rows = rows.concat([
      ["Termination", function (f) { return f.termination.description; }, null, "text"],
    ]);
    [["scheduled", "Scheduled-to-response latency (coordinated-omission-free)"],
     ["service", "Service time (request sent to response end)"]].forEach(function (g) {
      rows.push([g[1]]);
      var qs = [[0.5, "p50"], [0.9, "p90"], [0.99, "p99"], [0.999, "p99.9"], [1, "max"]];
      // Latency from the schedule holds the client's own lateness: between runs that allowed
      // it differently (--max-lateness, the idle strategy) a change there is the client's
      // choice, not the server's regression, so it is shown uncoloured.
      var dir = g[0] !== "scheduled" ? -1 : function (f) {
        return JSON.stringify(f.pacing) === JSON.stringify(FILES[0].pacing) ? -1 : 0;
      };
      var why = g[0] !== "scheduled" ? undefined : function (f) {
        return JSON.stringify(f.pacing) === JSON.stringify(FILES[0].pacing) ? ""
          : "not compared: the runs allowed the client different send lateness " +
            "(--max-lateness, idle strategy)";
      };
      qs.forEach(function (q) {
        var get = function (f) { return pctOf(f.latency[g[0]], q[0]); };
        rows.push([q[1], function (f) { return fmtDur(get(f)); }, get, null, dir, why]);
      });
      var mean = function (f) { return f.latency[g[0]].count ? f.latency[g[0]].mean : null; };
      rows.push(["mean", function (f) { return fmtDur(mean(f)); }, mean, null, dir, why]);
    });
    var t = el("table", { id: "summary" }, s);
    var hr = el("tr", {}, el("thead", {}, t));
    el("th", {}, hr, "");
    fileHeads(hr);
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
        var dir = typeof r[4] === "function" ? r[4](f) : r[4];
        if (a === 0) {
          // From none to some (errors appearing) is the change that matters most.
          td.textContent = b === 0 ? "1.00×" : "∞";
          if (b !== 0 && dir) td.className = (b > 0) === (dir > 0) ? "better" : "worse";
          return;
        }
        var ratio = b / a;
        td.textContent = (ratio >= 100 ? ratio.toFixed(0) : ratio.toFixed(2)) + "×";
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
        pts.forEach(function (p) {
          if (p[1] > 0) lo = Math.min(lo, p[1]);
          hi = Math.max(hi, p[1]);
        });
        maxX = Math.max(maxX, pts[pts.length - 1][0]);
        series.push({ name: f.label + " " + LAT[k], file: i, color: color(i),
                      dash: k === "service" ? "6 4" : null, pts: pts });
      });
    });
    if (!series.length) { empty(s, "No latency samples recorded."); return; }
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
    if (!h.count) { empty(s, "No latency samples recorded."); return; }
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
      var d = f.intervals.map(function (iv) { return iv.duration_s; });
      d.sort(function (a, b) { return a - b; });
      var usual = d.length ? d[Math.floor(d.length / 2)] : 0;
      f.intervals.forEach(function (iv, j) {
        iv.sliver = j === f.intervals.length - 1 && iv.duration_s < usual / 4;
      });
    });
    var perSec = function (n, iv) {
      return iv.duration_s > 0 && !iv.sliver ? n / iv.duration_s : null;
    };
    var fileLegend = FILES.map(function (f, i) { return [f.label, color(i)]; })
      .filter(function (item, i) { return FILES[i].intervals.length; });

    // Throughput, with each result's requested rate as a dotted reference.
    el("h3", {}, s, "Throughput");
    var series = [], top = 0;
    FILES.forEach(function (f, i) {
      if (!f.intervals.length) return;
      var pts = f.intervals.map(function (iv) { return [mid(iv), perSec(iv.responses, iv)]; });
      pts.forEach(function (p) { top = Math.max(top, p[1] || 0); });
      series.push({ name: f.label, file: i, color: color(i), pts: pts, dots: true });
      if (f.requested_rps) {
        top = Math.max(top, f.requested_rps);
        series.push({ name: f.label + " requested", file: i, color: color(i), ref: true,
                      dash: "2 4", width: 1.5,
                      pts: [[0, f.requested_rps], [tmax, f.requested_rps]] });
      }
    });
    // The requested-rate entry only where a line is drawn for it (a replay requests none).
    var anyRequested = FILES.some(function (f) { return f.intervals.length && f.requested_rps; });
    legend(s, anyRequested ? fileLegend.concat([["dotted: requested rate", "#555", "dot"]])
                           : fileLegend);
    chart(figure(s, "throughput"), {
      id: "throughput", x: xAxis,
      y: { kind: "lin", min: 0, max: Math.max(top * 1.1, 1), fmt: fmtRate, label: "responses/s" },
      series: series,
    });

    // Errors (and open-loop overflow, dashed, when any).
    el("h3", {}, s, "Errors");
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
        series.push({ name: f.label + " overflow", file: i, color: color(i), dash: "6 4",
                      pts: ov });
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
    el("h3", {}, s, "Latency (" + LAT.scheduled + ")");
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

    // How late requests left their scheduled time: whether a replay (or a paced run) kept up.
    el("h3", {}, s, "Send lateness (actual send − scheduled send)");
    series = [];
    lo = Infinity;
    hi = 0;
    FILES.forEach(function (f, i) {
      if (!f.intervals.length) return;
      [[1, "max", "2 4"], [0.99, "p99", null], [0.5, "p50", "6 4"]].forEach(function (q) {
        var pts = f.intervals.map(function (iv) {
          var st = iv.latency.lateness;
          var p = st && st.percentiles.filter(function (x) { return x[0] === q[0]; })[0];
          var v = p ? p[1] : null;
          if (v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
          return [mid(iv), v > 0 ? v : null];
        });
        series.push({ name: f.label + " lateness " + q[1], file: i, color: color(i), dash: q[2],
                      pts: pts, dots: true });
      });
    });
    if (hi === 0) {
      el("p", { "class": "empty", "data-empty": "lateness" }, s,
         "No send lateness recorded in any interval.");
    } else {
      legend(s, fileLegend.concat([["solid: p99", "#555"], ["dashed: p50", "#555", "dash"],
                                   ["dotted: max", "#555", "dot"]]));
      var ld = logDomain(lo, hi);
      chart(figure(s, "lateness-time"), {
        id: "lateness-time", x: xAxis,
        y: { kind: "log", min: ld[0], max: ld[1], fmt: fmtDur, label: "lateness" },
        series: series,
      });
    }
  }

  // ---- tables keyed by name, one column per file ----
  function keyedTable(parent, id, head, keys, cell, markDiff) {
    var t = el("table", { id: id }, parent);
    var hr = el("tr", {}, el("thead", {}, t));
    el("th", {}, hr, head);
    fileHeads(hr);
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
    var s = section("Status codes",
      "Responses per exact status code, and share of each result's responses.");
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
      el("span", { "class": "bar", style: "width:" + Math.max(1, pct * 1.2).toFixed(1) +
                   "px;background:" + color(i) }, td);
      return String(n);
    });
    // Error statuses (4xx, 5xx and anything outside 1xx-3xx) stand out by their code.
    var rows = s.querySelectorAll("#status-codes tbody tr");
    for (var r = 0; r < rows.length; r++) {
      if (!/^[123]/.test(codes[r])) rows[r].firstChild.className = "worse";
    }
  }
  function counters() {
    var s = section("Counters", "Every non-zero counter (summed over workers).");
    var names = union(function (f) { return f.counters; }).sort();
    if (!names.length) { empty(s, "No counter was incremented."); return; }
    keyedTable(s, "counters", "counter", names, function (f, k, i, td) {
      var v = lookup(f.counters, k);
      td.textContent = fmtInt(v || 0);
      return String(v);
    });
  }
  // ---- a coordinated run's generators: a sick one shows, not averaged away ----
  function generators() {
    var fleets = FILES.filter(function (f) { return f.generators; });
    if (!fleets.length) return;
    var s = section("Generators",
      "Each generator of a coordinated run: what it sent, at what rate, its errors and p99 " +
      "(from schedule), and whether it finished or was lost (then its figures are what it " +
      "streamed).");
    fleets.forEach(function (f) {
      if (FILES.length > 1) el("h3", {}, s, f.label);
      var t = el("table", { "class": "generators" }, s);
      var hr = el("tr", {}, el("thead", {}, t));
      ["generator", "address", "state", "requests", "rate", "errors", "p99"].forEach(
        function (h) { el("th", {}, hr, h); });
      var body = el("tbody", {}, t);
      f.generators.forEach(function (g) {
        var tr = el("tr", g.state === "completed" ? {} : { "class": "diff" }, body);
        el("td", { "class": "text" }, tr, g.name);
        el("td", { "class": "text" }, tr, g.address);
        var state = g.why ? g.state + " (" + g.why + ")" : g.state;
        el("td", { "class": "text" }, tr, g.fate ? state + "; " + g.fate : state);
        el("td", {}, tr, fmtInt(g.requests));
        el("td", {}, tr, g.rate == null ? "–" : fmtRate(g.rate) + "/s");
        el("td", {}, tr, fmtInt(g.errors));
        el("td", {}, tr, fmtDur(g.p99_ns));
      });
    });
  }
  // ---- a replay's canary diff: what answered otherwise than the capture ----
  // A replay's page leads with its canary verdict: whether the candidate answered as the
  // captured service did, and whether the gate passed.
  function canaryVerdict() {
    var replays = FILES.filter(function (f) {
      return f.replay && (f.replay.canary_matched + f.replay.canary_differed > 0 ||
                          f.replay.canary_max_differences != null);
    });
    if (!replays.length) return;
    var s = section("Canary verdict");
    replays.forEach(function (f) {
      var r = f.replay, compared = r.canary_matched + r.canary_differed;
      var text = (FILES.length > 1 ? f.label + ": " : "") +
        (r.canary_differed ? fmtInt(r.canary_differed) + " of " + fmtInt(compared) +
           " compared answers differ from the captured ones (" +
           (100 * r.canary_differed / compared).toFixed(1) + "%)"
         : compared ? "all " + fmtInt(compared) + " compared answers as captured"
         : "no answer had a captured one to compare with");
      var gate = r.canary_max_differences;
      var over = gate != null && r.canary_differed > gate;
      if (gate != null) {
        text += over ? "; FAILED: above --canary-max-differences " + gate
                     : "; within --canary-max-differences " + gate;
      }
      el("p", { "class": "verdict " + (over || r.canary_differed ? "worse" : "better") }, s, text);
    });
  }
  function canary() {
    var replays = FILES.filter(function (f) { return f.replay; });
    if (!replays.length) return;
    var s = section("Canary diff",
      "Each replayed answer against the captured one (status, and body size where captured), " +
      "grouped by what changed: captured → replayed.");
    var keys = union(function (f) { return f.replay ? f.replay.differences : []; });
    if (!keys.length) {
      var compared = replays.map(function (f) { return f.replay.canary_matched; });
      empty(s, compared.some(function (n) { return n > 0; }) ?
        "Every compared answer was as captured." :
        "No answer had a captured one to compare with (import the capture again to record them).");
      return;
    }
    keyedTable(s, "canary", "captured → replayed", keys, function (f, k, i, td) {
      var d = f.replay && f.replay.differences.filter(function (x) { return x[0] === k; })[0];
      var v = d ? d[1] : 0;
      td.textContent = fmtInt(v);
      return v;
    });
  }
  function options() {
    var s = section("Options", FILES.length > 1 ?
      "Every option each run was given; highlighted rows differ between results." :
      "Every option the run was given.");
    var keys = union(function (f) { return f.options; });
    if (!keys.length) { empty(s, "No options recorded."); return; }
    keyedTable(s, "options", "option", keys, function (f, k, i, td) {
      var v = lookup(f.options, k);
      td.className = "text";
      td.textContent = v == null ? "–" : v;
      return v;
    }, true);
  }

  // ---- machine-readable status: what was drawn, how big, and any errors ----
  function stamp() { stampPage(root, { "data-files": FILES.length }); }

  var sub = el("p", { "class": "sub" });
  sub.textContent = FILES.length + (FILES.length === 1 ? " result" : " results") + ": " +
    FILES.map(function (f) { return f.label; }).join(", ") + " · " + DATA.generator;
  document.querySelector("header").appendChild(sub);
  var ns = root.querySelector("noscript");
  if (ns) root.removeChild(ns);
  // Each part draws on its own: one failing still leaves the rest, and the error is recorded.
  [canaryVerdict, summary, generators, canary, spectrum, histogram, overTime, statusCodes, counters, options].forEach(function (part) {
    try { part(); } catch (e) { renderErrors.push(part.name + ": " + (e && e.stack || e)); }
  });
  stamp();
})();
