//! MySQL commands from a connection's client packets.
//!
//! Packets are `[length: 3][sequence: 1][payload]`; a payload of 2^24 − 1 bytes continues in
//! the next packet. A command is a client packet with sequence 0, so the handshake and any
//! authentication exchange (sequences 1 and up) are not commands. The handshake response gives
//! the session's login (user and database), which replay logs in as; the password is only a
//! scramble there, so replay brings its own. A session that switched to TLS cannot be read and
//! is reported. A client's COM_QUIT is kept as the session's last command, so the replay says
//! goodbye as the client did instead of leaving the server an aborted connection.
//!
//! Prepared statements keep the id the captured server gave them, read from its
//! COM_STMT_PREPARE_OK answer: the first server packet with sequence 1 sent after the prepare.
//! Executes decode their parameters with the types the client bound, remembered per statement
//! when a later execute rebinds none.

use std::collections::HashMap;
use std::time::Duration;

use shrike_jobs::{Body, Login, MysqlCommand, MysqlValue};

use super::Found;
use crate::flows::Flow;
use crate::report::Report;

const CLIENT_CONNECT_WITH_DB: u32 = 1 << 3;
const CLIENT_PROTOCOL_41: u32 = 1 << 9;
const CLIENT_SSL: u32 = 1 << 11;
const CLIENT_SECURE_CONNECTION: u32 = 1 << 15;
const CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA: u32 = 1 << 21;
const CLIENT_QUERY_ATTRIBUTES: u32 = 1 << 27;

/// One packet (continuations joined): its sequence number, payload and capture time.
struct Packet {
    seq: u8,
    payload: Vec<u8>,
    ts: Duration,
}

fn packets(stream: &crate::stream::Stream, first: Duration) -> (Vec<Packet>, bool) {
    let data = stream.data();
    let mut out: Vec<Packet> = Vec::new();
    let mut at = 0usize;
    let mut continuing = false;
    while data.len() >= at + 4 {
        let len = usize::from(data[at])
            | usize::from(data[at + 1]) << 8
            | usize::from(data[at + 2]) << 16;
        let seq = data[at + 3];
        if data.len() < at + 4 + len {
            return (out, true);
        }
        let payload = &data[at + 4..at + 4 + len];
        match (continuing, out.last_mut()) {
            (true, Some(last)) => last.payload.extend_from_slice(payload),
            _ => out.push(Packet {
                seq,
                payload: payload.to_vec(),
                ts: stream.time_at(at as u64).unwrap_or(first),
            }),
        }
        continuing = len == 0xFF_FFFF;
        at += 4 + len;
    }
    (out, at < data.len())
}

/// A prepared statement as the capture showed it.
#[derive(Default)]
struct CapturedStatement {
    params: usize,
    /// The parameter types last bound: (type, unsigned).
    types: Vec<(u8, bool)>,
}

/// The connection's commands, and the login its handshake response shows (when captured).
pub fn split(flow: &Flow, report: &mut Report) -> (Vec<Found>, Option<Login>) {
    let (client, client_cut) = packets(&flow.up, flow.first);
    let (server, _) = packets(&flow.down, flow.first);
    if client_cut {
        report.problem("mysql: a packet cut off by the end of its connection or the capture", 1);
    }
    // The client's capabilities, from its handshake response (sequence 1), when captured.
    let response = client.iter().find(|p| p.seq == 1 && p.payload.len() >= 4);
    let caps = response
        .map(|p| u32::from_le_bytes([p.payload[0], p.payload[1], p.payload[2], p.payload[3]]))
        .unwrap_or(0);
    if caps & CLIENT_SSL != 0 && client.iter().any(|p| p.seq == 1 && p.payload.len() == 32) {
        report.problem("mysql: a session encrypted with TLS (its commands cannot be read)", 1);
        return (Vec::new(), None);
    }
    let login = response.and_then(|p| login(&p.payload));
    let answers: Vec<&Packet> = server.iter().filter(|p| p.seq == 1).collect();
    let mut next_answer = 0usize;
    let mut statements: HashMap<u32, CapturedStatement> = HashMap::new();
    let mut out = Vec::new();
    for p in client.iter().filter(|p| p.seq == 0) {
        // The answer to this command: the first server packet of sequence 1 after it.
        while answers.get(next_answer).is_some_and(|a| a.ts < p.ts) {
            next_answer += 1;
        }
        let answer = answers.get(next_answer).copied();
        if answer.is_some() {
            next_answer += 1;
        }
        let Some((&code, rest)) = p.payload.split_first() else { continue };
        // The bytes the client sent for it, header included (commands hold no raw bytes).
        report.request_bytes += 4 + p.payload.len() as u64;
        let command = match code {
            0x01 => {
                out.push((p.ts, Body::Mysql(MysqlCommand::Quit)));
                break;
            }
            0x03 => query(rest, caps).map(MysqlCommand::Query),
            0x02 => Ok(MysqlCommand::InitDb(String::from_utf8_lossy(rest).into_owned())),
            0x0e => Ok(MysqlCommand::Ping),
            0x1f => Ok(MysqlCommand::ResetConnection),
            0x16 => prepare(rest, answer, &mut statements),
            0x17 => execute(rest, &mut statements),
            0x19 => match rest.get(..4) {
                Some(id) => {
                    let id = u32::from_le_bytes([id[0], id[1], id[2], id[3]]);
                    statements.remove(&id);
                    Ok(MysqlCommand::Close { id })
                }
                None => Err("a short COM_STMT_CLOSE".to_string()),
            },
            other => Err(format!("{} skipped", command_name(other))),
        };
        match command {
            Ok(c) => out.push((p.ts, Body::Mysql(c))),
            Err(why) => {
                report.problem(format!("mysql: {why}"), 1);
                report.skipped_commands += 1;
            }
        }
    }
    (out, login)
}

