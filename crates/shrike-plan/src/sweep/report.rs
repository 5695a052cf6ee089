//! A sweep's points and what they say: the throughput peak (mean ± deviation over
//! iterations), the USL knee, whether the server ever saturated its CPU, and the candidate's
//! change from the baseline at the baseline's peak.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::text::table;
use shrike_stats::{RunResult, StatId};

use super::resources::Window;
use super::stats::{change, mean_sd, Change};
use super::usl::Assessed;
use crate::cause::Cause;

/// A server below this share of its cores at the peak was not CPU-bound.
pub const SATURATED: f64 = 0.9;

/// One iteration at one point.
#[derive(Clone, Debug)]
pub struct Iteration {
    /// Responses per second over the sending window.
    pub throughput: f64,
    /// Latency from the schedule and service time, in seconds: p50, p90, p99, p99.9, max.
    pub latency: [f64; 5],
    pub service: [f64; 5],
    /// Requests the server failed: statuses, timeouts, resets, refused connections.
    pub errors: u64,
    /// Requests due while every connection was busy, never sent (the client's, open loop).
    pub overflow: u64,
    /// Responses that were not errors.
    pub successes: u64,
    /// Why no request got a successful response, when none did.
    pub cause: Option<Cause>,
    pub server: Window,
    /// The client's CPU in cores over the window.
    pub client_cpu_cores: Option<f64>,
    /// Who sent it, and the responses each got: the workers of a run here, the generators of
    /// a fleet's (`--remote`), whose sum is the iteration's.
    pub parts: Vec<(String, u64)>,
}

const QS: [f64; 5] = [0.5, 0.9, 0.99, 0.999, 1.0];

impl Iteration {
    pub fn of(result: &RunResult, server: Window, client_cpu_cores: Option<f64>) -> Iteration {
        let g = &result.global;
        let window = g.rate_window().as_secs_f64();
        let responses = g.status_codes.total().max(g.counters.responses());
        let q = |id: StatId| {
            let s = g.stats.get(id);
            QS.map(|q| if s.count() == 0 { f64::NAN } else { s.clamped_quantile(q) as f64 / 1e9 })
        };
        let errors = crate::counts::server_errors(&g.counters);
        let parts = result
            .workers
            .iter()
            .map(|w| (w.name.clone(), w.status_codes.total().max(w.counters.responses())))
            .collect();
        Iteration {
            parts,
            throughput: if window > 0.0 { responses as f64 / window } else { 0.0 },
            latency: q(StatId::ScheduledToResponse),
            service: q(StatId::RequestToResponse),
            errors,
            overflow: crate::counts::overflow(&g.counters),
            successes: crate::counts::successes(&g.counters),
            cause: Cause::of(result),
            server,
            client_cpu_cores,
        }
    }
}

/// One measured run in a line, as a sweep in progress shows it: throughput, p99, server CPU,
/// and when nothing succeeded, why.
pub fn progress(m: &super::Measured<'_>, axis: &str, several: bool) -> String {
    let it = m.run;
    let who = if several { format!("{}: ", m.instance) } else { String::new() };
    let p99 = match it.latency[2] {
        v if v.is_finite() => secs(v),
        _ => "-".into(),
    };
    let cpu = it.server.cpu_cores.map_or(String::new(), |c| format!(", server CPU {c:.2} cores"));
    let errors = match (it.errors, &it.cause) {
        (_, Some(cause)) => format!(", no successful response: {}", cause.detail),
        (0, None) => String::new(),
        (n, None) => format!(", {n} errors"),
    };
    format!("{who}{axis} {}: {:.1} responses/s, p99 {p99}{cpu}{errors}", m.level, it.throughput)
}

/// One grid point of one instance.
#[derive(Clone, Debug)]
pub struct Point {
    pub instance: String,
    /// Connections per worker, or requests per second.
    pub level: u64,
    pub iterations: Vec<Iteration>,
}

