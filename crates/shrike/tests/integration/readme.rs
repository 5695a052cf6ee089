//! The README's examples run as written, apart from their targets, so a stale one fails CI.
//!
//! Every ```sh block is split into commands as bash reads them (`\` continuations joined,
//! comments dropped, quoted newlines kept) and each command runs with `bash -c`, with the built
//! `shrike` first on PATH and a per-block temporary directory as cwd. Before it runs, an explicit
//! list of rewrites applies: targets become servers this test starts on 127.0.0.1, and long runs
//! and high rates are scaled down (numbers only; flags stay as written). A command with an
//! address, host or placeholder no rewrite covers, or a program no rule covers, fails, naming its
//! README line: a new example has to be taught here, never skipped. The ```json spec file and
//! the ```jsonl request list run too.

use crate::support::capture;

use std::io::Read;
use std::net::UdpSocket;
use std::ops::Range;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::{counter, global, Output, Server, TlsServer};

/// Hard limit for one command that ends by itself.
const COMMAND_LIMIT: Duration = Duration::from_secs(30);
/// How long a `--no-duration` run without a stop condition runs before it gets SIGINT.
const INTERRUPT_AFTER: Duration = Duration::from_secs(2);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn readme() -> String {
    std::fs::read_to_string(repo_root().join("README.md")).expect("README.md")
}

// ---- Reading the README ----

/// A fenced code block: its language, the heading it is under, and its body's first line.
struct Block {
    lang: String,
    section: String,
    line: usize,
    body: String,
}

fn blocks(readme: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut open: Option<Block> = None;
    for (i, line) in readme.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(lang)) => {
                open = Some(Block {
                    lang: lang.trim().to_string(),
                    section: section.clone(),
                    line: i + 2,
                    body: String::new(),
                })
            }
            (Some(_), Some(_)) => out.push(open.take().expect("open block")),
            (Some(b), None) => {
                b.body.push_str(line);
                b.body.push('\n');
            }
            (None, None) if line.starts_with('#') => {
                section = line.trim_start_matches('#').trim().replace('`', "");
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "README.md has an unclosed code fence");
    out
}

/// Splits a shell block into commands as bash reads them: a newline ends a command unless it is
/// escaped (a `\` continuation, joined here) or inside quotes (kept: multi-line JSON in single
/// quotes is one word), and `#` at the start of a word starts a comment. Returns each command
/// with the README line it starts on.
fn commands(body: &str, first_line: usize) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let (mut cur, mut start, mut line) = (String::new(), first_line, first_line);
    let (mut single, mut double) = (false, false);
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if cur.trim().is_empty() && !c.is_whitespace() {
            start = line;
        }
        match c {
            '\\' if !single => match chars.next() {
                Some('\n') => line += 1,
                Some(n) => {
                    cur.push('\\');
                    cur.push(n);
                }
                None => cur.push('\\'),
            },
            '\'' if !double => {
                single = !single;
                cur.push(c);
            }
            '"' if !single => {
                double = !double;
                cur.push(c);
            }
            '#' if !single && !double && cur.chars().last().is_none_or(char::is_whitespace) => {
                while chars.next_if(|&n| n != '\n').is_some() {}
            }
            '\n' if !single && !double => {
                line += 1;
                if !cur.trim().is_empty() {
                    out.push((start, cur.trim().to_string()));
                }
                cur.clear();
            }
            '\n' => {
                line += 1;
                cur.push(c);
            }
            _ => cur.push(c),
        }
    }
    assert!(!single && !double, "README.md:{start}: unterminated quote in {cur:?}");
    if !cur.trim().is_empty() {
        out.push((start, cur.trim().to_string()));
    }
    out
}

/// One shell word: its text with quotes removed, where it is in the command, and whether it was
/// written without quotes or escapes (only such words are rewritten).
struct Word {
    text: String,
    span: Range<usize>,
    plain: bool,
}

fn words(cmd: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut cur: Option<Word> = None;
    let (mut single, mut double) = (false, false);
    let mut it = cmd.char_indices();
    while let Some((i, c)) = it.next() {
        if !single && !double && c.is_whitespace() {
            out.extend(cur.take());
            continue;
        }
        let w = cur.get_or_insert_with(|| Word { text: String::new(), span: i..i, plain: true });
        w.span.end = i + c.len_utf8();
        match c {
            '\'' if !double => (single, w.plain) = (!single, false),
            '"' if !single => (double, w.plain) = (!double, false),
            '\\' if !single => {
                w.plain = false;
                if let Some((j, n)) = it.next() {
                    w.text.push(n);
                    w.span.end = j + n.len_utf8();
                }
            }
            _ => w.text.push(c),
        }
    }
    out.extend(cur);
    out
}

