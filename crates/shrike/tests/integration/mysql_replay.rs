//! MySQL replay end to end on a real MariaDB: a client session captured with tcpdump,
//! imported (`--protocol mysql`), and replayed against a fresh server, which then holds the
//! same rows; the replay tallies the queries and the server's errors by code.

use crate::support::capture;
use crate::support::mariadb;

use std::time::Duration;

use crate::support::*;
use capture::Tcpdump;
use mariadb::MariaDb;
use shrike_jobs::{Body, Job, JobReader, MysqlCommand};

const LIMIT: Duration = Duration::from_secs(90);

const SESSION: &str = "CREATE DATABASE shop; USE shop; \
    CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20)); \
    INSERT INTO items VALUES (1, 'tea'), (2, 'cake'); \
    INSERT INTO items VALUES (3, 'jam'); \
    SELECT * FROM items; \
    PREPARE s FROM 'INSERT INTO items VALUES (?, ?)'; SET @a = 4, @b = 'egg'; EXECUTE s USING @a, @b;";

/// `shrike replay JOBS` to a MariaDB on `port`, logged in as `replay` with `password`.
fn replay_as(jobs: &std::path::Path, port: u16, password: &str, extra: &[&str]) -> Output {
    let child = shrike()
        .args(["replay", jobs.to_str().unwrap(), "--target", &format!("127.0.0.1:{port}")])
        .args(["--mysql-user", "replay"])
        .args(extra)
        .env("MYSQL_PWD", password)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_limited(child, LIMIT)
}