impl Point {
    fn each(&self, f: impl Fn(&Iteration) -> f64) -> Vec<f64> {
        self.iterations.iter().map(f).filter(|v| v.is_finite()).collect()
    }
    /// Whether any iteration got a successful response.
    pub fn answered(&self) -> bool {
        self.iterations.iter().any(|i| i.successes > 0)
    }
    pub fn throughput(&self) -> (f64, f64) {
        mean_sd(&self.each(|i| i.throughput))
    }
    fn mean(&self, f: impl Fn(&Iteration) -> f64) -> Option<f64> {
        let v = self.each(f);
        (!v.is_empty()).then(|| mean_sd(&v).0)
    }
}

/// A gain under this over the level before is a flattening, not a rise.
const FLAT: f64 = 0.05;

/// How far past the grid's largest level a USL's predicted peak is stated.
pub const MAX_EXTRAPOLATION: f64 = 2.0;

/// A whole sweep: its axis, instances (one, or baseline and candidate) and points.
pub struct Sweep {
    /// `connections` or `rate`.
    pub axis: String,
    /// Workers the client ran: concurrency is connections × workers.
    pub workers: u64,
    pub instances: Vec<String>,
    pub points: Vec<Point>,
    /// The server's CPU cores (its affinity), what saturation is judged against.
    pub server_cores: Option<f64>,
    pub complete: bool,
    /// Why the sweep could not go on (a server that exited), when it could not: the points
    /// before it are kept.
    pub stopped_by: Option<String>,
    /// What was swept: the load's options (its target among them: `--spec` runs it again),
    /// the grid's, and how each instance's server was run (its command, pid file), when the
    /// caller ran one.
    pub options: Value,
    pub grid: Value,
    pub setup: Value,
}