/// A command's words, split into its arguments and its redirections.
struct Parsed {
    words: Vec<Word>,
    /// Indices into `words` of the program and its arguments.
    argv: Vec<usize>,
    stdout: Option<String>,
    stderr: Option<String>,
}

impl Parsed {
    fn new(cmd: &str) -> Parsed {
        let words = words(cmd);
        let (mut argv, mut stdout, mut stderr) = (Vec::new(), None, None);
        let mut i = 0;
        while i < words.len() {
            let w = &words[i];
            let op = ["2>", ">", "<"].into_iter().find(|op| w.plain && w.text.starts_with(op));
            match op {
                Some(op) => {
                    let target = if w.text == op {
                        i += 1;
                        words.get(i).map(|w| w.text.clone()).unwrap_or_default()
                    } else {
                        w.text[op.len()..].to_string()
                    };
                    match op {
                        "2>" => stderr = Some(target),
                        ">" => stdout = Some(target),
                        _ => {}
                    }
                }
                None => argv.push(i),
            }
            i += 1;
        }
        Parsed { words, argv, stdout, stderr }
    }

    fn args(&self) -> Vec<&str> {
        self.argv.iter().map(|&i| self.words[i].text.as_str()).collect()
    }

    fn is(&self, program: &[&str]) -> bool {
        self.args().starts_with(program)
    }

    fn has(&self, flags: &[&str]) -> bool {
        !self.values(flags).is_empty() || self.args().iter().any(|a| flags.contains(a))
    }

    /// Values of the flags `names`, as `--flag VALUE` or `--flag=VALUE`, with the value's span
    /// in the command when it was written plain.
    fn values(&self, names: &[&str]) -> Vec<(String, Option<Range<usize>>)> {
        let mut out = Vec::new();
        for (k, &i) in self.argv.iter().enumerate() {
            let w = &self.words[i];
            if names.contains(&w.text.as_str()) {
                if let Some(&v) = self.argv.get(k + 1) {
                    let v = &self.words[v];
                    out.push((v.text.clone(), v.plain.then(|| v.span.clone())));
                }
            } else if let Some((flag, value)) = w.text.split_once('=') {
                if names.contains(&flag) && w.text.starts_with("--") {
                    let span = w.plain.then(|| w.span.start + flag.len() + 1..w.span.end);
                    out.push((value.to_string(), span));
                }
            }
        }
        out
    }
}

// ---- Rewrites ----

/// What the test provides in place of the README's targets, shared by every block.
struct Env {
    plain: String,
    tls_port: u16,
    ca: String,
    statsd: UdpSocket,
    path: String,
    /// A free loopback port for an example's own server that cannot take port 0 (nginx).
    free_port: u16,
}

impl Env {
    fn statsd_addr(&self) -> String {
        self.statsd.local_addr().expect("statsd address").to_string()
    }

    fn ports(&self) -> Vec<u16> {
        let port = |a: &str| a.rsplit(':').next().and_then(|p| p.parse().ok()).expect("port");
        vec![port(&self.plain), self.tls_port, port(&self.statsd_addr()), self.free_port]
    }

    /// The allow-list: every target and address the README may name outside a block that starts
    /// its own server, and what this test puts in its place. Anything else fails.
    fn rewrites(&self) -> Vec<(&'static str, String)> {
        vec![
            ("http://127.0.0.1:8080", format!("http://{}", self.plain)),
            ("https://127.0.0.1:8443", format!("https://127.0.0.1:{}", self.tls_port)),
            // The test certificate names localhost, so the name is still verified.
            ("https://service.internal.example", format!("https://localhost:{}", self.tls_port)),
            ("--metrics-listen 127.0.0.1:9464", "--metrics-listen 127.0.0.1:0".into()),
            ("--statsd 127.0.0.1:8125", format!("--statsd {}", self.statsd_addr())),
            // Spans go to the plain test server, which answers a POST as a collector would.
            ("zipkin://127.0.0.1:9411", format!("zipkin://{}", self.plain)),
            // Replay's targets and the captured server's port: the plain server's.
            ("--target 127.0.0.1:8080", format!("--target {}", self.plain)),
            ("--port 8080", format!("--port {}", self.ports()[0])),
            // The sweep recipe's nginx listens where its config says: a free port.
            ("127.0.0.1:8089", format!("127.0.0.1:{}", self.free_port)),
            // "On the minute" waits up to a minute; a few seconds ahead runs the same date form.
            (
                "date -u -d '+1 minute' +%Y-%m-%dT%H:%M:00Z",
                "date -u -d '+3 seconds' +%Y-%m-%dT%H:%M:%SZ".into(),
            ),
        ]
    }
}

