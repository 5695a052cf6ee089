//! Hand-built captures with known contents: every reassembly and splitting case the import
//! must get exactly right.

use std::time::Duration;

use etherparse::PacketBuilder;
use shrike_jobs::{Body, Job, MysqlCommand, MysqlValue};

use crate::packets::Damage;
use crate::{import_bytes, ImportOptions, Splitter};

const C: [u8; 4] = [10, 0, 0, 1];
const S: [u8; 4] = [10, 0, 0, 2];

/// One TCP segment to put in a capture.
#[derive(Clone)]
struct Seg {
    ms: u64,
    from_client: bool,
    seq: u32,
    flags: &'static str,
    data: Vec<u8>,
}

fn seg(ms: u64, from_client: bool, seq: u32, flags: &'static str, data: &[u8]) -> Seg {
    Seg { ms, from_client, seq, flags, data: data.to_vec() }
}

/// The IPv4 packet of a segment between C:cport and S:sport.
fn ip_packet(s: &Seg, cport: u16, sport: u16) -> Vec<u8> {
    let (src, dst, sp, dp) =
        if s.from_client { (C, S, cport, sport) } else { (S, C, sport, cport) };
    let mut b = PacketBuilder::ipv4(src, dst, 64).tcp(sp, dp, s.seq, 65535);
    for f in s.flags.chars() {
        b = match f {
            'S' => b.syn(),
            'A' => b.ack(1),
            'F' => b.fin(),
            'R' => b.rst(),
            _ => b,
        };
    }
    let mut out = Vec::new();
    b.write(&mut out, &s.data).unwrap();
    out
}

/// A little-endian microsecond pcap of `frames` (time in ms, frame bytes).
fn pcap(linktype: u32, frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(0xa1b2_c3d4u32.to_le_bytes());
    out.extend(2u16.to_le_bytes());
    out.extend(4u16.to_le_bytes());
    out.extend(0i32.to_le_bytes());
    out.extend(0u32.to_le_bytes());
    out.extend(262_144u32.to_le_bytes());
    out.extend(linktype.to_le_bytes());
    for (ms, f) in frames {
        let ts = 1_700_000_000_000 + ms;
        out.extend(((ts / 1000) as u32).to_le_bytes());
        out.extend((((ts % 1000) * 1000) as u32).to_le_bytes());
        out.extend((f.len() as u32).to_le_bytes());
        out.extend((f.len() as u32).to_le_bytes());
        out.extend(f);
    }
    out
}

fn raw_ip_pcap(segs: &[Seg], cport: u16, sport: u16) -> Vec<u8> {
    pcap(101, &segs.iter().map(|s| (s.ms, ip_packet(s, cport, sport))).collect::<Vec<_>>())
}

/// The raw-IP pcap of `segs` with its records in reverse order (time order lost entirely).
fn backwards_pcap(segs: &[Seg], cport: u16, sport: u16) -> Vec<u8> {
    let frames: Vec<(u64, Vec<u8>)> =
        segs.iter().rev().map(|s| (s.ms, ip_packet(s, cport, sport))).collect();
    pcap(101, &frames)
}

fn http() -> ImportOptions {
    ImportOptions { splitter: Splitter::Http, port: None }
}