/// The user and database of a HandshakeResponse41 (`None` for the pre-4.1 form, or one cut
/// short): capabilities (4), max packet (4), charset (1), filler (23), the user (NUL-ended),
/// the auth response (length-encoded, one-byte length or NUL-ended, by capability), then the
/// database (NUL-ended) if CLIENT_CONNECT_WITH_DB.
fn login(p: &[u8]) -> Option<Login> {
    let caps = u32::from_le_bytes(p.get(..4)?.try_into().ok()?);
    if caps & CLIENT_PROTOCOL_41 == 0 {
        return None;
    }
    let nul_ended = |b: &[u8]| -> Option<(String, usize)> {
        let end = b.iter().position(|&c| c == 0)?;
        Some((String::from_utf8_lossy(&b[..end]).into_owned(), end + 1))
    };
    let mut at = 32;
    let (user, n) = nul_ended(p.get(at..)?)?;
    at += n;
    at += if caps & CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
        let (len, n) = lenenc(p.get(at..)?)?;
        n + usize::try_from(len).ok()?
    } else if caps & CLIENT_SECURE_CONNECTION != 0 {
        1 + usize::from(*p.get(at)?)
    } else {
        nul_ended(p.get(at..)?)?.1
    };
    let database = match caps & CLIENT_CONNECT_WITH_DB != 0 {
        true => p.get(at..).and_then(nul_ended).map(|(d, _)| d).filter(|d| !d.is_empty()),
        false => None,
    };
    Some(Login { user, database })
}

fn query(rest: &[u8], caps: u32) -> Result<String, String> {
    let mut text = rest;
    if caps & CLIENT_QUERY_ATTRIBUTES != 0 {
        // MySQL 8's query attributes precede the text: a parameter count and a set count.
        let (count, n) = lenenc(text).ok_or("a short COM_QUERY")?;
        if count != 0 {
            return Err("a COM_QUERY with query attributes skipped".into());
        }
        let (_, m) = lenenc(&text[n..]).ok_or("a short COM_QUERY")?;
        text = &text[n + m..];
    }
    Ok(String::from_utf8_lossy(text).into_owned())
}

fn prepare(
    rest: &[u8],
    answer: Option<&Packet>,
    statements: &mut HashMap<u32, CapturedStatement>,
) -> Result<MysqlCommand, String> {
    let sql = String::from_utf8_lossy(rest).into_owned();
    // COM_STMT_PREPARE_OK: 0x00, statement id (4), columns (2), parameters (2), …
    match answer.map(|a| a.payload.as_slice()) {
        Some([0x00, a, b, c, d, _, _, p0, p1, ..]) => {
            let id = u32::from_le_bytes([*a, *b, *c, *d]);
            let params = usize::from(u16::from_le_bytes([*p0, *p1]));
            statements.insert(id, CapturedStatement { params, types: Vec::new() });
            Ok(MysqlCommand::Prepare { id, sql })
        }
        Some([0xff, ..]) => Err("a COM_STMT_PREPARE the server refused skipped".into()),
        _ => Err("a COM_STMT_PREPARE whose answer was not captured skipped".into()),
    }
}

