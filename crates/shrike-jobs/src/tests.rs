use std::io::{Cursor, Read as _, Write as _};
use std::time::Duration;

use super::*;

fn read(text: &str) -> Result<Vec<Job>, JobsError> {
    let r = JobReader::new("t.jobs".into(), Box::new(Cursor::new(text.to_string().into_bytes())))?;
    r.collect()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn reads_the_documented_example() {
    let jobs = read(concat!(
        "{\"shrike_jobs\": 1, \"protocol\": \"http\", \"source\": \"capture.pcap\"}\n",
        "\n",
        "{\"job\": 1, \"start\": 0.0, \"connection\": \"session\", \"requests\": [\n",
    ));
    // A job spans one line: the example above splits one for reading, a file never does.
    assert!(jobs.is_err());
    let jobs = read(concat!(
        "{\"shrike_jobs\": 1, \"protocol\": \"http\", \"source\": \"capture.pcap\"}\n",
        "{\"job\": 1, \"start\": 0.0, \"requests\": [{\"at\": 0.0, \"text\": \"GET / HTTP/1.1\\r\\nhost: a\\r\\n\\r\\n\"}, ",
        "{\"at\": 0.25, \"method\": \"POST\", \"path\": \"/cart\", \"headers\": {\"content-type\": \"text/plain\"}, \"body\": \"one\"}]}\n",
        "{\"job\": 2, \"start\": 0.1, \"protocol\": \"mysql\", \"requests\": [{\"at\": 0, \"command\": \"query\", \"text\": \"SELECT 1\"}]}\n",
    ))
    .unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0].connection, Connection::Session);
    assert_eq!(jobs[0].requests[0].body.data(), b"GET / HTTP/1.1\r\nhost: a\r\n\r\n");
    assert_eq!(
        jobs[0].requests[1].body.data(),
        b"POST /cart HTTP/1.1\r\ncontent-type: text/plain\r\ncontent-length: 3\r\n\r\none"
    );
    assert_eq!(jobs[0].requests[1].at, ms(250));
    assert_eq!(jobs[1].protocol, JobProtocol::Mysql);
    assert_eq!(jobs[1].requests[0].body, Body::Mysql(MysqlCommand::Query("SELECT 1".into())));
    assert_eq!(jobs[1].start, ms(100));
}

#[test]
fn errors_name_the_line_and_field() {
    let cases = [
        ("{\"shrike_jobs\": 2}\n", 1, "shrike_jobs", "version 2"),
        ("{\"job\": 1, \"start\": -1, \"requests\": []}\n", 1, "start", "not a time"),
        ("\n{\"job\": 1, \"start\": 0, \"requests\": [{\"at\": 0}]}\n", 2, "requests[0].text", "missing"),
        (
            "{\"job\": 1, \"start\": 2, \"requests\": []}\n{\"job\": 2, \"start\": 1, \"requests\": []}\n",
            2,
            "start",
            "ordered by start time",
        ),
        (
            "{\"job\": 1, \"start\": 0, \"requests\": [{\"at\": 1, \"text\": \"a\"}, {\"at\": 0.5, \"text\": \"b\"}]}\n",
            1,
            "requests[1].at",
            "back in time",
        ),
        ("{\"job\": 1, \"start\": 0, \"requests\": [], \"tags\": 1}\n", 1, "tags", "unknown field"),
        ("{\"job\": 1, \"start\": 0, \"requests\": [{\"at\": 0, \"base64\": \"%%\"}]}\n", 1, "requests[0].base64", "not base64"),
        (
            "{\"job\": 1, \"start\": 0, \"protocol\": \"mysql\", \"requests\": [{\"at\": 0, \"command\": \"stmt_execute\"}]}\n",
            1,
            "requests[0].statement",
            "statement's id",
        ),
        ("{\"job\": 1, \"start\": 0, \"requests\": [{\"at\": 0, \"method\": \"GET\", \"path\": \"/a b\"}]}\n", 1, "requests[0].path", "not a request target"),
        ("not json\n", 1, "(line)", "not JSON"),
        (
            "{\"job\": 1, \"start\": 0, \"requests\": [{\"at\": 0, \"text\": \"a\", \"response\": {\"status\": 42}}]}\n",
            1,
            "requests[0].response.status",
            "an HTTP status",
        ),
        (
            "{\"job\": 1, \"start\": 0, \"protocol\": \"tcp\", \"requests\": [{\"at\": 0, \"text\": \"a\", \"response\": {\"status\": 200}}]}\n",
            1,
            "requests[0].response",
            "only HTTP requests",
        ),
        (
            "{\"job\": 1, \"start\": 0, \"connect_ahead\": -0.1, \"requests\": []}\n",
            1,
            "connect_ahead",
            "not a time ≥ 0",
        ),
        (
            "{\"job\": 1, \"start\": 0, \"login\": {\"user\": \"app\"}, \"requests\": []}\n",
            1,
            "login",
            "only MySQL jobs",
        ),
        (
            "{\"job\": 1, \"start\": 0, \"protocol\": \"mysql\", \"requests\": [{\"at\": 0, \"command\": \"quit\"}, {\"at\": 0, \"command\": \"ping\"}]}\n",
            1,
            "requests[0].command",
            "comes last",
        ),
    ];
    for (text, line, field, says) in cases {
        let e = read(text).expect_err(text);
        let shown = e.to_string();
        assert_eq!(e.line(), Some(line), "{shown}");
        assert!(shown.starts_with(&format!("t.jobs:{line}: {field}: ")), "{shown}");
        assert!(shown.contains(says), "{shown}");
    }
}

