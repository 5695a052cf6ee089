//! Real captures for the import and replay tests: `tcpdump` (Debian's package) on loopback,
//! started and stopped by pid, and a pcap → pcapng rewrite (Debian's tcpdump writes only pcap).
//! A missing tcpdump fails the test, naming the package.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TCPDUMP: &str = "/usr/bin/tcpdump";

/// A running tcpdump writing `path`.
pub struct Tcpdump {
    child: Child,
    pub path: PathBuf,
    /// The port its filter also takes UDP datagrams to (the probes).
    probe_port: u16,
}

impl Tcpdump {
    /// Captures `filter` on `interface` (`lo`, or `any` for Linux cooked capture) into `path`,
    /// returning once a packet sent after tcpdump said it listens has reached the file.
    ///
    /// "listening on" alone is not enough: on a busy machine the first packets after it were
    /// seen missing from `any` captures. So the filter also takes UDP datagrams to a socket of
    /// this process, sent until one is in the file (importers skip them: they carry no TCP).
    pub fn start(interface: &str, filter: &str, path: &Path) -> Tcpdump {
        let probe = UdpSocket::bind("127.0.0.1:0").expect("bind the probe socket");
        let probe_port = probe.local_addr().unwrap().port();
        let filter = format!("({filter}) or (udp dst port {probe_port})");
        assert!(
            Path::new(TCPDUMP).exists(),
            "tcpdump is not installed: install Debian's tcpdump package (.ci/run does)"
        );
        let mut child = Command::new(TCPDUMP)
            // Immediate mode: without it packets wait in the kernel's ring for a block to fill,
            // and the ones still waiting at SIGINT are never written. Immediate mode's ring
            // has a slot per packet, each as large as the loopback MTU, so the default 2 MiB
            // holds ~30 packets: on a busy machine tcpdump, descheduled for a moment, lost
            // segments ("8 packets dropped by kernel", 2 captures in 12 of an h2load run with
            // both cores busy; the h2c import test failed in CI three captures in a row).
            // 64 MiB holds ~1,000; 25 captures of 25 were whole under the same load.
            .args(["-i", interface, "--immediate-mode", "-U", "-B", "65536", "-s", "0", "-w"])
            .arg(path)
            .arg(&filter)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tcpdump");
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut line = String::new();
        loop {
            line.clear();
            assert!(Instant::now() < deadline, "tcpdump did not start listening");
            if err.read_line(&mut line).unwrap_or(0) == 0 {
                let status = child.wait().unwrap();
                panic!("tcpdump exited ({status}) before listening");
            }
            if line.contains("listening on") {
                break;
            }
        }
        // Keep draining its stderr so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in err.lines() {});
        // A pcap file is a 24-byte header until the first packet is written.
        let sender = UdpSocket::bind("127.0.0.1:0").expect("bind the probe sender");
        let written = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len()) > 24;
        while !written(path) {
            assert!(Instant::now() < deadline, "tcpdump wrote no packet within 10 s");
            sender.send_to(b"shrike capture probe", ("127.0.0.1", probe_port)).unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        Tcpdump { child, path: path.to_path_buf(), probe_port }
    }

    /// Stops it (SIGINT, by pid, so it flushes) once everything sent before the call is in
    /// the file, and waits until it has exited.
    ///
    /// A fixed pause was not enough: on a busy machine the last answer of a connection was
    /// seen missing. tcpdump writes packets in the order the kernel hands them over, so an end
    /// probe sent now and found in the file means every packet before it is there too.
    pub fn stop(mut self) -> PathBuf {
        let sender = UdpSocket::bind("127.0.0.1:0").expect("bind the probe sender");
        let marker = b"shrike capture end probe";
        let has_marker =
            |p: &Path| std::fs::read(p).is_ok_and(|b| b.windows(marker.len()).any(|w| w == marker));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !has_marker(&self.path) {
            assert!(Instant::now() < deadline, "tcpdump wrote no end probe within 10 s");
            sender.send_to(marker, ("127.0.0.1", self.probe_port)).unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        Command::new("kill").args(["-INT", &self.child.id().to_string()]).status().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "tcpdump did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.path.clone()
    }
}

impl Drop for Tcpdump {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The same packets as a pcapng file: one interface with the pcap's link type and
/// microsecond (or nanosecond) timestamps.
pub fn pcap_to_pcapng(pcap: &[u8]) -> Vec<u8> {
    let u32le = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let magic = u32le(&pcap[0..4]);
    assert!(magic == 0xa1b2_c3d4 || magic == 0xa1b2_3c4d, "a little-endian pcap");
    let nanos = magic == 0xa1b2_3c4d;
    let linktype = u32le(&pcap[20..24]) as u16;
    let mut out = Vec::new();
    let block = |out: &mut Vec<u8>, kind: u32, body: &[u8]| {
        let len = 12 + body.len().div_ceil(4) * 4;
        out.extend(kind.to_le_bytes());
        out.extend((len as u32).to_le_bytes());
        out.extend(body);
        out.extend(vec![0u8; len - 12 - body.len()]);
        out.extend((len as u32).to_le_bytes());
    };
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend(1u16.to_le_bytes());
    shb.extend(0u16.to_le_bytes());
    shb.extend((-1i64).to_le_bytes());
    block(&mut out, 0x0a0d_0d0a, &shb);
    let mut idb = linktype.to_le_bytes().to_vec();
    idb.extend(0u16.to_le_bytes());
    idb.extend(262_144u32.to_le_bytes());
    idb.extend(9u16.to_le_bytes());
    idb.extend(1u16.to_le_bytes());
    idb.extend([if nanos { 9 } else { 6 }, 0, 0, 0]);
    idb.extend([0u8; 4]);
    block(&mut out, 1, &idb);
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let (sec, frac) = (u64::from(u32le(&pcap[at..])), u64::from(u32le(&pcap[at + 4..])));
        let caplen = u32le(&pcap[at + 8..]) as usize;
        let origlen = u32le(&pcap[at + 12..]);
        let data = &pcap[at + 16..at + 16 + caplen];
        let ts = sec * if nanos { 1_000_000_000 } else { 1_000_000 } + frac;
        let mut epb = 0u32.to_le_bytes().to_vec();
        epb.extend(((ts >> 32) as u32).to_le_bytes());
        epb.extend((ts as u32).to_le_bytes());
        epb.extend((caplen as u32).to_le_bytes());
        epb.extend(origlen.to_le_bytes());
        epb.extend(data);
        epb.extend(vec![0u8; caplen.div_ceil(4) * 4 - caplen]);
        block(&mut out, 6, &epb);
        at += 16 + caplen;
    }
    out
}
