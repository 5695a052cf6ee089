//! Per-request behaviour: what the response looks like and when it is sent.
//!
//! This is the protocol-neutral half of the server. A front end (HTTP/1.1 or HTTP/2) hands over
//! the values of the request's `x-nighthawk-test-server-config` headers and gets a [`Plan`]
//! back ([`Plan::for_request`]); it then only has to put the plan on its wire. Config merging,
//! arrival bookkeeping, delays and the texts of server-generated errors live here, so the front
//! ends cannot drift apart.

use std::borrow::Cow;
use std::time::Duration;

use serde::Deserialize;
use shrike_stats::duration::parse_duration;

use crate::config::{validate_body_size, validate_status, ConfigError, ServerConfig};
use crate::headers::{self, HeaderList};
use crate::relaxed;
use crate::state::ServerState;

pub(crate) const CONFIG_HEADER: &str = "x-nighthawk-test-server-config";

/// Response bodies are slices of this: Nighthawk's filler byte, shared by every response of
/// every protocol, so no response allocates its body.
pub(crate) static FILLER: [u8; 64 * 1024] = [b'a'; 64 * 1024];

/// When to answer, relative to the request's completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delay {
    None,
    Static(Duration),
    /// Nighthawk's model of an overloaded server: `minimal + active requests × factor`.
    Linear {
        minimal: Duration,
        factor: Duration,
    },
}

impl Delay {
    fn from_static(delay: Duration) -> Self {
        if delay.is_zero() {
            Delay::None
        } else {
            Delay::Static(delay)
        }
    }

    pub(crate) fn is_none(self) -> bool {
        self == Delay::None
    }

    /// How long to wait now, given the requests currently in flight server-wide.
    pub(crate) fn now(self, state: &ServerState) -> Duration {
        match self {
            Delay::None => Duration::ZERO,
            Delay::Static(d) => d,
            Delay::Linear { .. } => self.duration(state.active()),
        }
    }

    /// `active` counts the requests in flight server-wide, this one included (Nighthawk counts
    /// live filter instances, its own among them).
    pub(crate) fn duration(self, active: usize) -> Duration {
        match self {
            Delay::None => Duration::ZERO,
            Delay::Static(d) => d,
            Delay::Linear { minimal, factor } => {
                let active = u32::try_from(active).unwrap_or(u32::MAX);
                minimal.saturating_add(factor.saturating_mul(active))
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    /// This many `a` bytes, as Nighthawk's test server sends.
    Filler(u64),
    /// The request's headers, one `name: value` line each.
    Echo,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Headers<'a> {
    /// The server-wide list, untouched: front ends may use a pre-encoded copy.
    Default,
    Custom(HeaderList<'a>),
}

/// The resolved response for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan<'a> {
    pub(crate) status: u16,
    pub(crate) headers: Headers<'a>,
    pub(crate) body: Body,
    pub(crate) delay: Delay,
    /// Name of the header that carries the nanoseconds since the previous request arrived.
    pub(crate) delta_header: Option<Cow<'a, str>>,
}

impl Plan<'static> {
    pub(crate) fn defaults(config: &ServerConfig) -> Self {
        Plan {
            status: config.response_status(),
            headers: Headers::Default,
            body: if config.echo_request_headers() {
                Body::Echo
            } else {
                Body::Filler(config.response_body_size())
            },
            delay: Delay::from_static(config.static_delay()),
            delta_header: None,
        }
    }
}

impl<'a> Plan<'a> {
    /// The plan for one request, and the nanoseconds since the previous request when the plan
    /// asks for them. `config_headers` is `None` when the request has no config header (the
    /// HTTP/1.1 front end knows that from its framing pass and skips a second scan).
    ///
    /// Records the request's arrival whatever the outcome: every request must, or the next
    /// delta would span several requests.
    pub(crate) fn for_request<I>(
        config: &'a ServerConfig,
        state: &ServerState,
        config_headers: Option<I>,
    ) -> Result<(Self, Option<u64>), RequestConfigError>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let plan = match config_headers {
            None => Plan::defaults(config),
            Some(values) => match Self::from_config_headers(config, values) {
                Ok(plan) => plan,
                Err(e) => {
                    state.arrival(false);
                    return Err(e);
                }
            },
        };
        let delta = state.arrival(plan.delta_header.is_some());
        Ok((plan, delta))
    }

    /// Merges the config headers in order over the server defaults. Scalars set later win;
    /// `response_headers` lists concatenate, as protobuf's merge does for Nighthawk.
    pub(crate) fn from_config_headers<I>(
        config: &'a ServerConfig,
        values: I,
    ) -> Result<Self, RequestConfigError>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let mut overrides = Overrides::default();
        for value in values {
            overrides.merge(parse(value)?, config.max_body_size())?;
        }
        Ok(overrides.resolve(config))
    }
}

