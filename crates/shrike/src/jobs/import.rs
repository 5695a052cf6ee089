//! `shrike jobs import [pcap|pcapng|har] FILE -o OUT.jobs`: a packet capture (HTTP, raw TCP or
//! MySQL, by `--protocol`) or a browser recording (HAR) into a jobs file, with a report of
//! what was found and what was left out, and why.
//!
//! Exit codes: 0 when jobs were written (even if parts of the capture were left out: the report
//! says which), 1 when a readable capture held nothing to import, 2 for bad flags or a file
//! that is no capture.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{json, Map};
use shrike_capture::packets::Damage;
use shrike_capture::{ImportOptions, Splitter};
use shrike_jobs::{JobProtocol, JobWriter};

use crate::args::usage;
use crate::log::{self, Tag};

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// `pcap`, `pcapng` or `har`, then the file; the format may be left out (it is recognized
    /// from the file's first bytes).
    #[arg(required = true, num_args = 1..=2, value_name = "[FORMAT] FILE")]
    pub inputs: Vec<String>,
    /// What the capture's connections speak: http (the default), tcp (messages by
    /// --delimiter or --frame-length) or mysql.
    #[arg(long, value_name = "http|tcp|mysql")]
    pub protocol: Option<String>,
    /// The server's port (its side of each connection); without it, the side the SYN went to,
    /// or the lower port.
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// tcp: each message ends with these bytes (\n, \r, \t, \0, \xNN escapes) [default: \0].
    #[arg(long, value_name = "BYTES", conflicts_with = "frame_length")]
    pub delimiter: Option<String>,
    /// tcp: each message is this many bytes.
    #[arg(long, value_name = "N")]
    pub frame_length: Option<usize>,
    /// har: keep only the entries to this host (a glob such as `*.example.com`, matched
    /// against the URL's host, or host:port; repeatable). The report lists every host the
    /// recording holds.
    #[arg(long = "host", value_name = "HOST")]
    pub hosts: Vec<String>,
    /// The jobs file to write (`.zst` compresses; `-` is standard output).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
}