fn sample_jobs() -> Vec<Job> {
    vec![
        Job {
            id: 7,
            start: Duration::from_micros(1_500),
            protocol: JobProtocol::Http,
            connection: Connection::PerRequest,
            server: Some("127.0.0.1:80".into()),
            login: None,
            connect_ahead: Some(Duration::from_micros(250)),
            requests: vec![
                Request {
                    at: Duration::ZERO,
                    pipelined: false,
                    response: None,
                    body: Body::Raw {
                        data: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
                        response_bytes: None,
                    },
                },
                Request {
                    at: ms(20),
                    pipelined: true,
                    response: None,
                    body: Body::Raw {
                        data: vec![0, 159, 146, 150, b'\n'],
                        response_bytes: Some(12),
                    },
                },
            ],
        },
        Job {
            id: 8,
            start: ms(2),
            protocol: JobProtocol::Mysql,
            connection: Connection::Session,
            server: None,
            login: None,
            connect_ahead: None,
            requests: vec![
                Request {
                    at: Duration::ZERO,
                    pipelined: false,
                    response: None,
                    body: Body::Mysql(MysqlCommand::InitDb("shop".into())),
                },
                Request {
                    at: ms(1),
                    pipelined: false,
                    response: None,
                    body: Body::Mysql(MysqlCommand::Prepare { id: 1, sql: "SELECT ?".into() }),
                },
                Request {
                    at: ms(2),
                    pipelined: false,
                    response: None,
                    body: Body::Mysql(MysqlCommand::Execute {
                        id: 1,
                        params: vec![
                            MysqlValue::Null,
                            MysqlValue::Int(-3),
                            MysqlValue::UInt(u64::MAX),
                            MysqlValue::Float(0.5),
                            MysqlValue::Text("x".into()),
                            MysqlValue::Bytes(vec![0xff, 0]),
                        ],
                    }),
                },
                Request {
                    at: ms(3),
                    body: Body::Mysql(MysqlCommand::Close { id: 1 }),
                    pipelined: false,
                    response: None,
                },
                Request {
                    at: ms(3),
                    body: Body::Mysql(MysqlCommand::Ping),
                    pipelined: false,
                    response: None,
                },
            ],
        },
    ]
}