fn execute(
    rest: &[u8],
    statements: &mut HashMap<u32, CapturedStatement>,
) -> Result<MysqlCommand, String> {
    let short = || "a short COM_STMT_EXECUTE".to_string();
    let id = u32::from_le_bytes(rest.get(..4).ok_or_else(short)?.try_into().map_err(|_| short())?);
    let Some(st) = statements.get_mut(&id) else {
        return Err("a COM_STMT_EXECUTE of a statement prepared before the capture skipped".into());
    };
    // Statement id (4), flags (1), iteration count (4).
    let mut at = 9;
    let n = st.params;
    let mut params = Vec::with_capacity(n);
    if n > 0 {
        let bitmap = rest.get(at..at + n.div_ceil(8)).ok_or_else(short)?.to_vec();
        at += n.div_ceil(8);
        let rebound = *rest.get(at).ok_or_else(short)? == 1;
        at += 1;
        if rebound {
            let types = rest.get(at..at + 2 * n).ok_or_else(short)?;
            st.types = types.chunks(2).map(|t| (t[0], t[1] & 0x80 != 0)).collect();
            at += 2 * n;
        }
        if st.types.len() != n {
            return Err(
                "a COM_STMT_EXECUTE whose parameter types were bound before the capture skipped"
                    .into(),
            );
        }
        for (i, &(ty, unsigned)) in st.types.iter().enumerate() {
            if bitmap[i / 8] & (1 << (i % 8)) != 0 {
                params.push(MysqlValue::Null);
                continue;
            }
            let (v, used) = value(&rest[at..], ty, unsigned).ok_or_else(|| {
                format!(
                    "a COM_STMT_EXECUTE parameter of type {ty:#04x} that cannot be read skipped"
                )
            })?;
            params.push(v);
            at += used;
        }
    }
    Ok(MysqlCommand::Execute { id, params })
}

/// A binary-protocol value of `ty`, and the bytes it took.
fn value(b: &[u8], ty: u8, unsigned: bool) -> Option<(MysqlValue, usize)> {
    let int = |n: usize| -> Option<(MysqlValue, usize)> {
        let raw = b.get(..n)?;
        let mut buf = [0u8; 8];
        buf[..n].copy_from_slice(raw);
        let u = u64::from_le_bytes(buf);
        let v = if unsigned {
            MysqlValue::UInt(u)
        } else {
            // Sign-extend from n bytes.
            let shift = 64 - 8 * n as u32;
            MysqlValue::Int(((u << shift) as i64) >> shift)
        };
        Some((v, n))
    };
    match ty {
        0x06 => Some((MysqlValue::Null, 0)),
        0x01 => int(1),
        0x02 | 0x0d => int(2),
        0x03 | 0x09 => int(4),
        0x08 => int(8),
        0x04 => Some((
            MysqlValue::Float(f64::from(f32::from_le_bytes(b.get(..4)?.try_into().ok()?))),
            4,
        )),
        0x05 => Some((MysqlValue::Float(f64::from_le_bytes(b.get(..8)?.try_into().ok()?)), 8)),
        0x07 | 0x0a | 0x0c => date_time(b),
        0x0b => time(b),
        // Strings, decimals, blobs, JSON, enums, sets, bits, geometry: length-encoded bytes.
        _ => {
            let (len, n) = lenenc(b)?;
            let bytes = b.get(n..n + usize::try_from(len).ok()?)?;
            let v = match std::str::from_utf8(bytes) {
                Ok(s) => MysqlValue::Text(s.to_string()),
                Err(_) => MysqlValue::Bytes(bytes.to_vec()),
            };
            Some((v, n + bytes.len()))
        }
    }
}

fn date_time(b: &[u8]) -> Option<(MysqlValue, usize)> {
    let len = usize::from(*b.first()?);
    let f = b.get(1..1 + len)?;
    let year = if len >= 4 { u16::from_le_bytes([f[0], f[1]]) } else { 0 };
    let (mon, day) = if len >= 4 { (f[2], f[3]) } else { (0, 0) };
    let (h, m, s) = if len >= 7 { (f[4], f[5], f[6]) } else { (0, 0, 0) };
    let micro = if len >= 11 { u32::from_le_bytes([f[7], f[8], f[9], f[10]]) } else { 0 };
    let mut text = format!("{year:04}-{mon:02}-{day:02} {h:02}:{m:02}:{s:02}");
    if micro > 0 {
        text.push_str(&format!(".{micro:06}"));
    }
    Some((MysqlValue::Text(text), 1 + len))
}