fn datas(job: &Job) -> Vec<Vec<u8>> {
    job.requests.iter().map(|r| r.body.data().to_vec()).collect()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn reordered_duplicated_and_overlapping_segments_make_the_exact_requests() {
    let get = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
    let post = b"POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    let piped = b"GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\n";
    let (a, b, c) = (&get[..10], &get[10..20], &get[20..]);
    let base = 1001u32;
    let at = |o: usize| base + o as u32;
    let g = get.len();
    let segs = vec![
        seg(0, true, 1000, "S", b""),
        seg(1, false, 5000, "SA", b""),
        seg(10, true, at(10), "A", b),          // ahead of the hole
        seg(11, true, at(0), "A", a),           // fills it
        seg(12, true, at(5), "A", &get[5..25]), // overlaps: bytes already seen
        seg(13, true, at(20), "A", c),
        seg(14, true, at(0), "A", a), // retransmission
        seg(20, false, 5001, "A", b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"),
        seg(100, true, at(g), "A", post),
        seg(200, true, at(g + post.len()), "A", piped),
        seg(300, true, at(g + post.len() + piped.len()), "FA", b""),
        seg(301, false, 5100, "FA", b""),
    ];
    let (jobs, report) = import_bytes(&raw_ip_pcap(&segs, 40000, 80), &http());
    assert_eq!(jobs.len(), 1, "{}", report.human());
    let j = &jobs[0];
    assert_eq!(
        datas(j),
        vec![
            get.to_vec(),
            post.to_vec(),
            b"GET /1 HTTP/1.1\r\n\r\n".to_vec(),
            b"GET /2 HTTP/1.1\r\n\r\n".to_vec()
        ]
    );
    // Each request at the capture time of its first byte.
    let ats: Vec<Duration> = j.requests.iter().map(|r| r.at).collect();
    assert_eq!(ats, vec![ms(0), ms(89), ms(189), ms(189)]);
    assert_eq!(j.server.as_deref(), Some("10.0.0.2:80"));
    // The GET was answered before the POST went; nothing answered the POST before /1 went,
    // and /2 came in the same segment as /1: both pipelined.
    let pipelined: Vec<bool> = j.requests.iter().map(|r| r.pipelined).collect();
    assert_eq!(pipelined, vec![false, false, true, true]);
    assert_eq!(report.pipelined, 2);
    assert!(report.reassembly.reordered <= 1);
    assert_eq!(report.reassembly.duplicate_bytes, 20 + 10);
    assert_eq!((report.requests, report.jobs, report.connections), (4, 1, 1));
}

#[test]
fn a_connection_joined_late_and_a_request_cut_off_at_the_end() {
    // No handshake: the server is the lower port. The second request never ends.
    let segs = vec![
        seg(0, true, 7000, "A", b"GET /x HTTP/1.1\r\n\r\n"),
        seg(5, true, 7019, "A", b"GET /y HTTP/1.1\r\nHost: "),
    ];
    let (jobs, report) = import_bytes(&raw_ip_pcap(&segs, 51000, 8080), &http());
    assert_eq!(datas(&jobs[0]), vec![b"GET /x HTTP/1.1\r\n\r\n".to_vec()]);
    assert_eq!(jobs[0].server.as_deref(), Some("10.0.0.2:8080"));
    assert_eq!(
        report.problems.get("http: a request cut off by the end of its connection or the capture"),
        Some(&1),
        "{report:?}"
    );
}

#[test]
fn a_truncated_last_record_imports_what_came_before() {
    let segs = vec![
        seg(0, true, 1, "A", b"GET /one HTTP/1.1\r\n\r\n"),
        seg(50, true, 22, "A", b"GET /two HTTP/1.1\r\n\r\n"),
    ];
    let mut file = raw_ip_pcap(&segs, 40000, 80);
    file.truncate(file.len() - 7);
    let (jobs, report) = import_bytes(&file, &http());
    assert!(matches!(report.damage, Some(Damage::Truncated { .. })), "{report:?}");
    assert_eq!(datas(&jobs[0]), vec![b"GET /one HTTP/1.1\r\n\r\n".to_vec()]);
    // Garbage is no capture, and nothing panics on any prefix of a real one.
    let (jobs, report) = import_bytes(b"this is not a capture at all", &http());
    assert!(jobs.is_empty() && report.damage == Some(Damage::NotACapture));
    let whole = raw_ip_pcap(&segs, 40000, 80);
    for n in 0..whole.len() {
        let _ = import_bytes(&whole[..n], &http());
    }
}

#[test]
fn records_out_of_time_order_still_give_jobs_in_start_order() {
    // Connection B (port 40002) started before A (40001), but the capture lists A first.
    let a = [seg(500, true, 1, "A", b"GET /a HTTP/1.1\r\n\r\n")];
    let b = [seg(100, true, 1, "A", b"GET /b HTTP/1.1\r\n\r\n")];
    let mut frames: Vec<(u64, Vec<u8>)> =
        a.iter().map(|s| (s.ms, ip_packet(s, 40001, 80))).collect();
    frames.extend(b.iter().map(|s| (s.ms, ip_packet(s, 40002, 80))));
    let (jobs, _) = import_bytes(&pcap(101, &frames), &http());
    let order: Vec<Vec<u8>> = jobs.iter().map(|j| datas(j)[0].clone()).collect();
    assert_eq!(
        order,
        vec![b"GET /b HTTP/1.1\r\n\r\n".to_vec(), b"GET /a HTTP/1.1\r\n\r\n".to_vec()]
    );
    assert_eq!((jobs[0].start, jobs[1].start), (ms(0), ms(400)));
    assert_eq!((jobs[0].id, jobs[1].id), (1, 2));
}

#[test]
fn cooked_captures_ipv6_and_pcapng_with_two_interfaces() {
    let s = seg(0, true, 1, "A", b"GET /v HTTP/1.1\r\n\r\n");
    let ip = ip_packet(&s, 40000, 80);
    // SLL2 (tcpdump -i any): protocol first, 20 bytes in all.
    let mut sll2 = vec![0x08, 0x00];
    sll2.extend([0u8; 18]);
    sll2.extend(&ip);
    let (jobs, _) = import_bytes(&pcap(276, &[(0, sll2)]), &http());
    assert_eq!(jobs.len(), 1);
    // IPv6 over Ethernet.
    let mut v6 = Vec::new();
    PacketBuilder::ethernet2([1; 6], [2; 6])
        .ipv6([1; 16], [2; 16], 64)
        .tcp(40000, 80, 1, 1000)
        .write(&mut v6, b"GET /six HTTP/1.1\r\n\r\n")
        .unwrap();
    let (jobs, _) = import_bytes(&pcap(1, &[(0, v6)]), &http());
    assert_eq!(jobs[0].server.as_deref(), Some("[202:202:202:202:202:202:202:202]:80"));
    // pcapng: interface 0 in microseconds, interface 1 in nanoseconds; one request on each
    // connection, 250 ms apart.
    let s2 = seg(0, true, 1, "A", b"GET /w HTTP/1.1\r\n\r\n");
    let file = pcapng(
        &[(101, 6), (101, 9)],
        &[
            (0, 1_700_000_000_000_000, ip_packet(&s, 40000, 80)),
            (1, 1_700_000_000_250_000_000, ip_packet(&s2, 40001, 80)),
        ],
    );
    let (jobs, report) = import_bytes(&file, &http());
    assert_eq!(jobs.len(), 2, "{}", report.human());
    assert_eq!(jobs[1].start, ms(250));
}

/// A little-endian pcapng: interfaces (link type, tsresol) and packets (interface, time in
/// the interface's units, bytes).
fn pcapng(ifaces: &[(u16, u8)], packets: &[(u32, u64, Vec<u8>)]) -> Vec<u8> {
    fn block(out: &mut Vec<u8>, kind: u32, body: &[u8]) {
        let len = 12 + body.len().div_ceil(4) * 4;
        out.extend(kind.to_le_bytes());
        out.extend((len as u32).to_le_bytes());
        out.extend(body);
        out.extend(vec![0u8; len - 12 - body.len()]);
        out.extend((len as u32).to_le_bytes());
    }
    let mut out = Vec::new();
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend(1u16.to_le_bytes());
    shb.extend(0u16.to_le_bytes());
    shb.extend((-1i64).to_le_bytes());
    block(&mut out, 0x0a0d_0d0a, &shb);
    for &(link, tsresol) in ifaces {
        let mut idb = link.to_le_bytes().to_vec();
        idb.extend(0u16.to_le_bytes());
        idb.extend(262_144u32.to_le_bytes());
        // if_tsresol option (code 9, length 1), then the end of options.
        idb.extend(9u16.to_le_bytes());
        idb.extend(1u16.to_le_bytes());
        idb.extend([tsresol, 0, 0, 0]);
        idb.extend([0u8; 4]);
        block(&mut out, 1, &idb);
    }
    for (iface, ts, data) in packets {
        let mut epb = iface.to_le_bytes().to_vec();
        epb.extend(((ts >> 32) as u32).to_le_bytes());
        epb.extend((*ts as u32).to_le_bytes());
        epb.extend((data.len() as u32).to_le_bytes());
        epb.extend((data.len() as u32).to_le_bytes());
        epb.extend(data);
        epb.extend(vec![0u8; data.len().div_ceil(4) * 4 - data.len()]);
        block(&mut out, 6, &epb);
    }
    out
}

#[test]
fn tcp_messages_by_delimiter_and_by_length_with_answer_sizes() {
    let segs = vec![
        seg(0, true, 1, "A", b"PING\nSET a 1\n"),
        seg(5, false, 1, "A", b"PONG\n"),
        seg(30, true, 14, "A", b"GET a\ntail"),
        seg(35, false, 6, "A", b"1\nOK\n"),
    ];
    let opts = ImportOptions { splitter: Splitter::Delimited(b"\n".to_vec()), port: Some(6379) };
    let (jobs, report) = import_bytes(&raw_ip_pcap(&segs, 40000, 6379), &opts);
    let bodies: Vec<(Vec<u8>, Option<u64>)> = jobs[0]
        .requests
        .iter()
        .map(|r| match &r.body {
            Body::Raw { data, response_bytes } => (data.clone(), *response_bytes),
            Body::Mysql(_) => unreachable!(),
        })
        .collect();
    // PING and SET arrived together: the answer before GET (5 bytes) goes with the last of
    // them, and the 5 after GET with GET.
    assert_eq!(
        bodies,
        vec![
            (b"PING\n".to_vec(), Some(0)),
            (b"SET a 1\n".to_vec(), Some(5)),
            (b"GET a\n".to_vec(), Some(5))
        ]
    );
    assert_eq!(report.unparsed_bytes, 4);
    let opts = ImportOptions { splitter: Splitter::Fixed(4), port: Some(6379) };
    let (jobs, _) = import_bytes(&raw_ip_pcap(&segs, 40000, 6379), &opts);
    assert_eq!(jobs[0].requests.len(), 5);
    // --port names neither side: nothing imported, and said so.
    let opts = ImportOptions { splitter: Splitter::Fixed(4), port: Some(1) };
    let (jobs, report) = import_bytes(&raw_ip_pcap(&segs, 40000, 6379), &opts);
    assert!(jobs.is_empty() && report.other_port_segments == 4);
}

fn mysql_packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let n = payload.len();
    let mut p = vec![n as u8, (n >> 8) as u8, (n >> 16) as u8, seq];
    p.extend(payload);
    p
}

#[test]
fn mysql_commands_without_the_login_with_prepared_statements() {
    let mut greeting = vec![10u8];
    greeting.extend(b"10.11.0-MariaDB\0");
    let mut login = vec![0x0d, 0xa2, 0x00, 0x00]; // capabilities, no SSL, no query attributes
    login.extend([0u8; 28]);
    login.extend(b"app\0");
    login.push(0); // an empty auth response (CLIENT_SECURE_CONNECTION: its length first)
    login.extend(b"inventory\0"); // CLIENT_CONNECT_WITH_DB
    let mut execute = vec![0x17, 5, 0, 0, 0, 0, 1, 0, 0, 0];
    execute.extend([0b10]); // null bitmap: the second parameter is NULL
    execute.push(1); // types follow
    execute.extend([0x08, 0x00, 0xfd, 0x00]);
    execute.extend(42i64.to_le_bytes());
    let mut rebind = vec![0x17, 5, 0, 0, 0, 0, 1, 0, 0, 0, 0b00, 0];
    rebind.extend(7i64.to_le_bytes());
    rebind.extend([2, b'h', b'i']);
    let prepare_ok = [0x00, 5, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0];
    let client = [
        (10, mysql_packet(1, &login)),
        (20, mysql_packet(0, b"\x03SELECT 1")),
        (30, mysql_packet(0, b"\x16INSERT INTO t VALUES (?, ?)")),
        (40, mysql_packet(0, &execute)),
        (50, mysql_packet(0, &rebind)),
        (60, mysql_packet(0, b"\x18\x05\x00\x00\x00\x00\x00long data")),
        (70, mysql_packet(0, b"\x02shop")),
        (80, mysql_packet(0, b"\x01")),
    ];
    let server = [
        (0, mysql_packet(0, &greeting)),
        (15, mysql_packet(2, &[0, 0, 0, 2, 0, 0, 0])),
        (25, mysql_packet(1, &[1])),
        (35, mysql_packet(1, &prepare_ok)),
        (45, mysql_packet(1, &[0, 1, 0, 2, 0, 0, 0])),
        (55, mysql_packet(1, &[0, 1, 0, 2, 0, 0, 0])),
    ];
    let mut segs = Vec::new();
    let (mut cseq, mut sseq) = (1u32, 1u32);
    let mut all: Vec<(u64, bool, Vec<u8>)> =
        client.iter().map(|(t, p)| (*t, true, p.clone())).collect();
    all.extend(server.iter().map(|(t, p)| (*t, false, p.clone())));
    all.sort_by_key(|x| x.0);
    for (t, from_client, p) in all {
        let seq = if from_client { &mut cseq } else { &mut sseq };
        segs.push(seg(t, from_client, *seq, "A", &p));
        *seq += p.len() as u32;
    }
    let opts = ImportOptions { splitter: Splitter::Mysql, port: Some(3306) };
    let (jobs, report) = import_bytes(&raw_ip_pcap(&segs, 40000, 3306), &opts);
    let commands: Vec<MysqlCommand> = jobs[0]
        .requests
        .iter()
        .map(|r| match &r.body {
            Body::Mysql(c) => c.clone(),
            Body::Raw { .. } => unreachable!(),
        })
        .collect();
    assert_eq!(
        commands,
        vec![
            MysqlCommand::Query("SELECT 1".into()),
            MysqlCommand::Prepare { id: 5, sql: "INSERT INTO t VALUES (?, ?)".into() },
            MysqlCommand::Execute { id: 5, params: vec![MysqlValue::Int(42), MysqlValue::Null] },
            MysqlCommand::Execute {
                id: 5,
                params: vec![MysqlValue::Int(7), MysqlValue::Text("hi".into())]
            },
            MysqlCommand::InitDb("shop".into()),
            // Kept: the replay says goodbye as the client did.
            MysqlCommand::Quit,
        ]
    );
    let login = shrike_jobs::Login { user: "app".into(), database: Some("inventory".into()) };
    assert_eq!(jobs[0].login, Some(login));
    // The commands' bytes, headers included, not the 0 bytes their bodies hold.
    assert!(report.request_bytes > 60, "{report:?}");
    assert_eq!(
        report.problems.get("mysql: COM_STMT_SEND_LONG_DATA skipped"),
        Some(&1),
        "{report:?}"
    );
    assert_eq!(jobs[0].requests[0].at, ms(0));
    assert_eq!(jobs[0].start, ms(0));
}

#[test]
fn a_capture_written_backwards_imports_as_if_in_order() {
    let segs = [
        seg(0, true, 1000, "S", b""),
        seg(1, false, 5000, "SA", b""),
        seg(10, true, 1001, "A", b"GET /one HTTP/1.1\r\n\r\n"),
        seg(20, false, 5001, "A", b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"),
        seg(400, true, 1022, "A", b"GET /two HTTP/1.1\r\n\r\n"),
        seg(500, true, 1043, "FA", b""),
        seg(501, false, 5039, "FA", b""),
    ];
    let (ordered, _) = import_bytes(&raw_ip_pcap(&segs, 40000, 80), &http());
    let (backwards, report) = import_bytes(&backwards_pcap(&segs, 40000, 80), &http());
    assert_eq!(backwards, ordered, "{}", report.human());
    assert_eq!(datas(&backwards[0]).len(), 2);
    assert_eq!(backwards[0].requests[1].at, ms(390));
}

#[test]
fn a_backwards_capture_finds_its_server_by_the_syn_even_on_a_higher_port() {
    // The client's port (1000) is lower than the server's (40000): only the SYN, seen last,
    // says who is who.
    let segs = [
        seg(0, true, 1000, "S", b""),
        seg(1, false, 5000, "SA", b""),
        seg(10, true, 1001, "A", b"GET /one HTTP/1.1\r\n\r\n"),
        seg(20, false, 5001, "A", b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"),
        seg(500, true, 1022, "FA", b""),
        seg(501, false, 5039, "FA", b""),
    ];
    let (jobs, report) = import_bytes(&backwards_pcap(&segs, 1000, 40000), &http());
    assert_eq!(jobs.len(), 1, "{}", report.human());
    assert_eq!(report.connections, 1, "{}", report.human());
    assert_eq!(datas(&jobs[0]), vec![b"GET /one HTTP/1.1\r\n\r\n".to_vec()]);
    assert_eq!(jobs[0].server.as_deref(), Some("10.0.0.2:40000"));
}

/// An h2 frame: length, type, flags, stream, payload.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let n = payload.len() as u32;
    let mut f = n.to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend(payload);
    f
}

#[test]
fn an_h2c_upgrade_becomes_plain_requests_with_their_answers() {
    let mut client = b"GET /up HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\n\
        Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n"
        .to_vec();
    client.extend(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    client.extend(h2_frame(4, 0, 0, &[]));
    // Stream 3: GET /b on authority h (HPACK: indexed :method GET and :scheme http, literal
    // :path and :authority with indexed names), headers and stream ended in one frame.
    let block = [0x82, 0x86, 0x44, 2, b'/', b'b', 0x41, 1, b'h'];
    client.extend(h2_frame(1, 0x5, 3, &block));
    let mut server =
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n".to_vec();
    server.extend(h2_frame(4, 0, 0, &[]));
    server.extend(h2_frame(1, 0x4, 1, &[0x88])); // stream 1: 200
    server.extend(h2_frame(0, 0x1, 1, b"hi"));
    server.extend(h2_frame(1, 0x5, 3, &[0x8d])); // stream 3: 404, no body
    let segs = [
        seg(0, true, 1000, "S", b""),
        seg(1, false, 5000, "SA", b""),
        seg(10, true, 1001, "A", &client),
        seg(20, false, 5001, "A", &server),
    ];
    let opts = ImportOptions { splitter: Splitter::Http, port: Some(80) };
    let (jobs, report) = import_bytes(&raw_ip_pcap(&segs, 40000, 80), &opts);
    assert_eq!(report.http2_connections, 1, "{report:?}");
    assert!(report.problems.is_empty(), "{report:?}");
    let requests: Vec<(String, Option<shrike_jobs::Captured>)> = jobs[0]
        .requests
        .iter()
        .map(|r| (String::from_utf8_lossy(r.body.data()).into_owned(), r.response))
        .collect();
    let c = |status, bytes| Some(shrike_jobs::Captured { status, body_bytes: Some(bytes) });
    assert_eq!(
        requests,
        vec![
            // The upgrade's own headers are gone: replayed, it asks for nothing.
            ("GET /up HTTP/1.1\r\nhost: h\r\n\r\n".to_string(), c(200, 2)),
            ("GET /b HTTP/1.1\r\nhost: h\r\n\r\n".to_string(), c(404, 0)),
        ]
    );
    assert!(jobs[0].requests.iter().all(|r| !r.pipelined));
}
