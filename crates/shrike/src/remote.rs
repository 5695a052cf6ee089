//! `--remote ADDR[,ADDR…]`: run on `shrike service` generators instead of here, as one
//! coordinated run (shrike-service's coordinator), with the same options and outputs.

use clap::Args;
use shrike_service::coordinator::{ClientSecurity, Fleet, OnFailure};

use std::time::Duration;

use serde_json::{json, Value};

use crate::args::{flag_file, parse, token, usage};
use crate::log::warning;

/// How long `--remote-expect` waits for its generators unless `--remote-wait` says.
const DEFAULT_WAIT: Duration = Duration::from_secs(120);
/// How far ahead the generators' common start is unless `--remote-start-delay` says.
const DEFAULT_START_DELAY: Duration = Duration::from_secs(2);

fn on_failure(s: &str) -> Result<OnFailure, String> {
    match s {
        "continue" => Ok(OnFailure::Continue),
        "abort" => Ok(OnFailure::Abort),
        _ => Err("expected continue or abort".into()),
    }
}

#[derive(Args, Debug, Clone, Default)]
pub struct RemoteArgs {
    /// Run on these `shrike service` generators (HOST:PORT, comma-separated or repeated) as
    /// one coordinated run: each sends 1/N of the load from a common start; intervals,
    /// predicates and the result are the fleet's, merged exactly. `dns:HOST:PORT` stands for
    /// every address HOST resolves to (a Kubernetes headless Service's ready pods).
    #[arg(long, value_name = "ADDR[,ADDR…]", value_delimiter = ',')]
    pub remote: Vec<String>,
    /// With dns: generators, wait until at least N resolve (pods still starting) before the
    /// run starts; give up after --remote-wait.
    #[arg(long, value_name = "N", requires = "remote")]
    pub remote_expect: Option<usize>,
    /// How long to wait for --remote-expect generators [default: 2m].
    #[arg(long, value_name = "DURATION", requires = "remote_expect", value_parser = parse::duration)]
    pub remote_wait: Option<Duration>,
    /// The generators' bearer token, from this file.
    #[arg(long, value_name = "FILE", conflicts_with = "remote_token_env")]
    pub remote_token_file: Option<std::path::PathBuf>,
    /// The generators' bearer token, from this environment variable.
    #[arg(long, value_name = "VAR")]
    pub remote_token_env: Option<String>,
    /// Speak TLS to the generators, trusting this CA (PEM).
    #[arg(long, value_name = "FILE")]
    pub remote_ca: Option<std::path::PathBuf>,
    /// Client certificate (PEM) for generators that require mTLS; needs --remote-key.
    #[arg(long, value_name = "FILE", requires = "remote_key")]
    pub remote_cert: Option<std::path::PathBuf>,
    /// The key of --remote-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "remote_cert")]
    pub remote_key: Option<std::path::PathBuf>,
    /// The name on the generators' certificates, when not the host of ADDR.
    #[arg(long, value_name = "NAME")]
    pub remote_server_name: Option<String>,
    /// When a generator fails: continue (report it, keep its partial result; the default) or
    /// abort (stop the others; exit 1).
    #[arg(long, value_name = "continue|abort", requires = "remote", value_parser = on_failure)]
    pub remote_failure: Option<OnFailure>,
    /// How long after the command the generators start together (time for each to check
    /// and prepare the run), unless --start-at says when [default: 2s].
    #[arg(long, value_name = "DURATION", requires = "remote", value_parser = parse::duration)]
    pub remote_start_delay: Option<Duration>,
    /// How long a generator may stop answering (a partition, a lost node, a frozen process)
    /// before it is lost and named [default: 10s].
    #[arg(long, value_name = "DURATION", requires = "remote", value_parser = keepalive)]
    pub remote_keepalive: Option<Duration>,
}

/// `--remote-keepalive`: a duration of at least 1 s (pings every half of it).
fn keepalive(s: &str) -> Result<Duration, String> {
    let d = parse::duration(s)?;
    if d < Duration::from_secs(1) {
        return Err(format!("{s}: at least 1s (the coordinator pings every half of it)"));
    }
    Ok(d)
}

