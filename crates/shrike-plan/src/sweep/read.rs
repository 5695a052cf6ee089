//! A stored sweep read back from its JSON (`sweep --output-format json`), and two sweeps set
//! side by side as one whose instances are theirs: the report then draws both, and the
//! comparison at the first's peak is the one a `--compare` sweep states, from the same code.

use serde_json::Value;

use super::report::{Iteration, Point, Sweep};
use super::resources::Window;
use crate::cause::{Cause, CauseKind};

/// Why a document could not be read as a sweep, or two sweeps not compared.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReadError(String);

fn bad(what: impl Into<String>) -> ReadError {
    ReadError(what.into())
}

fn f64_at(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or(f64::NAN)
}

fn quantiles(v: &Value) -> [f64; 5] {
    ["p50", "p90", "p99", "p999", "max"].map(|q| f64_at(v, q))
}

fn window(v: &Value) -> Window {
    let u = |k: &str| v[k].as_u64();
    let f = |k: &str| v[k].as_f64();
    Window {
        source: v["source"].as_str().map(str::to_string),
        pid: u("pid").and_then(|p| u32::try_from(p).ok()),
        cpu_cores: f("cpu_cores"),
        rss_max_bytes: u("rss_max_bytes"),
        rss_mean_bytes: f("rss_mean_bytes"),
        vms_max_bytes: u("vms_max_bytes"),
        fds_max: u("fds_max"),
        ctx_switches_per_sec: f("ctx_switches_per_s"),
        voluntary_ctx_switches_per_sec: f("voluntary_ctx_switches_per_s"),
        involuntary_ctx_switches_per_sec: f("involuntary_ctx_switches_per_s"),
        processes_max: u("processes_max").and_then(|n| usize::try_from(n).ok()),
        threads_max: u("threads_max").and_then(|n| usize::try_from(n).ok()),
        system_cpu: f("system_cpu"),
        samples: u("samples").and_then(|n| usize::try_from(n).ok()).unwrap_or(0),
        window_s: f("window_s"),
    }
}

fn iteration(v: &Value) -> Result<Iteration, ReadError> {
    let count = |k: &str| v[k].as_u64().ok_or_else(|| bad(format!("an iteration without {k}")));
    let parts = v["parts"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .filter_map(|p| Some((p["name"].as_str()?.to_string(), p["responses"].as_u64()?)))
                .collect()
        })
        .unwrap_or_default();
    Ok(Iteration {
        throughput: v["throughput_rps"]
            .as_f64()
            .ok_or_else(|| bad("an iteration without throughput_rps"))?,
        latency: quantiles(&v["latency_s"]),
        service: quantiles(&v["service_s"]),
        errors: count("errors")?,
        overflow: v["overflow"].as_u64().unwrap_or(0),
        successes: count("successes")?,
        cause: v["cause"].as_str().map(Cause::parse),
        server: window(&v["server"]),
        client_cpu_cores: v["client_cpu_cores"].as_f64(),
        parts,
    })
}

fn point(v: &Value) -> Result<Point, ReadError> {
    let iterations = v["iterations"]
        .as_array()
        .ok_or_else(|| bad("a point without iterations"))?
        .iter()
        .map(iteration)
        .collect::<Result<_, _>>()?;
    Ok(Point {
        instance: v["instance"].as_str().ok_or_else(|| bad("a point without instance"))?.into(),
        level: v["level"].as_u64().ok_or_else(|| bad("a point without level"))?,
        iterations,
    })
}

impl Sweep {
    /// A sweep's JSON document read back.
    pub fn from_json(doc: &Value) -> Result<Sweep, ReadError> {
        let sw = &doc["sweep"];
        let points = sw["points"]
            .as_array()
            .ok_or_else(|| bad("not a sweep: no sweep.points"))?
            .iter()
            .map(point)
            .collect::<Result<_, _>>()?;
        let instances = sw["instances"]
            .as_array()
            .ok_or_else(|| bad("not a sweep: no sweep.instances"))?
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect();
        Ok(Sweep {
            axis: sw["axis"].as_str().ok_or_else(|| bad("not a sweep: no sweep.axis"))?.into(),
            workers: sw["workers"].as_u64().unwrap_or(1),
            instances,
            points,
            server_cores: sw["server_cores"].as_f64(),
            complete: doc["complete"].as_bool().unwrap_or(false),
            stopped_by: doc["failed"].as_str().map(str::to_string),
            options: doc["options"].clone(),
            grid: doc["grid"].clone(),
            setup: doc["instances"].clone(),
        })
    }