/// The message of a 413: `declared` is the request's content-length when it gave one.
pub(crate) fn body_too_large(declared: Option<u64>, max_body: u64) -> String {
    match declared {
        Some(len) => format!(
            "request body of {len} bytes exceeds the server's max body size of {max_body} bytes"
        ),
        None => format!("request body exceeds the server's max body size of {max_body} bytes"),
    }
}

/// A bad `x-nighthawk-test-server-config`; answered with a 500 carrying this message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestConfigError {
    #[error("invalid {CONFIG_HEADER}: {0}")]
    Json(serde_json::Error),
    #[error("invalid {CONFIG_HEADER}: {0}")]
    Invalid(#[from] ConfigError),
    #[error(
        "invalid {CONFIG_HEADER}: expected a JSON object such as {{\"response_body_size\": 128}}"
    )]
    NotAnObject,
}

fn parse(value: &[u8]) -> Result<RawConfig<'_>, RequestConfigError> {
    // serde's derived struct visitor also accepts a JSON array of field values in order;
    // that is never what a user meant.
    if value.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(RequestConfigError::NotAnObject);
    }
    let strict = match serde_json::from_slice::<RawConfig<'_>>(value) {
        Ok(raw) => return Ok(raw),
        Err(e) => e,
    };
    if !strict.is_syntax() && !strict.is_eof() {
        return Err(RequestConfigError::Json(strict));
    }
    let relaxed = std::str::from_utf8(value).ok().and_then(relaxed::to_json);
    let Some(json) = relaxed else {
        return Err(RequestConfigError::Json(strict));
    };
    match serde_json::from_str::<RawConfig<'_>>(&json) {
        Ok(raw) => Ok(raw.into_owned()),
        // The rewrite made it valid syntax, so its complaint is about content and says more.
        Err(e) if !e.is_syntax() && !e.is_eof() => Err(RequestConfigError::Json(e)),
        Err(_) => Err(RequestConfigError::Json(strict)),
    }
}

/// The header's JSON, field for field as in Nighthawk's `ResponseOptions`. Strings borrow from
/// the request when they have no escapes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a JSON object")]
struct RawConfig<'a> {
    #[serde(default)]
    response_body_size: Option<u64>,
    #[serde(default, borrow)]
    response_headers: Option<Vec<RawHeaderOption<'a>>>,
    #[serde(default)]
    echo_request_headers: Option<bool>,
    #[serde(default, borrow)]
    static_delay: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    concurrency_based_linear_delay: Option<RawLinearDelay<'a>>,
    #[serde(default, borrow)]
    emit_previous_request_delta_in_response_header: Option<Cow<'a, str>>,
    #[serde(default)]
    response_status: Option<u64>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a header option like {\"header\": {\"key\": \"k\", \"value\": \"v\"}, \"append\": true}"
)]
struct RawHeaderOption<'a> {
    #[serde(borrow)]
    header: RawHeader<'a>,
    #[serde(default)]
    append: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a header like {\"key\": \"k\", \"value\": \"v\"}")]
struct RawHeader<'a> {
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(borrow, default)]
    value: Cow<'a, str>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object with minimal_delay and concurrency_delay_factor"
)]
struct RawLinearDelay<'a> {
    #[serde(default, borrow)]
    minimal_delay: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    concurrency_delay_factor: Option<Cow<'a, str>>,
}

fn owned(s: Cow<'_, str>) -> Cow<'static, str> {
    Cow::Owned(s.into_owned())
}

impl RawConfig<'_> {
    fn into_owned(self) -> RawConfig<'static> {
        RawConfig {
            response_body_size: self.response_body_size,
            response_headers: self.response_headers.map(|list| {
                list.into_iter()
                    .map(|o| RawHeaderOption {
                        header: RawHeader {
                            key: owned(o.header.key),
                            value: owned(o.header.value),
                        },
                        append: o.append,
                    })
                    .collect()
            }),
            echo_request_headers: self.echo_request_headers,
            static_delay: self.static_delay.map(owned),
            concurrency_based_linear_delay: self.concurrency_based_linear_delay.map(|l| {
                RawLinearDelay {
                    minimal_delay: l.minimal_delay.map(owned),
                    concurrency_delay_factor: l.concurrency_delay_factor.map(owned),
                }
            }),
            emit_previous_request_delta_in_response_header: self
                .emit_previous_request_delta_in_response_header
                .map(owned),
            response_status: self.response_status,
        }
    }
}