#[test]
fn what_is_written_reads_back_the_same_plain_and_compressed() {
    let dir = std::env::temp_dir().join(format!("shrike-jobs-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["a.jobs", "a.jobs.zst"] {
        let path = dir.join(name);
        let mut info = serde_json::Map::new();
        info.insert("source".into(), serde_json::json!("unit"));
        let mut w = JobWriter::create(&path, JobProtocol::Http, info).unwrap();
        for j in sample_jobs() {
            w.write(&j).unwrap();
        }
        w.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]), name.ends_with(".zst"));
        let r = JobReader::open(&path).unwrap();
        assert_eq!(r.header()["source"], "unit");
        let back: Vec<Job> = r.collect::<Result<_, _>>().unwrap();
        assert_eq!(back, sample_jobs(), "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_chrome_har_becomes_jobs_by_connection() {
    let text = include_str!("../tests/fixtures/chrome.har");
    let har = crate::har::read_har(text).unwrap();
    assert_eq!(har.grouped_by, "connection");
    assert_eq!(har.entries, 5);
    assert_eq!(har.skipped.get("data: URLs (not http or https)"), Some(&1), "{:?}", har.skipped);
    let hosts: Vec<&str> = har.hosts.iter().map(String::as_str).collect();
    assert_eq!(
        hosts,
        ["http://shop.example:80", "https://login.example:8443", "https://shop.example:443"]
    );
    // Three connections: the redirect's (at 08:15:02.100Z), the page's two requests on one h2
    // connection (.150, and 03.400), the login (08:15:03.000Z); in start order.
    let starts: Vec<Duration> = har.jobs.iter().map(|j| j.start).collect();
    assert_eq!(starts, vec![ms(0), ms(50), ms(900)]);
    assert!(har.jobs.iter().all(|j| j.connection == Connection::Session));
    let page = &har.jobs[1];
    assert_eq!(page.requests.len(), 2);
    assert_eq!(page.requests[1].at, ms(1250));
    assert_eq!(
        page.requests[0].body.data(),
        b"GET / HTTP/1.1\r\nhost: shop.example\r\naccept: text/html\r\n\r\n"
    );
    // The HAR's content-length (999) is replaced by the body's.
    assert_eq!(
        page.requests[1].body.data(),
        b"POST /api/cart?v=2 HTTP/1.1\r\nhost: shop.example\r\ncontent-type: application/json\r\ncontent-length: 12\r\n\r\n{\"sku\":\"A1\"}"
    );
    let login = har.jobs[2].requests[0].body.data();
    let login = std::str::from_utf8(login).unwrap();
    assert!(login.starts_with("POST /session HTTP/1.1\r\nhost: login.example:8443\r\n"), "{login}");
    assert!(login.ends_with("content-length: 26\r\n\r\nuser=ann+lee&next=%2Fa%26b"), "{login}");
    assert_eq!(har.jobs[0].server.as_deref(), Some("http://shop.example:80"));
    // The recorded answers, for the canary diff.
    let answers: Vec<Option<Captured>> =
        har.jobs.iter().flat_map(|j| j.requests.iter().map(|r| r.response)).collect();
    let c = |status, bytes| Some(Captured { status, body_bytes: Some(bytes) });
    assert_eq!(answers, vec![c(302, 0), c(200, 1024), c(201, 2), c(200, 0)]);
    // Only the shop's entries, by a glob on the host.
    let shop = crate::har::read_har_hosts(text, &["SHOP.example".into()]).unwrap();
    assert_eq!(shop.jobs.len(), 2);
    assert_eq!(shop.skipped.get("another host (not --host)"), Some(&1));
    let by_port = crate::har::read_har_hosts(text, &["*:8443".into()]).unwrap();
    assert_eq!(by_port.jobs.len(), 1);
    // Malformed HARs name the field.
    let e = crate::har::read_har(r#"{"log": {"entries": [{"request": {}}]}}"#).unwrap_err();
    assert_eq!(e.to_string(), "log.entries[0].startedDateTime: missing");
    assert!(crate::har::read_har("{}").unwrap_err().to_string().starts_with("log: missing"));
}

/// A small zstd frame that inflates to one line longer than `MAX_LINE` (and then a job): the
/// reader stops at the limit with an error naming the line, instead of growing its buffer to
/// whatever the frame inflates to.
#[test]
fn a_line_past_the_limit_is_refused_not_buffered() {
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    enc.write_all(b"{\"shrike_jobs\": 1}\n").unwrap();
    std::io::copy(&mut std::io::repeat(b'\n').take(100_000), &mut enc).unwrap();
    std::io::copy(&mut std::io::repeat(b' ').take(MAX_LINE as u64 + 10), &mut enc).unwrap();
    enc.write_all(b"\n{\"job\": 1, \"start\": 0, \"requests\": []}\n").unwrap();
    let bomb = enc.finish().unwrap();
    assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
    let mut r = JobReader::from_reader("bomb.jobs".into(), Box::new(Cursor::new(bomb))).unwrap();
    let e = r.next().unwrap().unwrap_err();
    assert_eq!(e.line(), Some(100_002), "{e}");
    assert!(e.to_string().contains("longer than 256 MiB"), "{e}");

    // A line of exactly the limit (and its newline) is still read.
    let mut exact = vec![b' '; MAX_LINE - 2];
    exact.extend_from_slice(b"{}\n");
    let mut r = JobReader::from_reader("exact.jobs".into(), Box::new(Cursor::new(exact))).unwrap();
    let e = r.next().unwrap().unwrap_err();
    // Read and parsed: `{}` is JSON, and only then found to lack its id.
    assert_eq!(e.line(), Some(1), "{e}");
    assert!(e.to_string().contains("job: missing"), "{e}");
}

/// The writer refuses a job whose line the reader would refuse, naming it, and the file keeps
/// the jobs before it.
#[test]
fn the_writer_refuses_a_line_the_reader_would() {
    let dir = std::env::temp_dir().join(format!("shrike-jobs-huge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("huge.jobs");
    let mut w = JobWriter::create(&path, JobProtocol::Tcp, serde_json::Map::new()).unwrap();
    let small = sample_jobs().remove(0);
    w.write(&small).unwrap();
    let mut huge = small.clone();
    huge.requests[0].body =
        Body::Raw { data: vec![0xff; MAX_LINE * 3 / 4 + 1], response_bytes: None };
    let e = w.write(&huge).unwrap_err();
    assert_eq!(e.line(), Some(3), "{e}");
    assert!(e.to_string().contains("more than the 256 MiB"), "{e}");
    w.finish().unwrap();
    let back: Vec<Job> = JobReader::open(&path).unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(back, vec![small]);
    let _ = std::fs::remove_dir_all(&dir);
}