/// A server started by an earlier `shrike serve --listen 127.0.0.1:N` line of the same block:
/// later lines' `127.0.0.1:N` and `localhost:N` mean it.
struct Local {
    readme_port: u16,
    port: u16,
}

/// Applies the address rewrites, then (for `shrike run`) scales durations, rates, stages and
/// large termination counts, and gives a run without any length one second instead of 5.
fn rewrite(cmd: &str, env: &Env, locals: &[Local]) -> String {
    let mut s = cmd.to_string();
    for l in locals {
        for host in ["127.0.0.1", "localhost"] {
            s = s.replace(&format!("{host}:{}", l.readme_port), &format!("{host}:{}", l.port));
        }
    }
    for (from, to) in env.rewrites() {
        s = s.replace(from, &to);
    }
    let p = Parsed::new(&s);
    if !p.is(&["shrike", "run"]) {
        return s;
    }
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    for (flags, scale) in [
        (&["--rps", "-r", "-q"][..], scale_rate as fn(&str) -> Option<String>),
        (&["--duration", "-d", "-z"], |_| Some("1s".into())),
        (&["--stages"], scale_stages),
        (&["--termination-predicate"], scale_count),
    ] {
        for (value, span) in p.values(flags) {
            if let (Some(span), Some(new)) = (span, scale(&value)) {
                edits.push((span, new));
            }
        }
    }
    let bounded = ["--duration", "-d", "-z", "--no-duration", "--stages", "--spec", "-n"];
    if !p.has(&bounded) && !p.has(&["--requests"]) {
        let run = &p.words[p.argv[1]].span;
        edits.push((run.end..run.end, " --duration 1s".into()));
    }
    edits.sort_by_key(|e| std::cmp::Reverse(e.0.start));
    for (span, new) in edits {
        s.replace_range(span, &new);
    }
    s
}

/// A tenth of rates above 50 (so 5000 rps becomes 500); `max` and small rates stay.
fn scale_rate(r: &str) -> Option<String> {
    let r: f64 = r.parse().ok().filter(|r| *r > 50.0)?;
    Some(format!("{}", (r / 10.0).round()))
}

/// Every stage lasts 1 s, at a tenth of its rate.
fn scale_stages(list: &str) -> Option<String> {
    let stages: Option<Vec<String>> = list
        .split(',')
        .map(|st| {
            let (_, rate) = st.split_once(':')?;
            Some(format!("1s:{}", scale_rate(rate).unwrap_or_else(|| rate.to_string())))
        })
        .collect();
    Some(stages?.join(","))
}

/// `C:N` for N+1 of at least 1000 becomes a hundredth of the count (9999 → 99): at a tenth of
/// the rate that takes a tenth of the time.
fn scale_count(pred: &str) -> Option<String> {
    let (name, n) = pred.rsplit_once(':')?;
    let n: u64 = n.parse().ok().filter(|n| *n >= 999)?;
    Some(format!("{name}:{}", (n + 1) / 100 - 1))
}

/// After rewriting, what is still unresolved: a placeholder, or an address or target this test
/// has no server for.
fn unresolved(cmd: &str, ports: &[u16]) -> Option<String> {
    if let Some(p) = ["…", "PORT"].into_iter().find(|p| cmd.contains(p)) {
        return Some(format!("a placeholder ({p:?}): write something that runs when pasted"));
    }
    for (i, _) in cmd.match_indices("://") {
        let auth = cmd[i + 3..].split(['/', ' ', '\'', '"', '\n']).next().unwrap_or_default();
        let (host, port) = auth.rsplit_once(':').unwrap_or((auth, ""));
        let local = host == "127.0.0.1" || host == "localhost";
        if !local || !port.parse().is_ok_and(|p: u16| ports.contains(&p)) {
            return Some(format!("target {auth:?}: no rewrite in tests/readme.rs covers it"));
        }
    }
    for host in ["127.0.0.1:", "localhost:"] {
        for (i, _) in cmd.match_indices(host) {
            let rest = &cmd[i + host.len()..];
            let digits = &rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len())];
            match digits.parse::<u16>() {
                Ok(p) if p == 0 || ports.contains(&p) => {}
                _ => return Some(format!("address {host}{digits}…: no rewrite covers it")),
            }
        }
    }
    let p = Parsed::new(cmd);
    for (addr, _) in
        p.values(&["--listen", "--statsd", "--multi-target-endpoint", "--bind-address"])
    {
        if !(addr.starts_with("127.") || addr.starts_with("localhost:")) {
            return Some(format!("address {addr:?} is not on 127.0.0.0/8"));
        }
    }
    None
}

// ---- Running commands ----

/// A command running under `bash -c` in its own process group, its output collected as it comes.
struct Running {
    child: Child,
    /// Whether the child has been waited for (after that its id may belong to another process).
    reaped: bool,
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
}