fn time(b: &[u8]) -> Option<(MysqlValue, usize)> {
    let len = usize::from(*b.first()?);
    let f = b.get(1..1 + len)?;
    if len < 8 {
        return Some((MysqlValue::Text("00:00:00".into()), 1 + len));
    }
    let sign = if f[0] == 1 { "-" } else { "" };
    let days = u32::from_le_bytes([f[1], f[2], f[3], f[4]]);
    let hours = days * 24 + u32::from(f[5]);
    let mut text = format!("{sign}{hours:02}:{:02}:{:02}", f[6], f[7]);
    if len >= 12 {
        text.push_str(&format!(".{:06}", u32::from_le_bytes([f[8], f[9], f[10], f[11]])));
    }
    Some((MysqlValue::Text(text), 1 + len))
}

/// A length-encoded integer, and the bytes it took.
fn lenenc(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let wide = |n: usize| -> Option<(u64, usize)> {
        let mut buf = [0u8; 8];
        buf[..n].copy_from_slice(b.get(1..1 + n)?);
        Some((u64::from_le_bytes(buf), 1 + n))
    };
    match first {
        0..=0xfa => Some((u64::from(first), 1)),
        0xfc => wide(2),
        0xfd => wide(3),
        0xfe => wide(8),
        _ => None,
    }
}

fn command_name(code: u8) -> String {
    let name = match code {
        0x04 => "COM_FIELD_LIST",
        0x05 => "COM_CREATE_DB",
        0x06 => "COM_DROP_DB",
        0x07 => "COM_REFRESH",
        0x09 => "COM_STATISTICS",
        0x0a => "COM_PROCESS_INFO",
        0x0c => "COM_PROCESS_KILL",
        0x0d => "COM_DEBUG",
        0x11 => "COM_CHANGE_USER",
        0x12 => "COM_BINLOG_DUMP",
        0x18 => "COM_STMT_SEND_LONG_DATA",
        0x1a => "COM_STMT_RESET",
        0x1b => "COM_SET_OPTION",
        0x1c => "COM_STMT_FETCH",
        0x1e => "COM_BINLOG_DUMP_GTID",
        _ => return format!("command {code:#04x}"),
    };
    name.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_values() {
        assert_eq!(value(&[0xfe], 0x01, false), Some((MysqlValue::Int(-2), 1)));
        assert_eq!(value(&[0xfe], 0x01, true), Some((MysqlValue::UInt(254), 1)));
        assert_eq!(value(&[1, 0, 0, 0, 0, 0, 0, 0], 0x08, false), Some((MysqlValue::Int(1), 8)));
        assert_eq!(
            value(&[3, b'a', b'b', b'c', 9], 0xfd, false),
            Some((MysqlValue::Text("abc".into()), 4))
        );
        let dt = [7, 0xe8, 0x07, 11, 24, 13, 5, 9];
        assert_eq!(
            value(&dt, 0x0c, false),
            Some((MysqlValue::Text("2024-11-24 13:05:09".into()), 8))
        );
        assert_eq!(value(&[2, 1], 0xfd, false), None, "a string longer than the packet");
        assert_eq!(lenenc(&[0xfc, 0x10, 0x01]), Some((0x110, 3)));
    }

    #[test]
    fn the_handshake_response_gives_user_and_database() {
        let caps = CLIENT_PROTOCOL_41
            | CLIENT_SECURE_CONNECTION
            | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
            | CLIENT_CONNECT_WITH_DB;
        let mut p = caps.to_le_bytes().to_vec();
        p.extend_from_slice(&[0; 28]); // max packet, charset, filler
        p.extend_from_slice(b"app\0");
        p.extend_from_slice(&[20]);
        p.extend_from_slice(&[0xaa; 20]); // the scrambled password
        p.extend_from_slice(b"shop\0mysql_native_password\0");
        let want = Login { user: "app".into(), database: Some("shop".into()) };
        assert_eq!(login(&p), Some(want));
        // Without CLIENT_CONNECT_WITH_DB the same bytes name no database.
        p[0] &= !(CLIENT_CONNECT_WITH_DB as u8);
        assert_eq!(login(&p), Some(Login { user: "app".into(), database: None }));
        // Cut inside the user: nothing is guessed.
        assert_eq!(login(&p[..34]), None);
    }
}