fn duration(field: &'static str, value: Option<&str>) -> Result<Duration, ConfigError> {
    match value {
        None => Ok(Duration::ZERO),
        Some(v) => parse_duration(v).map_err(|error| ConfigError::InvalidDuration { field, error }),
    }
}

/// The validated union of every config header seen so far.
#[derive(Default)]
struct Overrides<'a> {
    response_body_size: Option<u64>,
    response_headers: Vec<(Cow<'a, str>, Cow<'a, str>, bool)>,
    echo_request_headers: Option<bool>,
    delay: Option<Delay>,
    /// `Some(None)`: a header explicitly turned the delta header off with `""`.
    delta_header: Option<Option<Cow<'a, str>>>,
    response_status: Option<u16>,
}

impl<'a> Overrides<'a> {
    fn merge(&mut self, raw: RawConfig<'a>, max_body_size: u64) -> Result<(), ConfigError> {
        if let Some(size) = raw.response_body_size {
            self.response_body_size = Some(validate_body_size(size, max_body_size)?);
        }
        for option in raw.response_headers.into_iter().flatten() {
            let RawHeader { key, value } = option.header;
            headers::validate(&key, &value)?;
            self.response_headers.push((key, value, option.append.unwrap_or(false)));
        }
        if let Some(echo) = raw.echo_request_headers {
            self.echo_request_headers = Some(echo);
        }
        // A oneof in Nighthawk's proto: both in one object is an error, across headers the
        // later one wins.
        match (raw.static_delay, raw.concurrency_based_linear_delay) {
            (Some(_), Some(_)) => return Err(ConfigError::ConflictingDelays),
            (Some(d), None) => {
                self.delay = Some(Delay::from_static(duration("static_delay", Some(&d))?));
            }
            (None, Some(linear)) => {
                self.delay = Some(Delay::Linear {
                    minimal: duration(
                        "concurrency_based_linear_delay.minimal_delay",
                        linear.minimal_delay.as_deref(),
                    )?,
                    factor: duration(
                        "concurrency_based_linear_delay.concurrency_delay_factor",
                        linear.concurrency_delay_factor.as_deref(),
                    )?,
                });
            }
            (None, None) => {}
        }
        if let Some(name) = raw.emit_previous_request_delta_in_response_header {
            if name.is_empty() {
                self.delta_header = Some(None);
            } else {
                headers::validate_name(&name)?;
                self.delta_header = Some(Some(name));
            }
        }
        if let Some(status) = raw.response_status {
            self.response_status = Some(validate_status(status)?);
        }
        Ok(())
    }

