//! Response heads as HPACK header blocks, straight from a [`ResponsePlan`]: the HTTP/2 twin of
//! the HTTP/1.1 encoder, with the same parts done once.
//!
//! The default head (the server-wide headers, `date` and the body's length) is what nearly every
//! load-test response carries, so a connection indexes it in the client's dynamic table, as h2o
//! and nginx do: the first such head is sent as literals the client indexes, later ones as one
//! byte per field, and the connection keeps that block whole ([`Heads`]) while it stays valid
//! (the same status, length and second, and no change to the table). Such heads are encoded
//! only when sent, so the indices follow the order the client decodes them in. Every other
//! head (errors, per-request headers, the stats headers) uses literals that never touch the
//! table, encoded when planned.

use shrike_h2::hpack::encode_field;
use shrike_h2::indexing::Encoder;

use super::request::RequestHead;
use super::response::Payload;
use crate::behaviour::Pacing;
use crate::behaviour::{
    Body, Headers, ResponsePlan, StatsHeaders, ACTIVE_HEADER, CONFIG_HEADER, SERVICE_TIME_HEADER,
};
use crate::h1::itoa;
use crate::server::Shared;
use crate::{date, status, ServerConfig};

/// The server-wide response headers: as literals, encoded once per server, and as fields for
/// the indexing encoder.
#[derive(Debug)]
pub(crate) struct FixedBlock {
    block: Vec<u8>,
    fields: Vec<(Vec<u8>, Vec<u8>)>,
    date: bool,
}

impl FixedBlock {
    pub(crate) fn new(config: &ServerConfig) -> Self {
        let mut block = Vec::new();
        let mut name = Vec::new();
        let mut fields = Vec::new();
        for (n, value) in config.response_headers() {
            put_lowercase(&mut block, &mut name, n, value.as_bytes());
            fields.push((name.clone(), value.as_bytes().to_vec()));
        }
        Self { block, fields, date: config.emits_date() }
    }
}

/// A default head, encoded when it is sent: its status and content-length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DefaultHead {
    status: u16,
    length: Option<u64>,
}

/// What a default head's block depends on: the head, the second of its `date` and the
/// generation of the client's table.
type HeadKey = (DefaultHead, u64, u64);

/// One connection's encoder state: its model of the client's table and its last default
/// head, whole.
#[derive(Debug, Default)]
pub(crate) struct Heads {
    pub(crate) table: Encoder,
    last: Option<(HeadKey, Vec<u8>)>,
    name: Vec<u8>,
}

/// A planned response: its body, how it goes out, and its head. The head is either a default
/// one, to be encoded when it is sent, or a block written to the caller's buffer (less the
/// service time, stamped when it leaves).
#[derive(Debug)]
pub(crate) struct Planned {
    pub(crate) payload: Payload,
    pub(crate) pacing: Pacing,
    pub(crate) default: Option<DefaultHead>,
}

impl Heads {
    /// Plans the response to `head` and writes its block to `out`. Records the request's
    /// arrival and counts it, as [`ResponsePlan::for_request`] does; the statistics endpoint,
    /// when the request names it, is answered here too.
    pub(crate) fn for_request(
        &mut self,
        shared: &Shared,
        head: &RequestHead,
        head_only: bool,
        out: &mut Vec<u8>,
    ) -> Planned {
        let config = &shared.config;
        if let Some(json) = shared.stats_answer(head.path_only()) {
            let payload = text(out, 200, &json, head_only, b"application/json");
            return Planned { payload, pacing: Pacing::default(), default: None };
        }
        let values = head.has_config.then(|| head.values(CONFIG_HEADER.as_bytes()));
        match ResponsePlan::for_request(config, &shared.state, values, head_only) {
            Ok((plan, delta)) => {
                let (payload, default) =
                    self.planned(&shared.h2, &plan, delta, head, head_only, out);
                Planned { payload, pacing: plan.pacing(), default }
            }
            Err(e) => {
                let payload = text(out, 500, &e.to_string(), head_only, TEXT_PLAIN);
                Planned { payload, pacing: Pacing::default(), default: None }
            }
        }
    }

