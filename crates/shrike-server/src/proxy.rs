//! Where a tunnel goes: the destination a `CONNECT` (RFC 9110 §9.3.6) or a CONNECT-UDP
//! (RFC 9298) names, resolved, checked against `--proxy-allow` and opened, or the status and
//! reason to refuse it with. The HTTP/1.1 and HTTP/2 front ends share it.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use tokio::net::{TcpStream, UdpSocket};

use crate::ProxyConfig;

/// A refusal: the status to answer and why, worded for the client.
pub(crate) type Refusal = (u16, String);

/// The TCP connection a `CONNECT authority` asks for.
pub(crate) async fn open_tcp(authority: &str, proxy: &ProxyConfig) -> Result<TcpStream, Refusal> {
    let addrs = match tokio::net::lookup_host(authority).await {
        Ok(a) => a.collect(),
        Err(e) => return Err((400, format!("CONNECT needs HOST:PORT, got {authority:?}: {e}"))),
    };
    let addrs = allowed(authority, addrs, proxy)?;
    match tokio::time::timeout(proxy.connect_timeout, TcpStream::connect(&addrs[..])).await {
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(s)
        }
        Ok(Err(e)) => Err((502, format!("connect to {authority}: {e}"))),
        Err(_) => Err((504, format!("connect to {authority}: no answer in time"))),
    }
}

/// The UDP socket, connected to the destination, that a CONNECT-UDP request's `path` asks for
/// (RFC 9298 §3's default template, `/.well-known/masque/udp/{host}/{port}/`).
pub(crate) async fn open_udp(path: &[u8], proxy: &ProxyConfig) -> Result<UdpSocket, Refusal> {
    let (host, port) = masque_target(path).map_err(|why| (400, why))?;
    let authority =
        if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    let addrs = match tokio::net::lookup_host((host.as_str(), port)).await {
        Ok(a) => a.collect(),
        Err(e) => return Err((502, format!("{authority} does not resolve: {e}"))),
    };
    let addrs = allowed(&authority, addrs, proxy)?;
    let dest = addrs[0];
    let local: SocketAddr = match dest {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(local)
        .await
        .map_err(|e| (502, format!("a UDP socket for {authority}: {e}")))?;
    socket.connect(dest).await.map_err(|e| (502, format!("UDP to {authority}: {e}")))?;
    Ok(socket)
}

/// `addrs`, if every one is inside `--proxy-allow`.
fn allowed(
    authority: &str,
    addrs: Vec<SocketAddr>,
    proxy: &ProxyConfig,
) -> Result<Vec<SocketAddr>, Refusal> {
    if addrs.is_empty() {
        return Err((502, format!("{authority} resolves to no address")));
    }
    if let Some(a) = addrs.iter().find(|a| !proxy.allows(a.ip())) {
        return Err((
            403,
            format!("{authority} resolves to {}, outside this proxy's --proxy-allow", a.ip()),
        ));
    }
    Ok(addrs)
}

/// The host and port of a CONNECT-UDP path; the host is percent-decoded (an IPv6 literal's
/// colons arrive as `%3A`).
pub(crate) fn masque_target(path: &[u8]) -> Result<(String, u16), String> {
    let shown = String::from_utf8_lossy(path);
    let bad = || {
        format!(
            "CONNECT-UDP needs the path /.well-known/masque/udp/{{host}}/{{port}}/, got {shown:?}"
        )
    };
    let path = std::str::from_utf8(path).map_err(|_| bad())?;
    let rest = path.strip_prefix("/.well-known/masque/udp/").ok_or_else(bad)?;
    let rest = rest.split('?').next().unwrap_or_default();
    let mut parts = rest.split('/');
    let (Some(host), Some(port)) = (parts.next(), parts.next()) else { return Err(bad()) };
    if !parts.all(str::is_empty) {
        return Err(bad());
    }
    let host = percent_decode(host).filter(|h| !h.is_empty()).ok_or_else(bad)?;
    let port = port.parse::<u16>().ok().filter(|&p| p != 0).ok_or_else(bad)?;
    Ok((host, port))
}

fn percent_decode(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex = [bytes.next()?, bytes.next()?];
            let hex = std::str::from_utf8(&hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn allowed_networks_match_by_prefix_and_family() {
        let p = ProxyConfig {
            allow: vec![
                ("127.0.0.0".parse().unwrap(), 8),
                ("10.1.0.0".parse().unwrap(), 16),
                ("::1".parse().unwrap(), 128),
            ],
            connect_timeout: Duration::from_secs(1),
        };
        for ok in ["127.9.9.9", "10.1.255.1", "::1"] {
            assert!(p.allows(ok.parse().unwrap()), "{ok}");
        }
        for no in ["128.0.0.1", "10.2.0.1", "::2", "::ffff:127.0.0.1"] {
            assert!(!p.allows(no.parse().unwrap()), "{no}");
        }
        let all = ProxyConfig { allow: vec![("0.0.0.0".parse().unwrap(), 0)], ..p };
        assert!(all.allows("192.0.2.1".parse().unwrap()));
    }

    #[test]
    fn masque_paths_name_a_host_and_port() {
        let t = |p: &str| masque_target(p.as_bytes());
        assert_eq!(t("/.well-known/masque/udp/localhost/443/"), Ok(("localhost".into(), 443)));
        assert_eq!(t("/.well-known/masque/udp/127.0.0.1/53/"), Ok(("127.0.0.1".into(), 53)));
        assert_eq!(t("/.well-known/masque/udp/%3A%3A1/8443/"), Ok(("::1".into(), 8443)));
        assert_eq!(t("/.well-known/masque/udp/h/1"), Ok(("h".into(), 1)), "no final slash");
        for bad in [
            "/",
            "/.well-known/masque/udp/h/",
            "/.well-known/masque/udp//443/",
            "/.well-known/masque/udp/h/0/",
            "/.well-known/masque/udp/h/70000/",
            "/.well-known/masque/udp/h/443/x/",
            "/.well-known/masque/udp/%zz/443/",
            "/.well-known/masque/ip/h/443/",
        ] {
            let why = t(bad).expect_err(bad);
            assert!(why.contains("/.well-known/masque/udp/{host}/{port}/"), "{why}");
        }
    }
}
