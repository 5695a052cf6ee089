//! What a service lets a remote client run: a load generator must never become an open relay.
//!
//! - [`Allowlist`]: every address a run would connect to (after DNS resolution, which the
//!   engine does once, when it prepares the run) must be inside a CIDR or among the addresses
//!   an allowed host name resolves to.
//! - [`Limits`]: per-run caps on the total rate, duration, connections and workers.
//! - [`check_remote_options`]: options that would reach beyond the run's targets (files on
//!   the service's machine, listeners, metrics sent elsewhere) are refused.
//!
//! Every refusal names the option or the rule, so the client knows what to change.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs as _};
use std::time::Duration;

use shrike_spec::{RatePlan, RunSpec};

/// An IP network: `127.0.0.0/8`, `::1/128`, or one address (`10.1.2.3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Option<Cidr> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let net: IpAddr = addr.trim().trim_matches(['[', ']']).parse().ok()?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.trim().parse::<u8>().ok().filter(|&p| p <= max)?,
            None => max,
        };
        Some(Cidr { net, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        // An IPv4-mapped IPv6 address is the IPv4 address for this purpose: a rule about
        // 10.0.0.0/8 must not be side-stepped by writing ::ffff:10.0.0.1.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let bits = |a: IpAddr| -> u128 {
            match a {
                IpAddr::V4(v4) => u128::from(u32::from(v4)),
                IpAddr::V6(v6) => u128::from(v6),
            }
        };
        let width = if self.net.is_ipv4() { 32 } else { 128 };
        if ip.is_ipv4() != self.net.is_ipv4() {
            return false;
        }
        if self.prefix == 0 {
            return true;
        }
        let shift = width - u32::from(self.prefix);
        bits(ip) >> shift == bits(self.net) >> shift
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Entry {
    Net(Cidr),
    /// Allowed by what the name resolves to when a run is checked.
    Host(String),
}

/// The targets runs may load (`--allow-target`, repeatable).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowlist {
    entries: Vec<Entry>,
}