    fn planned(
        &mut self,
        fixed: &FixedBlock,
        plan: &ResponsePlan<'_>,
        delta: Option<u64>,
        head: &RequestHead,
        head_only: bool,
        out: &mut Vec<u8>,
    ) -> (Payload, Option<DefaultHead>) {
        let payload = match (status::allows_body(plan.status), plan.body) {
            (false, _) => None,
            (true, Body::Filler(n)) => Some(Payload::Filler(n)),
            (true, Body::Echo) => Some(Payload::Bytes(head.echo().into())),
        };
        let length = payload.as_ref().map(Payload::len);
        let delta = plan.delta_header.as_deref().zip(delta);
        let default = (plan.headers == Headers::Default && delta.is_none() && plan.stats.is_none())
            .then_some(DefaultHead { status: plan.status, length });
        if default.is_none() {
            put_status(out, plan.status);
            match &plan.headers {
                Headers::Default => {
                    if fixed.date {
                        put_date(out);
                    }
                    out.extend_from_slice(&fixed.block);
                }
                Headers::Custom(list) => {
                    if list.date {
                        put_date(out);
                    }
                    for (name, value) in &list.entries {
                        put_lowercase(out, &mut self.name, name, value.as_bytes());
                    }
                }
            }
            if let Some((name, delta)) = delta {
                put_lowercase(out, &mut self.name, name, itoa(&mut [0; 20], delta));
            }
            if let Some(stats) = plan.stats {
                let active = stats.active as u64;
                encode_field(out, ACTIVE_HEADER.as_bytes(), itoa(&mut [0; 20], active));
            }
            if let Some(len) = length {
                encode_field(out, b"content-length", itoa(&mut [0; 20], len));
            }
        }
        let payload = match payload {
            Some(payload) if !head_only => payload,
            _ => Payload::EMPTY,
        };
        (payload, default)
    }

    /// Appends a default head's block, indexed in the client's table: the connection's last
    /// block again when nothing it depends on changed.
    pub(crate) fn default_head(
        &mut self,
        fixed: &FixedBlock,
        head: DefaultHead,
        out: &mut Vec<u8>,
    ) {
        let second = if fixed.date { date::unix_now() } else { 0 };
        let key = (head, second, self.table.generation());
        if let Some((last, block)) = &self.last {
            if *last == key {
                out.extend_from_slice(block);
                return;
            }
        }
        let start = out.len();
        let table = &mut self.table;
        table.field(out, b":status", itoa(&mut [0; 20], u64::from(head.status)));
        if fixed.date {
            table.field(out, b"date", &date::format(second));
        }
        for (name, value) in &fixed.fields {
            table.field(out, name, value);
        }
        if let Some(len) = head.length {
            table.field(out, b"content-length", itoa(&mut [0; 20], len));
        }
        // Kept only once the block indexed nothing new: the first block after a change adds
        // entries, and sent again it would add them twice; the next one is all indices.
        if table.generation() == key.2 {
            self.last = Some((key, out[start..].to_vec()));
        }
    }
}

/// Appends the service time (arrival to now) to a head about to leave.
pub(crate) fn stamp_service_time(block: &mut Vec<u8>, stats: Option<StatsHeaders>) {
    if let Some(stats) = stats {
        let us = stats.service_time_us();
        encode_field(block, SERVICE_TIME_HEADER.as_bytes(), itoa(&mut [0; 20], us));
    }
}

const TEXT_PLAIN: &[u8] = b"text/plain; charset=utf-8";

/// A server-generated response (errors, statistics), worded as the HTTP/1.1 front end words
/// it; writes its block to `out` and returns its body.
pub(crate) fn text(
    out: &mut Vec<u8>,
    status: u16,
    message: &str,
    head_only: bool,
    content_type: &[u8],
) -> Payload {
    let body = format!("{message}\n").into_bytes();
    put_status(out, status);
    put_date(out);
    encode_field(out, b"server", b"shrike");
    encode_field(out, b"content-type", content_type);
    encode_field(out, b"content-length", itoa(&mut [0; 20], body.len() as u64));
    if head_only {
        Payload::EMPTY
    } else {
        Payload::Bytes(body.into())
    }
}