pub fn run(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let (format, path) = match args.inputs.as_slice() {
        [file] => (None, PathBuf::from(file)),
        [format, file] => (Some(format.as_str()), PathBuf::from(file)),
        _ => return Err(usage("give the file to import (and optionally its format first)")),
    };
    let format = match format {
        Some(f @ ("pcap" | "pcapng" | "har")) => f.to_string(),
        Some(f) => {
            return Err(usage(format!("{f:?} is no format Shrike imports (pcap, pcapng, har)")))
        }
        None => sniff(&path)?,
    };
    if format == "har" {
        // A HAR recording is HTTP with its own framing: the capture flags mean nothing to it.
        let capture_only = [
            ("--protocol", args.protocol.is_some()),
            ("--port", args.port.is_some()),
            ("--delimiter", args.delimiter.is_some()),
            ("--frame-length", args.frame_length.is_some()),
        ];
        if let Some((flag, _)) = capture_only.iter().find(|(_, given)| *given) {
            return Err(crate::refuse::in_mode(
                "jobs import",
                flag,
                "it is for packet captures; a HAR recording holds HTTP requests as its browser sent them",
            ));
        }
        crate::atomic::ready(&args.output, "--output")?;
        return super::har::import(&path, &args.output, &args.hosts);
    }
    if !args.hosts.is_empty() {
        return Err(crate::refuse::in_mode(
            "jobs import",
            "--host",
            "it picks a HAR recording's hosts; a capture's server is picked by --port",
        ));
    }
    let splitter = splitter(&args)?;
    let file = std::fs::File::open(&path).map_err(|e| usage(format!("{}: {e}", path.display())))?;
    let protocol = match splitter {
        Splitter::Http => JobProtocol::Http,
        Splitter::Mysql => JobProtocol::Mysql,
        _ => JobProtocol::Tcp,
    };
    let mut info = Map::new();
    info.insert("source".into(), json!(path.display().to_string()));
    info.insert("imported_by".into(), json!(format!("shrike {}", env!("CARGO_PKG_VERSION"))));
    if let Some(p) = args.port {
        info.insert("port".into(), json!(p));
    }
    // How the messages were framed: replay reads the answers the same way unless told not to.
    match &splitter {
        Splitter::Delimited(d) => {
            info.insert("tcp_framing".into(), json!({"delimiter": d}));
        }
        Splitter::Fixed(n) => {
            info.insert("tcp_framing".into(), json!({"frame_length": n}));
        }
        _ => {}
    }
    crate::atomic::ready(&args.output, "--output")?;
    let mut writer =
        JobWriter::create(&args.output, protocol, info).map_err(|e| usage(e.to_string()))?;
    let options = ImportOptions { splitter, port: args.port };
    let mut write_error = None;
    let input = std::io::BufReader::with_capacity(1 << 20, file);
    let report = shrike_capture::import(input, &options, |job| {
        if write_error.is_none() {
            if let Err(e) = writer.write(&job) {
                write_error = Some(e);
            }
        }
    });
    if let Some(e) = write_error {
        return Err(anyhow::anyhow!("{e}"));
    }
    writer.finish().map_err(|e| anyhow::anyhow!("{e}"))?;
    // A file that is no capture at all has no report to give: only what it is not.
    if report.damage == Some(Damage::NotACapture) {
        let _ = std::fs::remove_file(&args.output);
        return Err(usage(format!("{}: not a {format} capture", path.display())));
    }
    crate::out::eprint(
        &report.human().lines().map(|l| format!("[shrike] {l}\n")).collect::<String>(),
    );
    if report.jobs == 0 {
        log::line(Tag::Error, &format!("{}: nothing to import (see above)", path.display()));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn splitter(args: &ImportArgs) -> anyhow::Result<Splitter> {
    let tcp_only = args.delimiter.is_some() || args.frame_length.is_some();
    match args.protocol.as_deref().unwrap_or("http") {
        "http" | "mysql" if tcp_only => {
            Err(usage("--delimiter and --frame-length are for --protocol tcp"))
        }
        "http" => Ok(Splitter::Http),
        "mysql" => Ok(Splitter::Mysql),
        "tcp" => match (args.frame_length, &args.delimiter) {
            (Some(0), _) => Err(usage("--frame-length must be at least 1")),
            (Some(n), _) => Ok(Splitter::Fixed(n)),
            (None, d) => {
                let d = d.as_deref().unwrap_or("\\0");
                let bytes = crate::replay::unescape(d)
                    .map_err(|e| usage(format!("--delimiter {d:?}: {e}")))?;
                if bytes.is_empty() {
                    return Err(usage("--delimiter: give at least one byte"));
                }
                Ok(Splitter::Delimited(bytes))
            }
        },
        other => Err(usage(format!("--protocol {other:?}: expected http, tcp or mysql"))),
    }
}

/// The format, from the file's first bytes.
fn sniff(path: &Path) -> anyhow::Result<String> {
    let mut head = [0u8; 4];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| usage(format!("{}: {e}", path.display())))?;
    let head = &head[..n];
    Ok(match head {
        [0xd4, 0xc3, 0xb2, 0xa1]
        | [0xa1, 0xb2, 0xc3, 0xd4]
        | [0x4d, 0x3c, 0xb2, 0xa1]
        | [0xa1, 0xb2, 0x3c, 0x4d] => "pcap".into(),
        [0x0a, 0x0d, 0x0d, 0x0a] => "pcapng".into(),
        [b'{', ..] | [b' ' | b'\n' | b'\r' | b'\t', ..] | [0xef, 0xbb, 0xbf, ..] => "har".into(),
        _ => {
            // No hint to name a format: bytes that are none of these would fail as any of them.
            let first: Vec<String> = head.iter().map(|b| format!("{b:02x}")).collect();
            return Err(usage(format!(
                "{}: not a pcap, pcapng or HAR file: it begins {} (a capture from tcpdump -w \
                 or Wireshark, or a HAR export from a browser or proxy, is what imports)",
                path.display(),
                if first.is_empty() { "with nothing".to_string() } else { first.join(" ") }
            )));
        }
    })
}
