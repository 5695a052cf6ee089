//! `shrike jobs import har FILE.har -o OUT.jobs`: a browser or proxy recording into jobs (see
//! `shrike_jobs::har`), with a report of what was made and what was left out.

use std::path::Path;
use std::process::ExitCode;

use serde_json::{json, Map};
use shrike_jobs::{JobProtocol, JobWriter};

use crate::args::usage;
use crate::log::{self, info, Tag};

pub fn import(path: &Path, output: &Path, hosts: &[String]) -> anyhow::Result<ExitCode> {
    // A HAR is one JSON document: it is read whole (the jobs it makes stream out).
    let text =
        std::fs::read_to_string(path).map_err(|e| usage(format!("{}: {e}", path.display())))?;
    let har = shrike_jobs::har::read_har_hosts(&text, hosts)
        .map_err(|e| usage(format!("{}: {e}", path.display())))?;
    let mut info = Map::new();
    info.insert("source".into(), json!(path.display().to_string()));
    info.insert("imported_by".into(), json!(format!("shrike {}", env!("CARGO_PKG_VERSION"))));
    info.insert("har_grouped_by".into(), json!(har.grouped_by));
    // The hosts the jobs hold: a replay of more than one to one target must be told which.
    info.insert("hosts".into(), json!(har.kept));
    let mut writer =
        JobWriter::create(output, JobProtocol::Http, info).map_err(|e| usage(e.to_string()))?;
    for job in &har.jobs {
        writer.write(job).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    writer.finish().map_err(|e| anyhow::anyhow!("{e}"))?;
    let requests: usize = har.jobs.iter().map(|j| j.requests.len()).sum();
    info!(
        "imported {} job(s) (one per {}) with {requests} request(s) from {} entries, to {} \
         host(s): {}",
        har.jobs.len(),
        har.grouped_by,
        har.entries,
        har.hosts.len(),
        har.hosts.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    for (why, n) in &har.skipped {
        info!("  skipped {n} entr{} with {why}", if *n == 1 { "y" } else { "ies" });
    }
    if har.jobs.is_empty() {
        let why = match hosts.is_empty() {
            true => "no http(s) entry to import".to_string(),
            false => format!("no entry to --host {} (see the hosts above)", hosts.join(", ")),
        };
        log::line(Tag::Error, &format!("{}: {why}", path.display()));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