    fn resolve(self, config: &'a ServerConfig) -> Plan<'a> {
        let mut plan = Plan::defaults(config);
        if self.echo_request_headers.unwrap_or(config.echo_request_headers()) {
            plan.body = Body::Echo;
        } else {
            let size = self.response_body_size.unwrap_or(config.response_body_size());
            plan.body = Body::Filler(size);
        }
        if !self.response_headers.is_empty() {
            let base = config.header_list();
            let mut list = HeaderList {
                entries: base
                    .entries
                    .iter()
                    .map(|(n, v)| (Cow::Borrowed(&**n), Cow::Borrowed(&**v)))
                    .collect(),
                date: base.date,
            };
            for (name, value, append) in self.response_headers {
                list.apply(name, value, append);
            }
            plan.headers = Headers::Custom(list);
        }
        if let Some(delay) = self.delay {
            plan.delay = delay;
        }
        if let Some(status) = self.response_status {
            plan.status = status;
        }
        Plan { delta_header: self.delta_header.flatten(), ..plan }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan<'a>(config: &'a ServerConfig, values: &[&'a str]) -> Result<Plan<'a>, String> {
        Plan::from_config_headers(config, values.iter().map(|v| v.as_bytes()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_without_header() {
        let config = ServerConfig::default();
        let p = Plan::defaults(&config);
        assert_eq!(p.status, 200);
        assert_eq!(p.body, Body::Filler(10));
        assert_eq!(p.headers, Headers::Default);
        assert!(p.delay.is_none());
    }

    #[test]
    fn every_field() {
        let config = ServerConfig::default();
        let p = plan(
            &config,
            &[r#"{"response_body_size": 3, "response_status": 503, "static_delay": "250ms",
                  "emit_previous_request_delta_in_response_header": "x-delta",
                  "response_headers": [{"header": {"key": "x-a", "value": "1"}}]}"#],
        )
        .unwrap();
        assert_eq!(p.body, Body::Filler(3));
        assert_eq!(p.status, 503);
        assert_eq!(p.delay, Delay::Static(Duration::from_millis(250)));
        assert_eq!(p.delta_header.as_deref(), Some("x-delta"));
        let Headers::Custom(list) = p.headers else { panic!("expected custom headers") };
        assert_eq!(list.entries.len(), 2);
        assert!(list.date);
    }

    #[test]
    fn later_headers_override_and_lists_concatenate() {
        let config = ServerConfig::default();
        let p = plan(
            &config,
            &[
                r#"{"response_body_size": 3, "static_delay": "1s",
                    "response_headers": [{"header": {"key": "x-a", "value": "1"}}]}"#,
                r#"{"response_body_size": 7, "concurrency_based_linear_delay":
                      {"minimal_delay": "0.01s", "concurrency_delay_factor": "0.001s"},
                    "response_headers": [{"header": {"key": "x-a", "value": "2"}, "append": true}]}"#,
            ],
        )
        .unwrap();
        assert_eq!(p.body, Body::Filler(7));
        let linear =
            Delay::Linear { minimal: Duration::from_millis(10), factor: Duration::from_millis(1) };
        assert_eq!(p.delay, linear);
        assert_eq!(linear.duration(5), Duration::from_millis(15));
        let Headers::Custom(list) = p.headers else { panic!("expected custom headers") };
        let xa: Vec<_> =
            list.entries.iter().filter(|(n, _)| n == "x-a").map(|(_, v)| &**v).collect();
        assert_eq!(xa, ["1", "2"]);
    }

    #[test]
    fn echo_wins_over_size() {
        let config = ServerConfig::default();
        let p = plan(&config, &[r#"{"echo_request_headers": true, "response_body_size": 5}"#]);
        assert_eq!(p.unwrap().body, Body::Echo);
    }

    #[test]
    fn nighthawk_yaml_flow_is_accepted() {
        let config = ServerConfig::default();
        let p = plan(&config, &[r#"{response_body_size:20, static_delay: "0s"}"#]).unwrap();
        assert_eq!(p.body, Body::Filler(20));
        assert!(p.delay.is_none());
    }

    #[test]
    fn errors_name_the_problem() {
        let config = ServerConfig::default();
        let cases = [
            (r#"{"foo": 1}"#, "unknown field `foo`"),
            (r#"{"response_body_size": "#, "EOF"),
            (r#"[1]"#, "expected a JSON object"),
            (r#"5"#, "expected a JSON object"),
            (r#"{"response_body_size": [1]}"#, "invalid type: sequence"),
            (r#"{"static_delay": "soon"}"#, "invalid static_delay"),
            (r#"{"response_status": 42}"#, "response_status 42"),
            (r#"{"response_body_size": 4194305}"#, "exceeds the server's max body size"),
            (r#"{"response_body_size": -1}"#, "invalid value"),
            (
                r#"{"response_headers": [{"header": {"key": "a b", "value": "v"}}]}"#,
                "invalid header name",
            ),
            (
                r#"{"static_delay": "1s", "concurrency_based_linear_delay": {}}"#,
                "mutually exclusive",
            ),
            (
                r#"{"concurrency_based_linear_delay": {"minimal_delay": "x"}}"#,
                "invalid concurrency_based_linear_delay.minimal_delay",
            ),
            (r#"{response_body_sise: 3}"#, "unknown field `response_body_sise`"),
        ];
        for (input, needle) in cases {
            let err = plan(&config, &[input]).unwrap_err();
            assert!(err.starts_with("invalid x-nighthawk-test-server-config: "), "{err}");
            assert!(err.contains(needle), "{input}: {err}");
        }
    }

    /// Mangled configs must produce errors, never panics.
    #[test]
    fn arbitrary_input_never_panics() {
        let config = ServerConfig::default();
        let valid = br#"{"response_body_size": 12, "response_headers": [{"header": {"key": "x-a", "value": "b"}, "append": true}], "static_delay": "1ms", "emit_previous_request_delta_in_response_header": "x-d", "response_status": 201, "echo_request_headers": false}"#;
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |bound: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % bound as u64) as usize
        };
        let alphabet = b"{}[]:,\"' \\0123456789abcxyz_-.smnu\xc3\xa9\x00\r";
        for _ in 0..20_000 {
            let mut input = valid.to_vec();
            for _ in 0..next(4) + 1 {
                let at = next(input.len() + 1);
                match next(3) {
                    0 if at < input.len() => {
                        input.remove(at);
                    }
                    1 if at < input.len() => input[at] = alphabet[next(alphabet.len())],
                    _ => input.insert(at, alphabet[next(alphabet.len())]),
                }
            }
            let _ = Plan::from_config_headers(&config, [&input[..]]);
            let _ = std::str::from_utf8(&input).map(relaxed::to_json);
        }
    }
}
