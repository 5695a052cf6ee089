//! Hosts, not just ports: network namespaces the test creates, each a "host" with one address
//! (10.200.0.10, .11, … on a /24), joined by a bridge in a namespace of the test's own, so
//! nothing touches the machine's network and load stays inside what the test made. A link set
//! down is a host cut off (a partition, a lost node); a hosts file bound over /etc/hosts in a
//! process's own mount namespace stands in for cluster DNS. Deleted (with their links) on drop.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub struct Hosts {
    prefix: String,
    names: Vec<String>,
}

/// `ip ARGS`, which must succeed.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip (iproute2)");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Hosts {
    /// One host per name; `tag` keeps tests running at once apart.
    pub fn new(tag: &str, names: &[&str]) -> Hosts {
        let prefix = format!("shr{}-{tag}", std::process::id());
        let hosts = Hosts { prefix, names: names.iter().map(|s| s.to_string()).collect() };
        let hub = hosts.ns("hub");
        ip(&["netns", "add", &hub]);
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &hub, "link", "set", "br0", "up"]);
        for (i, name) in names.iter().enumerate() {
            let ns = hosts.ns(name);
            ip(&["netns", "add", &ns]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            let port = format!("p{i}");
            ip(&["-n", &hub, "link", "add", &port, "type", "veth", "peer", "name", "eth0"]);
            ip(&["-n", &hub, "link", "set", "eth0", "netns", &ns]);
            ip(&["-n", &hub, "link", "set", &port, "master", "br0", "up"]);
            ip(&["-n", &ns, "addr", "add", &format!("{}/24", hosts.addr(name)), "dev", "eth0"]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
        }
        hosts
    }

    fn ns(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    /// The host's address.
    pub fn addr(&self, name: &str) -> String {
        let i = self.names.iter().position(|n| n == name).expect("a host of this test");
        format!("10.200.0.{}", 10 + i)
    }

    /// `program` run on the host (in its network namespace).
    pub fn command(&self, name: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(name), program]);
        c
    }

    /// The shrike binary under test, run on the host.
    pub fn shrike(&self, name: &str) -> Command {
        self.command(name, env!("CARGO_BIN_EXE_shrike"))
    }

    /// `shrike serve` on the host's address (a free port).
    pub fn serve(&self, name: &str) -> Listening {
        Listening::start(
            self.shrike(name).args(["serve", "--listen"]).arg(format!("{}:0", self.addr(name))),
        )
    }

    /// `program` on the host, with `hosts_file` as its /etc/hosts (a mount namespace of its
    /// own: the machine's /etc/hosts is untouched).
    pub fn command_with_hosts(&self, name: &str, hosts_file: &Path, program: &str) -> Command {
        let mut c = self.command(name, "unshare");
        c.args(["-m", "--propagation", "private", "sh", "-c"])
            .arg("mount --bind \"$0\" /etc/hosts && exec \"$@\"")
            .arg(hosts_file)
            .arg(program);
        c
    }

    /// Cuts the host off: its link goes down, so nothing it sends or is sent arrives.
    pub fn cut(&self, name: &str) {
        ip(&["-n", &self.ns(name), "link", "set", "eth0", "down"]);
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for name in self.names.iter().map(String::as_str).chain(["hub"]) {
            let _ = Command::new("ip").args(["netns", "del", &self.ns(name)]).output();
        }
    }
}

/// A process that printed the address it listens on as its first stdout line (`shrike serve`,
/// `shrike service`). Killed by pid when dropped: `ip netns exec` and `sh -c … exec` become
/// the program, so the child is it.
pub struct Listening {
    pub child: Child,
    pub addr: String,
}

impl Listening {
    pub fn start(cmd: &mut Command) -> Listening {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let mut addr = String::new();
        BufReader::new(child.stdout.take().expect("stdout piped"))
            .read_line(&mut addr)
            .expect("the address line");
        let addr = addr.trim().to_string();
        assert!(!addr.is_empty(), "no address printed: {cmd:?}");
        Listening { child, addr }
    }

    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