impl Sweep {
    fn of<'a>(&'a self, instance: &str) -> impl Iterator<Item = &'a Point> + 'a {
        let instance = instance.to_string();
        self.points.iter().filter(move |p| p.instance == instance)
    }

    /// The point with the highest mean throughput, of those that got a successful response.
    pub fn peak(&self, instance: &str) -> Option<&Point> {
        self.of(instance)
            .filter(|p| p.answered())
            .max_by(|a, b| a.throughput().0.total_cmp(&b.throughput().0))
    }

    /// Whether the instance's throughput peaked inside the grid: its highest point is not
    /// the grid's last level, or the last level gained nothing beyond the noise (or under
    /// 5%) over the one before, so it flattened. A grid over which throughput only rose says
    /// where it stopped looking, not where the server peaks. `None` with fewer than two
    /// answered levels: nothing to say either way.
    pub fn peaked(&self, instance: &str) -> Option<bool> {
        let answered: Vec<&Point> = self.of(instance).filter(|p| p.answered()).collect();
        let peak = self.peak(instance)?;
        let (last, before) = (answered.last()?, answered.iter().rev().nth(1)?);
        if peak.level != last.level {
            return Some(true);
        }
        let (now, prev) = (last.each(|i| i.throughput), before.each(|i| i.throughput));
        let gain = last.throughput().0 / before.throughput().0.max(f64::MIN_POSITIVE) - 1.0;
        Some(match super::stats::change(&prev, &now) {
            Some(c) => c.within_noise() || c.relative < FLAT,
            None => gain < FLAT,
        })
    }

    /// The USL's predicted peak, when it lies within [`MAX_EXTRAPOLATION`] times the grid's
    /// largest concurrency: `Err(largest)` when beyond (a curve fitted on the grid says
    /// nothing that far out).
    pub fn usl_peak(&self, instance: &str, u: &super::usl::Usl) -> Result<Option<f64>, f64> {
        let largest = self.of(instance).map(|p| p.level).max().unwrap_or(0) * self.workers;
        match u.peak() {
            Some(n) if n > MAX_EXTRAPOLATION * largest as f64 => Err(largest as f64),
            p => Ok(p),
        }
    }

    /// The USL fit of throughput against total concurrency, judged (a connections sweep only).
    pub fn usl(&self, instance: &str) -> Option<Assessed> {
        if self.axis != "connections" {
            return None;
        }
        let pts: Vec<(f64, f64)> = self
            .of(instance)
            .flat_map(|p| {
                p.iterations.iter().map(move |i| ((p.level * self.workers) as f64, i.throughput))
            })
            .collect();
        Some(Assessed::of(&pts))
    }

    /// Why the sweep failed, if it did: its server stopped it, or a point (any instance's)
    /// got no successful response in any iteration, with the cause from its errors.
    pub fn failure(&self) -> Option<String> {
        if let Some(why) = &self.stopped_by {
            return Some(why.clone());
        }
        let p = self.points.iter().find(|p| !p.answered())?;
        let cause = p.iterations.iter().find_map(|i| i.cause.as_ref());
        let who =
            if self.instances.len() > 1 { format!("{}: ", p.instance) } else { String::new() };
        Some(format!(
            "{who}at {} {}, no request got a successful response{}",
            self.level(p.level),
            self.axis,
            cause.map_or(String::new(), |c| format!(": {c}"))
        ))
    }

    /// Whether the server used its CPU fully at the peak; `None` without CPU samples.
    pub fn saturated(&self, instance: &str) -> Option<bool> {
        let peak = self.peak(instance)?;
        let cpu = peak.mean(|i| i.server.cpu_cores.unwrap_or(f64::NAN))?;
        let cores = self.server_cores?;
        Some(cpu >= SATURATED * cores)
    }

    /// The candidate's changes at the baseline's peak: throughput, p50 and p99.
    pub fn comparison(&self) -> Option<(u64, [Option<Change>; 3])> {
        let [base, cand] = self.instances.as_slice() else { return None };
        let level = self.peak(base)?.level;
        let at = |inst: &str| self.of(inst).find(|p| p.level == level);
        let (b, c) = (at(base)?, at(cand)?);
        let ch = |f: fn(&Iteration) -> f64| change(&b.each(f), &c.each(f));
        Some((level, [ch(|i| i.throughput), ch(|i| i.latency[0]), ch(|i| i.latency[2])]))
    }

    fn level(&self, l: u64) -> String {
        if self.axis == "rate" {
            format!("{l}/s")
        } else {
            l.to_string()
        }
    }

    pub fn human(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "Shrike sweep over {}\n", self.axis);
        if let Some(why) = self.failure() {
            let _ = writeln!(s, "FAILED: {why}\n");
        } else if !self.complete {
            s.push_str("INCOMPLETE: interrupted; the points below are those measured so far.\n\n");
        }
        for inst in &self.instances {
            s.push_str(&self.findings(inst));
        }
        if let Some((level, [tp, p50, p99])) = self.comparison() {
            let _ = writeln!(
                s,
                "Candidate vs baseline at the baseline's peak ({}):",
                self.level(level)
            );
            for (what, c) in [("throughput", tp), ("p50", p50), ("p99", p99)] {
                let _ = writeln!(s, "  {what:<10} {}", describe(c));
            }
            s.push('\n');
        }
        let mut rows = vec![vec![
            "instance".to_string(),
            self.axis.clone(),
            "throughput".into(),
            "± sd".into(),
            "p50".into(),
            "p99".into(),
            "errors".into(),
            "server cpu".into(),
            "server rss".into(),
            "ctx sw/s".into(),
            "client cpu".into(),
            "iterations".into(),
        ]];
        let overflowed = self.points.iter().flat_map(|p| &p.iterations).any(|i| i.overflow > 0);
        if overflowed {
            rows[0].insert(7, "overflow".into());
        }
        for p in &self.points {
            let (tp, sd) = p.throughput();
            let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".into(), f);
            let mut row = vec![
                p.instance.clone(),
                self.level(p.level),
                format!("{tp:.1}/s"),
                format!("{sd:.1}"),
                opt(p.mean(|i| i.latency[0]), &secs),
                opt(p.mean(|i| i.latency[2]), &secs),
                p.iterations.iter().map(|i| i.errors).sum::<u64>().to_string(),
                opt(p.mean(|i| i.server.cpu_cores.unwrap_or(f64::NAN)), &|c| {
                    format!("{c:.2} cores")
                }),
                opt(p.mean(|i| i.server.rss_max_bytes.map_or(f64::NAN, |b| b as f64)), &|b| {
                    format!("{:.1} MiB", b / 1048576.0)
                }),
                opt(p.mean(|i| i.server.ctx_switches_per_sec.unwrap_or(f64::NAN)), &|c| {
                    format!("{c:.0}")
                }),
                opt(p.mean(|i| i.client_cpu_cores.unwrap_or(f64::NAN)), &|c| {
                    format!("{c:.2} cores")
                }),
                p.iterations.len().to_string(),
            ];
            if overflowed {
                row.insert(7, p.iterations.iter().map(|i| i.overflow).sum::<u64>().to_string());
            }
            rows.push(row);
        }
        table(&rows, &mut s);
        s
    }

    fn findings(&self, inst: &str) -> String {
        let mut s = String::new();
        let label = if self.instances.len() > 1 { format!("{inst}: ") } else { String::new() };
        let Some(peak) = self.peak(inst) else {
            let _ = writeln!(s, "{label}no point got a successful response\n");
            return s;
        };
        let (tp, sd) = peak.throughput();
        let p99 = peak.mean(|i| i.latency[2]).map_or("-".into(), secs);
        let cpu = peak.mean(|i| i.server.cpu_cores.unwrap_or(f64::NAN));
        let what = match self.peaked(inst) {
            Some(true) => "peak",
            Some(false) => "STILL RISING at the grid's end (extend the grid to find the peak):",
            None => "one level only, no peak to find:",
        };
        let _ = writeln!(
            s,
            "{label}{what} {tp:.1} ± {sd:.1} responses/s at {} {}, p99 {p99}{}",
            self.level(peak.level),
            self.axis,
            cpu.map_or(String::new(), |c| format!(", server CPU {c:.2} cores"))
        );
        match self.usl(inst) {
            Some(Assessed::Fits(u)) => {
                let predicted = match self.usl_peak(inst, &u) {
                    Ok(None) => "none (throughput only flattens: κ = 0)".to_string(),
                    Ok(Some(n)) => format!("{:.1} connections per worker", n / self.workers as f64),
                    Err(largest) => format!(
                        "not stated: it lies beyond twice the grid's largest concurrency ({})",
                        largest
                    ),
                };
                let _ = writeln!(
                    s,
                    "  USL fit: λ {:.1}/s, contention σ {:.4}, coherency κ {:.6}, R² {:.3}; \
                     predicted peak {predicted} (measured {})",
                    u.lambda, u.sigma, u.kappa, u.r2, peak.level
                );
            }
            Some(Assessed::DoesNotFit { why, .. }) => {
                let _ = writeln!(s, "  USL: no fit, no predicted peak: {why}");
            }
            None => {}
        }
        match self.saturated(inst) {
            Some(false) => {
                let _ = writeln!(
                    s,
                    "  WARNING: the server never saturated its CPU (under {:.0}% of {} cores at \
                     the peak): the limit is elsewhere (the client, the network, locks or \
                     sleeps), and overhead measured here is not the server's",
                    SATURATED * 100.0,
                    self.server_cores.unwrap_or_default()
                );
            }
            None => s.push_str("  (no server CPU samples: give --server-pid or --server-cmd)\n"),
            Some(true) => {}
        }
        s.push('\n');
        s
    }

    pub fn csv(&self) -> String {
        let mut s = String::from(
            "instance,level,iteration,throughput_rps,latency_p50_s,latency_p90_s,latency_p99_s,\
             latency_p999_s,latency_max_s,service_p50_s,service_p99_s,errors,server_cpu_cores,\
             server_rss_max_bytes,server_vms_max_bytes,server_fds_max,server_ctx_switches_per_s,\
             system_cpu,client_cpu_cores,overflow\r\n",
        );
        let o = |v: Option<f64>| v.map_or(String::new(), |x| x.to_string());
        let u = |v: Option<u64>| v.map_or(String::new(), |x| x.to_string());
        for p in &self.points {
            for (k, i) in p.iterations.iter().enumerate() {
                let f = |x: f64| if x.is_finite() { x.to_string() } else { String::new() };
                let _ = write!(
                    s,
                    "{},{},{k},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\r\n",
                    csv_field(&p.instance),
                    p.level,
                    i.throughput,
                    f(i.latency[0]),
                    f(i.latency[1]),
                    f(i.latency[2]),
                    f(i.latency[3]),
                    f(i.latency[4]),
                    f(i.service[0]),
                    f(i.service[2]),
                    i.errors,
                    o(i.server.cpu_cores),
                    u(i.server.rss_max_bytes),
                    u(i.server.vms_max_bytes),
                    u(i.server.fds_max),
                    o(i.server.ctx_switches_per_sec),
                    o(i.server.system_cpu),
                    o(i.client_cpu_cores),
                    i.overflow,
                );
            }
        }
        s
    }

    pub fn json(&self) -> Value {
        let num = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
        let lat = |a: &[f64; 5]| json!({"p50": num(a[0]), "p90": num(a[1]), "p99": num(a[2]), "p999": num(a[3]), "max": num(a[4])});
        let points: Vec<Value> = self
            .points
            .iter()
            .map(|p| {
                let (tp, sd) = p.throughput();
                json!({
                    "instance": p.instance,
                    "level": p.level,
                    "throughput_rps": {"mean": num(tp), "sd": num(sd)},
                    "iterations": p.iterations.iter().map(|i| json!({
                        "throughput_rps": i.throughput,
                        "latency_s": lat(&i.latency),
                        "service_s": lat(&i.service),
                        "errors": i.errors,
                        "overflow": i.overflow,
                        "successes": i.successes,
                        "cause": i.cause.as_ref().map(ToString::to_string),
                        "client_cpu_cores": i.client_cpu_cores,
                        "parts": i.parts.iter()
                            .map(|(name, responses)| json!({"name": name, "responses": responses}))
                            .collect::<Vec<_>>(),
                        "server": {
                            "pid": i.server.pid,
                            "cpu_cores": i.server.cpu_cores,
                            "rss_max_bytes": i.server.rss_max_bytes,
                            "rss_mean_bytes": i.server.rss_mean_bytes,
                            "vms_max_bytes": i.server.vms_max_bytes,
                            "fds_max": i.server.fds_max,
                            "source": i.server.source,
                            "ctx_switches_per_s": i.server.ctx_switches_per_sec,
                            "voluntary_ctx_switches_per_s": i.server.voluntary_ctx_switches_per_sec,
                            "involuntary_ctx_switches_per_s": i.server.involuntary_ctx_switches_per_sec,
                            "processes_max": i.server.processes_max,
                            "threads_max": i.server.threads_max,
                            "system_cpu": i.server.system_cpu,
                            "samples": i.server.samples,
                            "window_s": i.server.window_s,
                        },
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let peak = |inst: &str| {
            self.peak(inst).map(|p| {
                let (tp, sd) = p.throughput();
                let usl = self.usl(inst);
                json!({
                    "instance": inst,
                    // False when throughput still rose at the grid's last level: the point is
                    // the grid's end, not the server's peak.
                    "peaked": self.peaked(inst),
                    self.axis.as_str(): p.level,
                    "throughput_rps": {"mean": num(tp), "sd": num(sd)},
                    "p99_s": p.mean(|i| i.latency[2]),
                    "server_cpu_cores": p.mean(|i| i.server.cpu_cores.unwrap_or(f64::NAN)),
                    "saturated": self.saturated(inst),
                    "usl": usl.map(|a| match a {
                        Assessed::Fits(u) => json!({"fits": true, "lambda": u.lambda,
                            "sigma": u.sigma, "kappa": u.kappa, "r2": u.r2,
                            "predicted_peak_concurrency": self.usl_peak(inst, &u).ok().flatten(),
                            "predicted_peak_beyond_grid": self.usl_peak(inst, &u).is_err()}),
                        Assessed::DoesNotFit { fit, why } => json!({"fits": false, "why": why,
                            "lambda": fit.map(|u| u.lambda), "sigma": fit.map(|u| u.sigma),
                            "kappa": fit.map(|u| u.kappa), "r2": fit.map(|u| u.r2),
                            "predicted_peak_concurrency": null}),
                    }),
                })
            })
        };
        let comparison = self.comparison().map(|(level, [tp, p50, p99])| {
            let c = |c: Option<Change>| {
                c.map(|c| json!({"relative": c.relative, "ci95": [c.low, c.high], "within_noise": c.within_noise()}))
            };
            json!({"level": level, "throughput": c(tp), "p50": c(p50), "p99": c(p99)})
        });
        json!({
            "sweep": {"axis": self.axis, "workers": self.workers, "instances": self.instances,
                      "server_cores": self.server_cores, "points": points},
            "peak": self.instances.first().and_then(|i| peak(i)),
            "peaks": self.instances.iter().filter_map(|i| peak(i)).collect::<Vec<_>>(),
            "comparison": comparison,
            "complete": self.complete,
            "failed": self.failure(),
            "options": self.options,
            "grid": self.grid,
            "instances": self.setup,
        })
    }
}

fn describe(c: Option<Change>) -> String {
    match c {
        None => "-- (needs 2+ iterations on both sides, each with responses)".into(),
        Some(c) => format!(
            "{:+.1}% (95% CI {:+.1}% to {:+.1}%){}",
            100.0 * c.relative,
            100.0 * c.low,
            100.0 * c.high,
            if c.within_noise() { ": within noise" } else { "" }
        ),
    }
}

fn secs(s: f64) -> String {
    shrike_stats::duration::format_human_ns(s * 1e9)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn iteration(throughput: f64) -> Iteration {
        Iteration {
            throughput,
            latency: [0.001; 5],
            service: [0.001; 5],
            errors: 0,
            overflow: 0,
            successes: 100,
            cause: None,
            server: Window::default(),
            client_cpu_cores: None,
            parts: Vec::new(),
        }
    }

    /// A sweep over `levels` with the throughputs of each level's iterations.
    fn sweep(points: &[(u64, &[f64])]) -> Sweep {
        Sweep {
            axis: "connections".into(),
            workers: 1,
            instances: vec!["baseline".into()],
            points: points
                .iter()
                .map(|(level, tps)| Point {
                    instance: "baseline".into(),
                    level: *level,
                    iterations: tps.iter().map(|t| iteration(*t)).collect(),
                })
                .collect(),
            server_cores: None,
            complete: true,
            stopped_by: None,
            options: Value::Null,
            grid: Value::Null,
            setup: Value::Null,
        }
    }

    #[test]
    fn a_peak_is_only_called_one_inside_the_grid() {
        // Throughput only rises: the last level is the grid's end, not a peak.
        let rising = sweep(&[(1, &[100.0, 101.0]), (2, &[200.0, 198.0]), (4, &[390.0, 395.0])]);
        assert_eq!(rising.peaked("baseline"), Some(false));
        assert!(rising.human().contains("STILL RISING at the grid's end"), "{}", rising.human());
        assert_eq!(rising.json()["peak"]["peaked"], false);
        // It falls after the highest point: a peak.
        let falls = sweep(&[(1, &[100.0, 101.0]), (2, &[200.0, 198.0]), (4, &[150.0, 152.0])]);
        assert_eq!(falls.peaked("baseline"), Some(true));
        // The last level gained nothing beyond the noise: it flattened, a peak.
        let flat = sweep(&[(1, &[100.0, 101.0]), (2, &[200.0, 198.0]), (4, &[203.0, 197.0])]);
        assert_eq!(flat.peaked("baseline"), Some(true));
        assert_eq!(sweep(&[(1, &[100.0])]).peaked("baseline"), None);
    }

    #[test]
    fn a_usl_peak_far_past_the_grid_is_not_stated() {
        let s = sweep(&[(1, &[100.0]), (2, &[190.0]), (4, &[350.0]), (8, &[600.0])]);
        let near = super::super::usl::Usl { lambda: 100.0, sigma: 0.05, kappa: 0.01, r2: 1.0 };
        let far = super::super::usl::Usl { lambda: 100.0, sigma: 0.05, kappa: 0.0002, r2: 1.0 };
        // √(0.95/0.01) ≈ 9.7 is within twice the largest level (16); √(0.95/0.0002) ≈ 69 is not.
        assert!(s.usl_peak("baseline", &near).unwrap().is_some_and(|n| (n - 9.75).abs() < 0.1));
        assert_eq!(s.usl_peak("baseline", &far), Err(8.0));
    }
}