    /// `self` (labelled `mine`) and `other` (labelled `theirs`) as one sweep whose instances
    /// are both's, named by label (`label: instance` where a sweep had several; an empty label
    /// keeps the names, for a sweep already set beside another). With one
    /// instance each, the second is compared with the first at the first's peak. Sweeps over
    /// different axes, or over connections with different worker counts (so different total
    /// concurrency at one level), are not comparable.
    pub fn beside(self, mine: &str, other: Sweep, theirs: &str) -> Result<Sweep, ReadError> {
        if self.axis != other.axis {
            return Err(bad(format!(
                "{mine} sweeps {} and {theirs} sweeps {}: only sweeps over one axis compare",
                self.axis, other.axis
            )));
        }
        if self.axis == "connections" && self.workers != other.workers {
            return Err(bad(format!(
                "{mine} ran {} workers and {theirs} {}: the same connections per worker are \
                 different concurrency, so their points do not compare",
                self.workers, other.workers
            )));
        }
        let named = |s: &Sweep, label: &str, inst: &str| {
            if label.is_empty() {
                inst.to_string()
            } else if s.instances.len() > 1 {
                format!("{label}: {inst}")
            } else {
                label.to_string()
            }
        };
        let mut instances = Vec::new();
        let mut points = Vec::new();
        let stopped = |s: &Sweep, label: &str| {
            s.failure().map(|why| if label.is_empty() { why } else { format!("{label}: {why}") })
        };
        let stopped_by = match (stopped(&self, mine), stopped(&other, theirs)) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        for (s, label) in [(&self, mine), (&other, theirs)] {
            instances.extend(s.instances.iter().map(|i| named(s, label, i)));
            points.extend(
                s.points
                    .iter()
                    .map(|p| Point { instance: named(s, label, &p.instance), ..p.clone() }),
            );
        }
        // Each sweep's own, by label; a sweep already set beside another has them so.
        let both = |a: &Value, b: &Value| {
            let mut by_label = match a {
                Value::Object(m) if mine.is_empty() => m.clone(),
                _ => serde_json::Map::from_iter([(mine.to_string(), a.clone())]),
            };
            by_label.insert(theirs.to_string(), b.clone());
            Value::Object(by_label)
        };
        Ok(Sweep {
            axis: self.axis.clone(),
            workers: self.workers,
            instances,
            points,
            // Saturation is judged against one core count; two servers' differing counts
            // leave it unjudged rather than judged against the wrong one.
            server_cores: if self.server_cores == other.server_cores {
                self.server_cores
            } else {
                None
            },
            complete: self.complete && other.complete,
            stopped_by,
            options: both(&self.options, &other.options),
            grid: both(&self.grid, &other.grid),
            setup: both(&self.setup, &other.setup),
        })
    }
}

impl Cause {
    /// A cause as its `Display` wrote it (`detail (advice)`), the kind found by its advice;
    /// text no kind's advice ends is kept whole, of kind `Other`.
    pub fn parse(text: &str) -> Cause {
        let kinds = [
            CauseKind::Connect,
            CauseKind::ConnectTimeout,
            CauseKind::Tls,
            CauseKind::Timeouts,
            CauseKind::ErrorStatus,
            CauseKind::Other,
        ];
        for kind in kinds {
            let advice = Cause { kind, detail: String::new() }.advice();
            let suffix = format!(" ({advice})");
            if let Some(detail) = text.strip_suffix(&suffix) {
                return Cause { kind, detail: detail.to_string() };
            }
        }
        Cause { kind: CauseKind::Other, detail: text.to_string() }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn iteration(throughput: f64) -> Iteration {
        Iteration {
            throughput,
            latency: [0.001, 0.002, 0.003, 0.004, 0.005],
            service: [0.001; 5],
            errors: 1,
            overflow: 0,
            successes: 100,
            cause: None,
            server: Window { cpu_cores: Some(0.5), samples: 3, ..Window::default() },
            client_cpu_cores: Some(0.25),
            parts: vec![("worker 0".into(), 100)],
        }
    }

    fn sweep(instance: &str, tps: &[(u64, f64)]) -> Sweep {
        Sweep {
            axis: "connections".into(),
            workers: 2,
            instances: vec![instance.into()],
            points: tps
                .iter()
                .map(|&(level, tp)| Point {
                    instance: instance.into(),
                    level,
                    iterations: vec![iteration(tp), iteration(tp * 1.01)],
                })
                .collect(),
            server_cores: Some(2.0),
            complete: true,
            stopped_by: None,
            options: serde_json::json!({"uri": "http://x/"}),
            grid: serde_json::json!({"connections": [1, 2]}),
            setup: Value::Null,
        }
    }

    #[test]
    fn a_sweep_reads_back_as_it_was_written() {
        let s = sweep("default", &[(1, 100.0), (2, 180.0), (4, 170.0)]);
        let back = Sweep::from_json(&s.json()).unwrap();
        assert_eq!(back.json(), s.json());
        assert_eq!(back.human(), s.human());
    }

    #[test]
    fn a_cause_reads_back_with_its_kind() {
        let c = Cause { kind: CauseKind::Connect, detail: "connect: refused".into() };
        let back = Cause::parse(&c.to_string());
        assert_eq!((back.kind, back.detail.as_str()), (CauseKind::Connect, "connect: refused"));
        assert_eq!(Cause::parse("odd").detail, "odd");
    }

    #[test]
    fn two_sweeps_side_by_side_compare_at_the_firsts_peak() {
        let a = sweep("default", &[(1, 100.0), (2, 180.0), (4, 170.0)]);
        let b = sweep("default", &[(1, 90.0), (2, 150.0), (4, 160.0)]);
        let both = a.beside("before", b, "after").unwrap();
        assert_eq!(both.instances, ["before", "after"]);
        let (level, [tp, ..]) = both.comparison().unwrap();
        assert_eq!(level, 2, "the first's peak");
        assert!((tp.unwrap().relative - (150.0 / 180.0 - 1.0)).abs() < 1e-9);
    }

    #[test]
    fn sweeps_that_do_not_compare_are_refused() {
        let a = sweep("default", &[(1, 100.0)]);
        let mut b = sweep("default", &[(1, 100.0)]);
        b.workers = 4;
        let e = a.beside("a", b, "b").err().unwrap().to_string();
        assert!(e.contains("2 workers and b 4"), "{e}");
    }
}