impl RemoteArgs {
    /// The generators named now: plain entries as given, `dns:` ones as resolved (sorted, so
    /// every coordinator of the same fleet numbers its shards alike). A name that does not
    /// resolve yet counts as none: its pods may still be starting.
    fn discover(&self) -> anyhow::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in self.remote.iter().map(|a| a.trim()).filter(|a| !a.is_empty()) {
            let Some(name) = entry.strip_prefix("dns:") else {
                out.push(entry.to_string());
                continue;
            };
            let (host, port) = name
                .rsplit_once(':')
                .ok_or_else(|| usage(format!("--remote {entry}: expected dns:HOST:PORT")))?;
            let port: u16 =
                port.parse().map_err(|_| usage(format!("--remote {entry}: bad port {port:?}")))?;
            let mut found: Vec<std::net::SocketAddr> =
                std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
                    .map(|it| it.collect())
                    .unwrap_or_default();
            found.sort();
            found.dedup();
            out.extend(found.into_iter().map(|a| a.to_string()));
        }
        Ok(out)
    }

    pub fn is_remote(&self) -> bool {
        !self.remote.is_empty()
    }

    /// Whether any flag of how to reach a service was given (token, TLS, client certificate).
    fn reaches_somewhere(&self) -> bool {
        self.remote_token_file.is_some()
            || self.remote_token_env.is_some()
            || self.remote_ca.is_some()
            || self.remote_cert.is_some()
            || self.remote_server_name.is_some()
    }

    /// Refuses the flags of how to reach a service when nothing is reached: `services` names
    /// what would use them (`--remote`, `--nighthawk-service`, `--request-source`).
    pub fn check_used(&self, used: bool, services: &str) -> anyhow::Result<()> {
        if self.reaches_somewhere() && !used {
            return Err(usage(format!(
                "--remote-token-*, --remote-ca, --remote-cert, --remote-key and \
                 --remote-server-name say how to reach a service: give {services}"
            )));
        }
        Ok(())
    }

    /// What the flags ask of the fleet, checked but not yet looked up (`--dry-run`).
    pub fn plan(&self) -> anyhow::Result<Value> {
        let security = self.security()?;
        let path = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
        Ok(json!({
            "generators": self.remote,
            "expect": self.remote_expect,
            "wait": self.remote_expect.map(|_| format!("{:?}", self.remote_wait.unwrap_or(DEFAULT_WAIT))),
            "failure": format!("{:?}", self.remote_failure.unwrap_or(OnFailure::Continue)),
            "start_delay": format!("{:?}", self.remote_start_delay.unwrap_or(DEFAULT_START_DELAY)),
            "keepalive": format!(
                "{:?}",
                self.remote_keepalive.unwrap_or(shrike_service::coordinator::KEEPALIVE)
            ),
            "token": security.token.is_some(),
            "ca": path(&self.remote_ca),
            "cert": path(&self.remote_cert),
            "key": path(&self.remote_key),
            "server_name": self.remote_server_name,
        }))
    }

    /// The fleet the flags describe (dns: entries resolved, waiting for --remote-expect).
    /// How to reach the services: token, TLS and client certificate (also for
    /// `--nighthawk-service`).
    pub fn security(&self) -> anyhow::Result<ClientSecurity> {
        let token =
            token("remote-", self.remote_token_file.as_deref(), self.remote_token_env.as_deref())?;
        let identity = match (
            flag_file("remote-cert", self.remote_cert.as_deref())?,
            flag_file("remote-key", self.remote_key.as_deref())?,
        ) {
            (Some(c), Some(k)) => Some((c, k)),
            _ => None,
        };
        let ca = flag_file("remote-ca", self.remote_ca.as_deref())?;
        if identity.is_some() && ca.is_none() {
            return Err(usage("--remote-cert needs --remote-ca (client certificates go over TLS)"));
        }
        Ok(ClientSecurity {
            token,
            ca,
            identity,
            server_name: self.remote_server_name.clone(),
            keepalive: self.remote_keepalive,
        })
    }

    pub fn fleet(&self) -> anyhow::Result<Fleet> {
        let wait = self.remote_wait.unwrap_or(DEFAULT_WAIT);
        let deadline = std::time::Instant::now() + wait;
        let generators = loop {
            let found = self.discover()?;
            match self.remote_expect {
                Some(n) if found.len() < n => {
                    if std::time::Instant::now() >= deadline {
                        return Err(anyhow::anyhow!(
                            "--remote-expect {n}: found {} generator(s) after {:?} ({})",
                            found.len(),
                            wait,
                            found.join(", ")
                        ));
                    }
                    std::thread::sleep(std::time::Duration::from_secs(1));
                }
                _ => break found,
            }
        };
        if generators.is_empty() {
            return Err(usage("--remote names no generator"));
        }
        let security = self.security()?;
        let mut fleet = Fleet {
            generators,
            security,
            on_failure: self.remote_failure.unwrap_or(OnFailure::Continue),
            start_delay: self.remote_start_delay.unwrap_or(DEFAULT_START_DELAY),
        };
        self.roll_call(&mut fleet)?;
        Ok(fleet)
    }

    /// Every generator must answer before the run is spread over them, or the run does not
    /// start (exit 1, naming each one missing); `--remote-expect N` lets it start with N or
    /// more, the plan spread over those present (never a share left unsent).
    fn roll_call(&self, fleet: &mut Fleet) -> anyhow::Result<()> {
        let absent = shrike_service::coordinator::roll_call(fleet)?;
        if absent.is_empty() {
            return Ok(());
        }
        let named: Vec<String> =
            absent.iter().map(|a| format!("{} ({})", a.address, a.why)).collect();
        // A generator that refused the run's credentials is the command's to fix (exit 2).
        if let Some(a) = absent.iter().find(|a| a.refused) {
            return Err(usage(format!("generator {} refused the run: {}", a.address, a.why)));
        }
        let present = fleet.generators.len() - absent.len();
        match self.remote_expect {
            Some(n) if present >= n.max(1) => {
                warning!(
                    "{} generator(s) not answering: {}; the run is spread over the {present} \
                     present (--remote-expect {n})",
                    absent.len(),
                    named.join(", ")
                );
                fleet.generators.retain(|g| absent.iter().all(|a| &a.address != g));
                Ok(())
            }
            _ => Err(anyhow::anyhow!(
                "{} of {} generator(s) not answering: {}; nothing was sent (--remote-expect N \
                 starts with N or more)",
                absent.len(),
                fleet.generators.len(),
                named.join(", ")
            )),
        }
    }
}