#[test]
fn a_captured_session_replays_to_the_same_rows() {
    let dir = scratch("mysql-replay");
    let source = MariaDb::start("source");
    let dump = Tcpdump::start("lo", &format!("tcp port {}", source.port), &dir.join("mysql.pcap"));
    let out = source.tcp_client().args(["-e", SESSION]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pcap = dump.stop();
    assert_eq!(source.sql("SELECT COUNT(*) FROM shop.items").trim(), "4");

    let jobs_file = dir.join("mysql.jobs");
    let port = source.port.to_string();
    let out = run(
        &[
            "jobs",
            "import",
            pcap.to_str().unwrap(),
            "--protocol",
            "mysql",
            "--port",
            &port,
            "-o",
            jobs_file.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let jobs: Vec<Job> = JobReader::open(&jobs_file).unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(jobs.len(), 1, "one client session");
    let queries: Vec<String> = jobs[0]
        .requests
        .iter()
        .filter_map(|r| match &r.body {
            Body::Mysql(MysqlCommand::Query(q)) => Some(q.clone()),
            _ => None,
        })
        .collect();
    // The client's own statements, in order (it may add a few of its own, such as
    // `select @@version_comment`): the login is not among them.
    let ours: Vec<&String> = queries.iter().filter(|q| !q.starts_with("select @@")).collect();
    assert_eq!(ours.first().map(|q| q.as_str()), Some("CREATE DATABASE shop"), "{queries:?}");
    assert!(
        ours.iter().any(|q| q.as_str() == "INSERT INTO items VALUES (3, 'jam')"),
        "{queries:?}"
    );
    assert!(ours.last().is_some_and(|q| q.starts_with("EXECUTE s")), "{queries:?}");

    // Replayed to a fresh server: the same rows, every query tallied.
    let target = MariaDb::start("target");
    let out = replay_as(&jobs_file, target.port, "pw", &["--output-format", "json"]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert_eq!(target.sql("SELECT COUNT(*) FROM shop.items").trim(), "4");
    assert_eq!(target.sql("SELECT name FROM shop.items WHERE id = 4").trim(), "egg");
    let v = json(&out);
    let g = global(&v);
    let sent = jobs[0].requests.len() as u64;
    assert_eq!(counter(g, "upstream_rq_total"), sent);
    assert_eq!(counter(g, "benchmark.answers"), sent, "no errors: {}", out.stderr);
    assert_eq!(counter(g, "upstream_cx_mysql_total"), 1);
    assert!(counter(g, "replay.mysql_rows") >= 3, "the SELECT's rows were read");

    // Replayed again: the server now refuses the CREATEs and the duplicate keys, and the
    // replay tallies each error by its code and class, and goes on.
    let out = replay_as(&jobs_file, target.port, "pw", &[]);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(out.stderr.contains("MySQL error 1007 (SQLSTATE HY000"), "{}", out.stderr);
    assert!(
        out.stderr.contains("MySQL error 1062 (SQLSTATE 23000: integrity constraint violation)"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("answered with an error ×"), "{}", out.stdout);
    assert_eq!(target.sql("SELECT COUNT(*) FROM shop.items").trim(), "4");
}

#[test]
fn a_wrong_password_is_a_clear_connect_failure() {
    let dir = scratch("mysql-login");
    let db = MariaDb::start("login");
    let jobs = dir.join("q.jobs");
    std::fs::write(
        &jobs,
        "{\"shrike_jobs\": 1, \"protocol\": \"mysql\"}\n{\"job\": 1, \"start\": 0, \"requests\": [{\"at\": 0, \"command\": \"ping\"}]}\n",
    )
    .unwrap();
    let out = replay_as(&jobs, db.port, "wrong", &[]);
    assert_eq!(out.code(), 1, "nothing completed: {}", out.stderr);
    assert!(out.stderr.contains("MySQL login to 127.0.0.1"), "{}", out.stderr);
    assert!(out.stderr.contains("Access denied"), "{}", out.stderr);
}

/// The general log's rows for the sessions `user` opened: (thread, command, argument).
fn sessions_of(db: &MariaDb, user: &str) -> Vec<(String, String, String)> {
    let rows = db.sql(&format!(
        "SELECT thread_id, command_type, CONVERT(argument USING utf8mb4) FROM mysql.general_log \
         WHERE thread_id IN (SELECT thread_id FROM mysql.general_log WHERE command_type = \
         'Connect' AND argument LIKE '{user}@%') ORDER BY event_time, thread_id"
    ));
    rows.lines()
        .map(|l| {
            let mut f = l.splitn(3, '\t').map(str::to_string);
            (f.next().unwrap(), f.next().unwrap_or_default(), f.next().unwrap_or_default())
        })
        .collect()
}

#[test]
fn sessions_log_in_as_captured_and_say_goodbye() {
    let dir = scratch("mysql-login-quit");
    let setup = "CREATE DATABASE shop; CREATE TABLE shop.items (id INT PRIMARY KEY); \
                 INSERT INTO shop.items VALUES (1), (2), (3);";
    let source = MariaDb::start("captured-login");
    source.sql(setup);
    let dump = Tcpdump::start("lo", &format!("tcp port {}", source.port), &dir.join("s.pcap"));
    // Three sessions that start in `shop` (the client's -D) and name no database in their
    // statements; the client ends each with COM_QUIT.
    for _ in 0..3 {
        let out = source
            .tcp_client()
            .args(["-D", "shop", "-e", "SELECT COUNT(*) FROM items"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let pcap = dump.stop();
    let jobs_file = dir.join("s.jobs");
    let out = run(
        &["jobs", "import", pcap.to_str().unwrap(), "--protocol", "mysql", "-o"]
            .into_iter()
            .chain([jobs_file.to_str().unwrap()])
            .collect::<Vec<_>>(),
        LIMIT,
    );
    assert_eq!(out.code(), 0, "{}", out.stderr);
    // The import report counts the commands' bytes (it said 0 when commands held none).
    assert!(!out.stderr.contains("(0 bytes)"), "{}", out.stderr);
    let jobs: Vec<Job> = JobReader::open(&jobs_file).unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(jobs.len(), 3, "three sessions");
    for j in &jobs {
        let login = j.login.as_ref().expect("the handshake's login");
        assert_eq!((login.user.as_str(), login.database.as_deref()), ("replay", Some("shop")));
        let last = j.requests.last().map(|r| &r.body);
        assert_eq!(last, Some(&Body::Mysql(MysqlCommand::Quit)), "{j:?}");
    }

    // Replayed with no login flags at all (the password from MYSQL_PWD, as the client reads
    // it): each session logs in as its captured user into its captured database, runs its
    // statement without error, and quits; the server counts no aborted client.
    let target = MariaDb::start("replayed-login");
    target.sql(setup);
    target.sql("SET GLOBAL log_output = 'TABLE'; SET GLOBAL general_log = ON;");
    let child = shrike()
        .args(["replay", jobs_file.to_str().unwrap(), "--target"])
        .arg(format!("127.0.0.1:{}", target.port))
        .args(["--output-format", "json"])
        .env("MYSQL_PWD", "pw")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_limited(child, LIMIT);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    let v = json(&out);
    let g = global(&v);
    let sent: u64 = jobs.iter().map(|j| j.requests.len() as u64).sum();
    assert_eq!(counter(g, "upstream_rq_total"), sent);
    assert_eq!(counter(g, "benchmark.answers"), sent, "no errors: {}", out.stderr);
    assert_eq!(counter(g, "upstream_cx_mysql_total"), 3);
    target.sql("SET GLOBAL general_log = OFF;");
    let log = sessions_of(&target, "replay");
    let threads: std::collections::BTreeSet<&String> = log.iter().map(|(t, _, _)| t).collect();
    assert_eq!(threads.len(), 3, "{log:#?}");
    for t in threads {
        let of = |c: &str| log.iter().filter(|(th, cmd, _)| th == t && cmd == c).count();
        let connect = log.iter().find(|(th, cmd, _)| th == t && cmd == "Connect").unwrap();
        assert!(connect.2.contains(" on shop"), "logged in to the captured database: {log:#?}");
        assert_eq!(of("Quit"), 1, "a goodbye per session: {log:#?}");
    }
    let aborted = target.sql("SHOW GLOBAL STATUS LIKE 'Aborted_clients'");
    assert_eq!(aborted.split_whitespace().nth(1), Some("0"), "{aborted}");

    // The same sessions without their captured logins: every statement fails with 1046 (no
    // database selected), and the replay says what to pass.
    let bare = dir.join("bare.jobs");
    let text = std::fs::read_to_string(&jobs_file).unwrap();
    let stripped: Vec<String> = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if let Some(o) = v.as_object_mut() {
                o.remove("login");
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&bare, stripped.join("\n")).unwrap();
    let out = replay_as(&bare, target.port, "pw", &[]);
    assert_eq!(out.code(), 0, "server errors are answers: {}", out.stderr);
    assert!(out.stderr.contains("MySQL error 1046"), "{}", out.stderr);
    assert!(out.stderr.contains("--mysql-db"), "the hint: {}", out.stderr);
    let out = replay_as(&bare, target.port, "pw", &["--mysql-db", "shop"]);
    assert!(!out.stderr.contains("MySQL error 1046"), "{}", out.stderr);
}