impl Allowlist {
    /// Parses one entry: a CIDR, an address, or a host name.
    pub fn add(&mut self, entry: &str) -> Result<(), String> {
        let e = entry.trim();
        if let Some(c) = Cidr::parse(e) {
            self.entries.push(Entry::Net(c));
            return Ok(());
        }
        let name_ok = !e.is_empty()
            && !e.contains('/')
            && e.split('.').all(|l| {
                !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        if !name_ok {
            return Err(format!(
                "{entry:?} is neither a CIDR (127.0.0.0/8), an address nor a host name"
            ));
        }
        self.entries.push(Entry::Host(e.to_ascii_lowercase()));
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How refusals name the rule.
    pub fn describe(&self) -> String {
        let e: Vec<String> = self
            .entries
            .iter()
            .map(|e| match e {
                Entry::Net(c) => c.to_string(),
                Entry::Host(h) => h.clone(),
            })
            .collect();
        e.join(", ")
    }

    /// Whether `addr` may be loaded. Allowed host names are resolved now, so an entry follows
    /// its name's current addresses.
    pub fn allows(&self, addr: SocketAddr) -> bool {
        self.entries.iter().any(|e| match e {
            Entry::Net(c) => c.contains(addr.ip()),
            Entry::Host(h) => (h.as_str(), addr.port())
                .to_socket_addrs()
                .is_ok_and(|mut it| it.any(|a| a.ip() == addr.ip())),
        })
    }
}

/// Per-run caps (`--max-rps`, `--max-duration`, `--max-connections`, `--max-workers`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Limits {
    /// Requests per second, all workers together (the plan's peak).
    pub rps: Option<f64>,
    pub duration: Option<Duration>,
    /// Connections, all workers together.
    pub connections: Option<u64>,
    pub workers: Option<usize>,
}

/// A run the service will not do, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The spec is fine, but not here (a limit, an option remote runs may not use).
    #[error("{0}")]
    Invalid(String),
    /// A target outside the allowlist.
    #[error("{0}")]
    Denied(String),
}

impl Limits {
    pub fn check(&self, spec: &RunSpec) -> Result<(), Refusal> {
        let workers = spec.concurrency().workers().get();
        let over = |what: String| Err(Refusal::Invalid(what));
        if let Some(max) = self.workers {
            if workers > max {
                return over(format!(
                    "concurrency: {workers} workers exceed this service's --max-workers {max}"
                ));
            }
        }
        if let Some(max) = self.connections {
            let total = u64::from(spec.connections().get()) * workers as u64;
            if total > max {
                return over(format!(
                    "connections: {total} in all ({} per worker × {workers} workers) exceed this \
                     service's --max-connections {max}",
                    spec.connections()
                ));
            }
        }
        if let Some(max) = self.rps {
            match spec.plan() {
                RatePlan::Unpaced => {
                    return over(format!(
                        "requests_per_second: \"max\" is unpaced (no rate to check); this service \
                         caps runs at --max-rps {max}"
                    ))
                }
                plan => {
                    let total = plan.peak().unwrap_or(0.0) * workers as f64;
                    if total > max {
                        return over(format!(
                            "requests_per_second: {total} rps in all (peak per worker × \
                             {workers} workers) exceeds this service's --max-rps {max}"
                        ));
                    }
                }
            }
        }
        if let Some(max) = self.duration {
            match spec.duration() {
                None => {
                    return over(format!(
                        "no_duration: a run without end; this service caps runs at \
                         --max-duration {}",
                        shrike_stats::duration::format_proto(max)
                    ))
                }
                Some(d) if d > max => {
                    return over(format!(
                        "duration: {} exceeds this service's --max-duration {}",
                        shrike_stats::duration::format_proto(d),
                        shrike_stats::duration::format_proto(max)
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// Options a remote client may not use: they read the service's files, open listeners on
/// its machine or send data to hosts the allowlist does not cover.
pub fn check_remote_options(spec: &RunSpec) -> Result<(), Refusal> {
    let refuse = |option: &str, why: &str| {
        Err(Refusal::Invalid(format!("{option}: not allowed in a remote run ({why})")))
    };
    if spec.built_in_server() {
        return refuse("uri", "a remote run needs a target URL");
    }
    let files = "it reads a file on the service's machine";
    let r = spec.requests();
    if r.request_file.is_some() {
        return refuse("request_file", files);
    }
    if r.body_file.is_some() {
        return refuse("request_options.request_body_file", files);
    }
    if r.plugin_config.as_deref().is_some_and(|c| c.contains("file_path")) {
        return refuse(
            "request_source_plugin_config",
            "its file_path reads a file on the service's machine; send the requests inline \
             with options_list",
        );
    }
    if spec.tls().ca_file.is_some() {
        return refuse("tls.ca", files);
    }
    let t = spec.telemetry();
    if t.metrics_listen.is_some() {
        return refuse("metrics_listen", "it opens a listener on the service's machine");
    }
    if !t.statsd.is_empty() || !t.stats_sinks.is_empty() {
        return refuse("statsd", "it sends metrics to a host the allowlist does not cover");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> RunSpec {
        RunSpec::from_json(&json).unwrap()
    }

    #[test]
    fn cidrs_contain_what_they_should() {
        let lo = Cidr::parse("127.0.0.0/8").unwrap();
        assert!(lo.contains("127.9.8.7".parse().unwrap()));
        assert!(!lo.contains("128.0.0.1".parse().unwrap()));
        assert!(lo.contains("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!lo.contains("::1".parse().unwrap()));
        let one = Cidr::parse("10.1.2.3").unwrap();
        assert!(one.contains("10.1.2.3".parse().unwrap()));
        assert!(!one.contains("10.1.2.4".parse().unwrap()));
        assert!(Cidr::parse("::/0").unwrap().contains("2001:db8::1".parse().unwrap()));
        assert!(Cidr::parse("[::1]/128").unwrap().contains("::1".parse().unwrap()));
        for bad in ["127.0.0.0/33", "1.2.3", "::1/129", "x/8"] {
            assert!(Cidr::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn allowlist_entries_and_names() {
        let mut a = Allowlist::default();
        a.add("127.0.0.0/8").unwrap();
        a.add("localhost").unwrap();
        assert!(a.add("not a host!").is_err());
        assert!(a.add("").is_err());
        assert_eq!(a.describe(), "127.0.0.0/8, localhost");
        assert!(a.allows("127.0.0.5:80".parse().unwrap()));
        assert!(!a.allows("192.0.2.1:80".parse().unwrap()));
        let mut names = Allowlist::default();
        names.add("localhost").unwrap();
        assert!(names.allows("127.0.0.1:80".parse().unwrap()));
        assert!(!names.allows("127.0.0.2:80".parse().unwrap()));
    }

    #[test]
    fn limits_name_the_rule() {
        let l = Limits {
            rps: Some(500.0),
            duration: Some(Duration::from_secs(60)),
            connections: Some(8),
            workers: Some(2),
        };
        let base =
            serde_json::json!({"uri": "http://127.0.0.1:1/", "concurrency": "2", "connections": 2});
        let with = |k: &str, v: serde_json::Value| {
            let mut o = base.clone();
            o[k] = v;
            spec(o)
        };
        assert!(l.check(&with("requests_per_second", 250.into())).is_ok());
        let e = l.check(&with("requests_per_second", 300.into())).unwrap_err().to_string();
        assert!(e.contains("600 rps") && e.contains("--max-rps 500"), "{e}");
        let e = l.check(&with("requests_per_second", "max".into())).unwrap_err().to_string();
        assert!(e.contains("unpaced"), "{e}");
        let e = l.check(&with("duration", "2m".into())).unwrap_err().to_string();
        assert!(e.contains("--max-duration"), "{e}");
        let e = l.check(&with("no_duration", true.into())).unwrap_err().to_string();
        assert!(e.starts_with("no_duration"), "{e}");
        let e = l.check(&with("connections", 5.into())).unwrap_err().to_string();
        assert!(e.contains("10 in all") && e.contains("--max-connections 8"), "{e}");
        let e = l.check(&with("concurrency", "3".into())).unwrap_err().to_string();
        assert!(e.contains("--max-workers 2"), "{e}");
    }

    #[test]
    fn remote_runs_keep_to_their_targets() {
        let base = serde_json::json!({"uri": "http://127.0.0.1:1/"});
        assert!(check_remote_options(&spec(base.clone())).is_ok());
        for (k, v, says) in [
            ("request_file", serde_json::json!("/etc/passwd"), "request_file"),
            ("metrics_listen", serde_json::json!("0.0.0.0:9090"), "metrics_listen"),
            ("statsd", serde_json::json!(["10.0.0.1:8125"]), "statsd"),
        ] {
            let mut o = base.clone();
            o[k] = v;
            let e = check_remote_options(&spec(o)).unwrap_err().to_string();
            assert!(e.starts_with(says) && e.contains("remote run"), "{e}");
        }
    }
}