/// The 200 that opens a tunnel; a CONNECT-UDP one speaks capsules (RFC 9297 §3.4).
pub(crate) fn tunnel_head(out: &mut Vec<u8>, capsules: bool) {
    put_status(out, 200);
    put_date(out);
    encode_field(out, b"server", b"shrike");
    if capsules {
        encode_field(out, b"capsule-protocol", b"?1");
    }
}

/// A head with nothing but its status, for refusals that explain nothing.
pub(crate) fn bare(out: &mut Vec<u8>, status: u16) -> Payload {
    put_status(out, status);
    Payload::EMPTY
}

/// A `text/plain` error response.
pub(crate) fn error(out: &mut Vec<u8>, status: u16, message: &str, head_only: bool) -> Payload {
    text(out, status, message, head_only, TEXT_PLAIN)
}

fn put_status(out: &mut Vec<u8>, status: u16) {
    encode_field(out, b":status", itoa(&mut [0; 20], u64::from(status)));
}

/// `date`, its field encoded at most once per second per thread.
fn put_date(out: &mut Vec<u8>) {
    use std::cell::RefCell;
    thread_local! {
        static FIELD: RefCell<(u64, Vec<u8>)> = const { RefCell::new((u64::MAX, Vec::new())) };
    }
    let second = date::unix_now();
    FIELD.with(|field| {
        let mut field = field.borrow_mut();
        if field.0 != second {
            field.1.clear();
            encode_field(&mut field.1, b"date", &date::format(second));
            field.0 = second;
        }
        out.extend_from_slice(&field.1);
    });
}

/// A configured header: HTTP/2 field names are lowercase (RFC 9113 §8.2.1), as the `http`
/// crate makes them for HTTP/3.
fn put_lowercase(out: &mut Vec<u8>, scratch: &mut Vec<u8>, name: &str, value: &[u8]) {
    scratch.clear();
    scratch.extend(name.bytes().map(|b| b.to_ascii_lowercase()));
    encode_field(out, scratch, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use shrike_h2::hpack::Decoder;

    fn fields(decoder: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        decoder
            .decode(block, |n, v| {
                out.push((
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                ));
            })
            .expect("decodes");
        out
    }

    #[test]
    fn default_heads_are_reused_and_decode() {
        let config = ServerConfig::default();
        let fixed = FixedBlock::new(&config);
        let plan = ResponsePlan::defaults(&config);
        let head = RequestHead::default();
        let mut heads = Heads::default();
        let (payload, default) = heads.planned(&fixed, &plan, None, &head, false, &mut Vec::new());
        assert_eq!(payload.len(), 10);
        let default = default.expect("a default head");
        // The first block indexes the fields; the second is all indices, and is kept.
        let mut decoder = Decoder::new(4096);
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        heads.default_head(&fixed, default, &mut a);
        heads.default_head(&fixed, default, &mut b);
        heads.default_head(&fixed, default, &mut c);
        assert!(b.len() <= 4 && b.len() < a.len(), "{b:?}");
        assert_eq!(b, c);
        let f = fields(&mut decoder, &a);
        assert_eq!(fields(&mut decoder, &b), f);
        assert_eq!(f[0], (":status".into(), "200".into()));
        assert_eq!(f[1].0, "date");
        assert_eq!(f[1].1.len(), date::HTTP_DATE_LEN);
        assert!(f.contains(&("server".into(), "shrike".into())));
        assert_eq!(f.last(), Some(&("content-length".into(), "10".into())));
        let mut out = Vec::new();
        let payload = error(&mut out, 413, "too big", false);
        assert_eq!(payload.len(), 8);
        let text_plain = ("content-type".into(), "text/plain; charset=utf-8".into());
        assert!(fields(&mut Decoder::new(4096), &out).contains(&text_plain));
        let no_body = ResponsePlan { status: 204, ..ResponsePlan::defaults(&config) };
        let mut out = Vec::new();
        let (payload, default) = heads.planned(&fixed, &no_body, None, &head, false, &mut out);
        assert_eq!(payload.len(), 0);
        heads.default_head(&fixed, default.expect("a default head"), &mut out);
        assert!(!fields(&mut decoder, &out).iter().any(|(n, _)| n == "content-length"));
    }
}