fn collect(mut from: impl Read + Send + 'static, into: &Arc<Mutex<Vec<u8>>>) -> JoinHandle<()> {
    let into = Arc::clone(into);
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    })
}

impl Running {
    fn spawn(cmd: &str, cwd: &Path, env: &Env) -> Running {
        let mut child = Command::new("bash")
            .args(["-c", cmd])
            .current_dir(cwd)
            .env("PATH", &env.path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("spawn bash");
        let (out, err) = (Arc::default(), Arc::default());
        let readers = vec![
            collect(child.stdout.take().expect("stdout"), &out),
            collect(child.stderr.take().expect("stderr"), &err),
        ];
        Running { child, reaped: false, out, err, readers }
    }

    /// Signals the command's process group (bash and whatever it started), by its id.
    fn signal(&self, sig: &str) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args([sig, "--", &group]).stderr(Stdio::null()).status();
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.err.lock().unwrap()).into_owned()
    }

    /// The first `n` stdout lines, waiting up to `limit` for them.
    fn lines(&self, n: usize, limit: Duration) -> Result<Vec<String>, String> {
        let deadline = Instant::now() + limit;
        loop {
            let out = String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned();
            if out.matches('\n').count() >= n {
                return Ok(out.lines().take(n).map(str::to_string).collect());
            }
            if Instant::now() > deadline {
                return Err(format!("printed {out:?} on stdout within {limit:?}, not {n} line(s)"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits up to `limit` for the command to end; past it, kills its process group.
    fn finish(mut self, limit: Duration) -> Result<Output, String> {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                self.reaped = true;
                break s;
            }
            if Instant::now() > deadline {
                let stderr = self.stderr();
                drop(self);
                return Err(format!("did not finish within {limit:?}; stderr:\n{stderr}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let text = |b: &Arc<Mutex<Vec<u8>>>| String::from_utf8_lossy(&b.lock().unwrap()).into();
        Ok(Output { status, stdout: text(&self.out), stderr: text(&self.err) })
    }

    fn stop(self) {
        drop(self)
    }
}

impl Drop for Running {
    /// Ends a server, an overrunning command, or anything left running when a test panics.
    fn drop(&mut self) {
        if !self.reaped {
            self.signal("-KILL");
            let _ = self.child.wait();
        }
    }
}

/// `curl -i` of `url`, with the server's CA for TLS: the response as curl shows it, or `None`
/// when none came.
fn fetch(url: &str, ca: Option<&str>, cwd: &Path) -> Option<String> {
    let mut c = Command::new("curl");
    c.args(["-sS", "-i", "--max-time", "10", url]);
    if let Some(ca) = ca {
        c.args(["--cacert", ca]);
    }
    let out = c.current_dir(cwd).output().expect("curl (apt-get install curl)");
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

// ---- One block ----

/// Runs a block's commands in order in `dir`; returns a message per failed command.
fn run_block(block: &Block, env: &Env, dir: &Path) -> Vec<String> {
    std::fs::create_dir_all(dir).expect("block dir");
    // Files the examples read without making them: the TLS target's CA, and for replay a
    // capture and a HAR recording.
    std::fs::copy(&env.ca, dir.join("ca.pem")).expect("ca.pem");
    if block.section == "Replay: shrike jobs and shrike replay" {
        replay_inputs(dir, env);
    }
    let commands = match block_commands(block, dir, env) {
        Ok(commands) => commands,
        Err(why) => {
            return vec![format!("README.md:{}: a ```{} block: {why}", block.line, block.lang)]
        }
    };
    let mut locals = Vec::new();
    let mut servers = Vec::new();
    let mut failures = Vec::new();
    for (line, text) in commands {
        let t = Instant::now();
        let program = Parsed::new(&text).args().first().map(|p| p.to_string()).unwrap_or_default();
        let result = match stand_in(&block.section, &text) {
            Some(None) => Ok(()),
            Some(Some(cmd)) => run_one(&cmd, env, dir, &mut locals, &mut servers),
            None if !["shrike", "curl", "printf"].contains(&program.as_str()) => {
                Err((text.clone(), format!("no rule in tests/readme.rs runs {program:?}")))
            }
            None => run_one(&text, env, dir, &mut locals, &mut servers),
        };
        match result {
            Ok(()) => eprintln!("README.md:{line}: ok in {:.1?}: {text}", t.elapsed()),
            Err((ran, why)) => failures.push(format!(
                "README.md:{line}: {text}\n  ran: {ran}\n  in {}\n  {why}",
                dir.display()
            )),
        }
    }
    for s in servers {
        Running::stop(s);
    }
    failures
}

/// `traffic.pcap`, a real tcpdump capture of a second of requests to the plain server (so its
/// port is the README's 8080, rewritten), and `recording.har`, a Chrome-shaped recording.
fn replay_inputs(dir: &Path, env: &Env) {
    let port = env.ports()[0];
    let dump =
        capture::Tcpdump::start("lo", &format!("tcp port {port}"), &dir.join("traffic.pcap"));
    let out = Command::new(env!("CARGO_BIN_EXE_shrike"))
        .args(["run", &format!("http://{}/api/items", env.plain), "--rps", "20", "--duration", "1"])
        .output()
        .expect("run shrike");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    dump.stop();
    let har = repo_root().join("crates/shrike-jobs/tests/fixtures/chrome.har");
    std::fs::copy(har, dir.join("recording.har")).expect("recording.har");
}

/// The commands of a block: a shell block's own, or for the JSON spec file and the JSONL request
/// list, the file (written into `dir`, targets rewritten) and a run that uses it.
fn block_commands(block: &Block, dir: &Path, env: &Env) -> Result<Vec<(usize, String)>, String> {
    let write = |name: &str| {
        let mut text = block.body.clone();
        for (from, to) in env.rewrites() {
            text = text.replace(from, &to);
        }
        if let Some(why) = unresolved(&text, &env.ports()) {
            return Err(why);
        }
        std::fs::write(dir.join(name), text).expect("write example file");
        Ok(())
    };
    Ok(match (block.lang.as_str(), block.section.as_str()) {
        ("sh", _) => commands(&block.body, block.line),
        ("json", "Spec files and re-runs") => {
            write("spec.json")?;
            vec![(block.line, "shrike run --spec spec.json --duration 1s".into())]
        }
        ("jsonl", "Request lists and templates") => {
            write("list.jsonl")?;
            // The list's body_file; bytes, as the text says.
            std::fs::write(dir.join("blob.bin"), [0u8, 1, 2, 255].repeat(256)).expect("blob");
            let run = "shrike run http://127.0.0.1:8080/ --request-file list.jsonl \
                       --failure-predicate benchmark.expectation_mismatch:0";
            vec![(block.line, run.into())]
        }
        // The sample summary: a real run's summary has the same lines in the same order (first
        // words: labels, percentile rows, notes), so the picture cannot drift from the output.
        // The Lateness row appears only when the client was late (a loaded machine): apart.
        ("text", "Outputs and shrike transform") => {
            std::fs::write(dir.join("readme-summary.txt"), &block.body).expect("write sample");
            let firsts = "awk '$1 != \"Lateness:\" {print $1}'";
            let check = format!(
                "shrike run --duration 1s > run-summary.txt && \
                 diff <({firsts} readme-summary.txt) <({firsts} run-summary.txt)"
            );
            vec![(block.line, check)]
        }
        (_, section) => return Err(format!("under {section:?}: teach tests/readme.rs to run it")),
    })
}

/// The commands not run as written: `Some(None)` skips one, `Some(Some(cmd))` runs `cmd` instead.
fn stand_in(section: &str, text: &str) -> Option<Option<String>> {
    let root = repo_root();
    match (section, text) {
        // The build is this test's own; the run is the built binary's, with no URL.
        ("Set up and try it", "cargo run --release -- run") => Some(Some("shrike run".into())),
        // CI itself, of which this test is a part.
        ("Set up and try it", "bash .ci/run") => {
            assert!(root.join(".ci/run").is_file(), ".ci/run does not exist");
            Some(None)
        }
        // Minutes of pinned load against nginx and wrk: check only that the script starts.
        ("Benchmarks", "cargo build --release && python3 bench/compare.py") => {
            Some(Some(format!("python3 {}/bench/compare.py --help", root.display())))
        }
        _ => None,
    }
}

/// Rewrites and runs one command and checks what it claims; a failure returns the command as
/// run and why.
fn run_one(
    text: &str,
    env: &Env,
    dir: &Path,
    locals: &mut Vec<Local>,
    servers: &mut Vec<Running>,
) -> Result<(), (String, String)> {
    let original = Parsed::new(text);
    let mut cmd = rewrite(text, env, locals);
    // `shrike service` (gRPC) starts in the background like a test server.
    let serve = original.is(&["shrike", "serve"]) || original.is(&["shrike", "service"]);
    let mut readme_port = None;
    if serve {
        let p = Parsed::new(&cmd);
        let Some((addr, Some(span))) = p.values(&["--listen"]).pop() else {
            return Err((cmd, "a server example needs --listen 127.0.0.1:PORT".into()));
        };
        readme_port = addr.strip_prefix("127.0.0.1:").and_then(|p| p.parse::<u16>().ok());
        cmd.replace_range(span, "127.0.0.1:0");
    }
    let mut ports = env.ports();
    ports.extend(locals.iter().map(|l| l.port));
    if let Some(why) = unresolved(&cmd, &ports) {
        return Err((cmd, why));
    }
    let p = Parsed::new(&cmd);
    let result = if serve {
        start_server(&cmd, &p, env, dir).map(|(server, port)| {
            if let Some(readme_port) = readme_port.filter(|&p| p != 0) {
                locals.push(Local { readme_port, port });
            }
            servers.push(server);
        })
    } else {
        run_and_check(&cmd, &p, env, dir)
    };
    result.map_err(|why| (cmd, why))
}

/// Starts a `shrike serve` example in the background and checks that it prints its address
/// (and `tls-ca: PATH` for a generated certificate) and answers.
fn start_server(cmd: &str, p: &Parsed, env: &Env, dir: &Path) -> Result<(Running, u16), String> {
    let server = Running::spawn(cmd, dir, env);
    if p.is(&["shrike", "service"]) {
        // A gRPC service: its address line is the check; the runs that use it test the rest.
        let line = server.lines(1, Duration::from_secs(10)).map(|l| l[0].clone());
        let port = line.as_ref().ok().and_then(|l| l.strip_prefix("127.0.0.1:")?.parse().ok());
        return match port {
            Some(port) => Ok((server, port)),
            None => {
                let stderr = server.stderr();
                server.stop();
                Err(format!("no address line ({line:?}); stderr:\n{stderr}"))
            }
        };
    }
    let tls = p.has(&["--tls", "--tls-cert"]);
    let generated = p.has(&["--tls"]) && !p.has(&["--tls-cert"]);
    let lines = match server.lines(if generated { 2 } else { 1 }, Duration::from_secs(10)) {
        Ok(lines) => lines,
        Err(e) => {
            let stderr = server.stderr();
            server.stop();
            return Err(format!("{e}; stderr:\n{stderr}"));
        }
    };
    let check = || -> Result<u16, String> {
        let port = lines[0].strip_prefix("127.0.0.1:").and_then(|p| p.parse::<u16>().ok());
        let port = port.ok_or_else(|| format!("first line {:?} is not the address", lines[0]))?;
        let ca = match lines.get(1) {
            Some(l) => Some(l.strip_prefix("tls-ca: ").ok_or(format!("second line {l:?}"))?),
            None => None,
        };
        if let Some(ca) = ca.filter(|ca| !dir.join(ca).is_file()) {
            return Err(format!("tls-ca {ca} is not a file"));
        }
        let url = match tls {
            true => format!("https://localhost:{port}/"),
            false => format!("http://127.0.0.1:{port}/"),
        };
        // Fault-injecting defaults may reset a request; a few tries tell a server from none.
        let response = (0..3).find_map(|_| fetch(&url, ca, dir));
        let response = response.ok_or_else(|| format!("{url} did not answer"))?;
        // What the flags promise for every response (a --config overrides them).
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let promised = |flag| if p.has(&["--config"]) { vec![] } else { p.values(&[flag]) };
        for (size, _) in promised("--response-body-size") {
            if body.len().to_string() != size {
                return Err(format!("{url}: a {}-byte body, not {size}", body.len()));
            }
        }
        for (header, _) in promised("--response-header") {
            if !head.lines().any(|l| l.trim().eq_ignore_ascii_case(header.trim())) {
                return Err(format!("{url}: no {header:?} in\n{head}"));
            }
        }
        Ok(port)
    };
    match check() {
        Ok(port) => Ok((server, port)),
        Err(e) => {
            let stderr = server.stderr();
            server.stop();
            Err(format!("{e}; stderr:\n{stderr}"))
        }
    }
}

/// Runs a command to its end (a run with no stop condition gets SIGINT after a while and must
/// exit 130, as the README says) and checks its exit status and the outputs it claims.
fn run_and_check(cmd: &str, p: &Parsed, env: &Env, dir: &Path) -> Result<(), String> {
    let endless = p.is(&["shrike", "run"])
        && p.has(&["--no-duration"])
        && !p.has(&["--termination-predicate", "-n", "--requests"]);
    let running = Running::spawn(cmd, dir, env);
    let mut scraped = Ok(());
    if endless {
        std::thread::sleep(INTERRUPT_AFTER);
        if p.has(&["--metrics-listen"]) {
            scraped = scrape_metrics(&running.stderr());
        }
        running.signal("-INT");
    }
    let out = running.finish(COMMAND_LIMIT)?;
    let want = if endless { 130 } else { 0 };
    if out.code() != want {
        let tail: Vec<&str> = out.stderr.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!("exit {} (want {want}); stderr:\n{}", out.code(), tail.join("\n")));
    }
    scraped?;
    check_outputs(p, &out, env, dir)
}

/// The live Prometheus endpoint the run logged answers with Shrike's metrics.
fn scrape_metrics(stderr: &str) -> Result<(), String> {
    let url = stderr
        .split_whitespace()
        .find(|w| w.starts_with("http://") && w.ends_with("/metrics"))
        .ok_or_else(|| format!("no metrics address logged; stderr:\n{stderr}"))?;
    let out = Command::new("curl").args(["-sS", "--max-time", "5", url]).output();
    let body = String::from_utf8_lossy(&out.expect("curl").stdout).into_owned();
    match body.contains("shrike_run_elapsed_seconds") {
        true => Ok(()),
        false => Err(format!("{url} served {body:?}")),
    }
}

/// What the README says a command produces, where it is cheap to check.
fn check_outputs(p: &Parsed, out: &Output, env: &Env, dir: &Path) -> Result<(), String> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).map_err(|e| format!("{f}: {e}"));
    // A sweep that started a daemonizing server stopped it: its pid file names no process.
    for (f, _) in p.values(&["--server-pid-file"]) {
        let pid = std::fs::read_to_string(dir.join(&f)).ok().and_then(|t| t.trim().parse().ok());
        if let Some(pid) = pid.filter(|pid: &u32| Path::new(&format!("/proc/{pid}")).exists()) {
            return Err(format!("the server the sweep started (pid {pid}, {f}) still runs"));
        }
        if p.is(&["shrike", "sweep"]) && !out.stdout.contains("server CPU") {
            return Err(format!("no server CPU sampled through {f}:\n{}", out.stdout));
        }
    }
    if let Some(f) = p.stdout.as_deref().filter(|f| f.ends_with(".json")) {
        let v: serde_json::Value =
            serde_json::from_str(&read(f)?).map_err(|e| format!("{f} is not JSON: {e}"))?;
        for (pred, _) in p.values(&["--termination-predicate"]) {
            let (name, n) = pred.rsplit_once(':').ok_or("predicate")?;
            let n: u64 = n.parse().map_err(|_| "predicate count")?;
            let (kind, got) = (&v["shrike"]["termination"]["kind"], counter(global(&v), name));
            if kind != "termination_predicate" || got <= n {
                return Err(format!("{f}: ended by {kind} with {name} = {got}, not by {pred}"));
            }
        }
    }
    if let Some(f) = p.stderr.as_deref().filter(|f| f.ends_with(".jsonl")) {
        let text = read(f)?;
        for (i, l) in text.lines().enumerate() {
            let v: serde_json::Value = serde_json::from_str(l)
                .map_err(|e| format!("{f}:{}: not JSON ({e}): {l}", i + 1))?;
            v.as_object().ok_or_else(|| format!("{f}:{}: not an object", i + 1))?;
        }
        if p.has(&["--stats-interval"]) && !text.contains(r#""type":"interval""#) {
            return Err(format!("{f} has no interval:\n{text}"));
        }
    }
    if p.is(&["shrike", "report"]) {
        for (f, _) in p.values(&["-o", "--output"]) {
            if !read(&f)?.starts_with("<!DOCTYPE html>") {
                return Err(format!("{f} is not an HTML page"));
            }
        }
    }
    if p.has(&["--statsd"]) {
        let mut buf = [0u8; 2048];
        let mut seen = Vec::new();
        while let Ok(n) = env.statsd.recv(&mut buf) {
            seen.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        if !seen.iter().any(|d| d.starts_with("shrike.")) {
            return Err(format!("no statsd datagram from shrike: {seen:?}"));
        }
    }
    if p.is(&["curl"]) {
        return check_curl(p, out);
    }
    Ok(())
}

/// `curl` with the test server's config header gets what the header asks for (status and
/// headers seen with `-i`); `curl` without either (the stats path) gets JSON.
fn check_curl(p: &Parsed, out: &Output) -> Result<(), String> {
    let args = p.args();
    let config = args
        .windows(2)
        .filter(|w| w[0] == "-H")
        .find_map(|w| w[1].strip_prefix("x-nighthawk-test-server-config:"));
    let (head, body) = match (args.contains(&"-i"), config) {
        (true, _) => out.stdout.split_once("\r\n\r\n").ok_or("no response head")?,
        (false, Some(_)) => ("", out.stdout.as_str()),
        (false, None) => {
            let v: serde_json::Value = serde_json::from_str(&out.stdout)
                .map_err(|e| format!("not JSON ({e}): {}", out.stdout))?;
            return match v["requests"].as_u64() {
                Some(n) if n > 0 => Ok(()),
                _ => Err(format!("no requests counted: {v}")),
            };
        }
    };
    let config: serde_json::Value = match config {
        Some(c) => serde_json::from_str(c).map_err(|e| format!("the config header: {e}"))?,
        None => serde_json::Value::Null,
    };
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).unwrap_or_default();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let want = config["response_status"].as_u64().unwrap_or(200).to_string();
    if !head.is_empty() && status != want {
        return Err(format!("status {status}, not {want}:\n{}", out.stdout));
    }
    if let Some(n) = config["response_body_size"].as_u64() {
        if body.len() as u64 != n {
            return Err(format!("a {}-byte body, not {n}: {body:?}", body.len()));
        }
    }
    // Without -i curl shows no headers to check.
    let asked = config["response_headers"].as_array().filter(|_| !head.is_empty());
    for h in asked.into_iter().flatten() {
        let (k, v) = (h["header"]["key"].as_str(), h["header"]["value"].as_str());
        let (k, v) = (k.unwrap_or_default(), v.unwrap_or_default());
        if !headers.iter().any(|(hk, hv)| hk == k && hv == v) {
            return Err(format!("no header {k}: {v} in\n{head}"));
        }
    }
    Ok(())
}

// ---- Tests ----

#[test]
fn readme_examples_run_as_written() {
    let plain = Server::start(&[]);
    let tls = TlsServer::start(&["--tls"]);
    let base = std::env::temp_dir().join(format!("shrike-readme-{}", std::process::id()));
    let bin = base.join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_shrike"), bin.join("shrike")).expect("link");
    let statsd = UdpSocket::bind("127.0.0.1:0").expect("statsd sink");
    statsd.set_nonblocking(true).expect("nonblocking");
    let env = Env {
        plain: plain.addr.clone(),
        tls_port: tls.port.parse().expect("port"),
        ca: tls.ca.clone(),
        statsd,
        path: format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()),
        free_port: std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port(),
    };
    let readme = readme();
    // Layout and other plain ``` blocks are not commands.
    let blocks: Vec<Block> = blocks(&readme).into_iter().filter(|b| !b.lang.is_empty()).collect();
    let t = Instant::now();
    // Blocks are independent (each has its own directory), so they run side by side.
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = blocks
            .iter()
            .map(|b| {
                let dir = base.join(format!("L{}", b.line));
                let env = &env;
                s.spawn(move || run_block(b, env, &dir))
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("block thread")).collect()
    });
    eprintln!("{} blocks in {:.1?}", blocks.len(), t.elapsed());
    assert!(failures.is_empty(), "README examples failed:\n\n{}", failures.join("\n\n"));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn setup_section_has_exactly_the_two_setup_commands() {
    let setup: Vec<String> = blocks(&readme())
        .iter()
        .filter(|b| b.section == "Set up and try it" && b.lang == "sh")
        .flat_map(|b| commands(&b.body, b.line))
        .map(|(_, c)| c)
        .collect();
    assert_eq!(setup, ["cargo run --release -- run", "bash .ci/run"]);
}

#[test]
fn commands_are_split_as_bash_reads_them() {
    let block = "# a comment\nshrike run \\\n  --rps 5 # trailing\ncurl -H 'a: {\n  \"b\": 1}' x\n";
    assert_eq!(
        commands(block, 10),
        [(11, "shrike run   --rps 5".to_string()), (13, "curl -H 'a: {\n  \"b\": 1}' x".into())]
    );
    let p = Parsed::new("shrike run 'x y' --rps=10 >out.json 2> err.jsonl");
    assert_eq!(p.args(), ["shrike", "run", "x y", "--rps=10"]);
    assert_eq!((p.stdout.as_deref(), p.stderr.as_deref()), (Some("out.json"), Some("err.jsonl")));
    assert_eq!(p.values(&["--rps"])[0].0, "10");
}

#[test]
fn long_runs_and_high_rates_scale_down() {
    assert_eq!(scale_rate("5000").as_deref(), Some("500"));
    assert_eq!(scale_rate("5"), None);
    assert_eq!(scale_rate("max"), None);
    assert_eq!(scale_stages("10s:1000,30s:5000,10s:0").as_deref(), Some("1s:100,1s:500,1s:0"));
    assert_eq!(scale_count("benchmark.http_2xx:9999").as_deref(), Some("benchmark.http_2xx:99"));
    assert_eq!(scale_count("benchmark.http_5xx:100"), None);
    assert!(unresolved("shrike run --tls-ca /tmp/…/cert.pem", &[]).is_some());
    assert!(unresolved("curl http://127.0.0.1:PORT/", &[1]).is_some());
    assert!(unresolved("shrike run https://example.com/", &[1]).is_some());
    assert!(
        unresolved("shrike run http://127.0.0.1:1/ --metrics-listen 127.0.0.1:0", &[1]).is_none()
    );
}
