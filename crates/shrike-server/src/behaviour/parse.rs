//! The config header's JSON (and `shrike serve --config`'s): parsing, validation and the
//! field-by-field merge over the server's defaults.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use shrike_stats::duration::parse_duration;

use super::faults::{probability, Distribution, Reset, ResetScope, Stall};
use super::{Body, Chunking, Delay, Headers, Plan, CONFIG_HEADER};
use crate::config::{validate_body_size, validate_status, ConfigError, ServerConfig};
use crate::headers::{self, HeaderList};
use crate::relaxed;

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

impl RequestConfigError {
    /// The message without the header's name, for `--config`.
    pub(crate) fn detail(&self) -> String {
        let full = self.to_string();
        let prefix = format!("invalid {CONFIG_HEADER}: ");
        full.strip_prefix(&prefix).map_or(full.clone(), str::to_string)
    }
}

/// Merges config header values in order over the server defaults.
pub(super) fn plan<'a, I>(
    config: &'a ServerConfig,
    values: I,
) -> Result<Plan<'a>, RequestConfigError>
where
    I: IntoIterator<Item = &'a [u8]>,
{
    let mut overrides = Overrides::default();
    for value in values {
        overrides.merge(parse(value)?, config.max_body_size())?;
    }
    Ok(overrides.resolve(config))
}

/// `config` with the fields of `json` (same shape as the header) as its new defaults.
pub(crate) fn defaults_from_json(
    config: &ServerConfig,
    json: &str,
) -> Result<ServerConfig, RequestConfigError> {
    let plan = plan(config, [json.as_bytes()])?;
    let mut out = config.clone();
    let headers = match &plan.headers {
        Headers::Default => None,
        Headers::Custom(list) => Some(HeaderList {
            entries: list
                .entries
                .iter()
                .map(|(n, v)| (Cow::Owned(n.to_string()), Cow::Owned(v.to_string())))
                .collect(),
            date: list.date,
        }),
    };
    let behaviour = super::Behaviour {
        delay: plan.delay,
        random_delay: plan.random_delay.clone(),
        delta_header: plan.delta_header.as_deref().map(str::to_string),
        chunking: plan.chunking,
        faults: plan.faults.clone(),
        stats_headers: plan.stats_headers,
        seed: plan.seed,
    };
    out.adopt(plan.status, plan.body, headers, behaviour);
    Ok(out)
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
    #[serde(default)]
    delay_distribution: Option<RawDistribution>,
    #[serde(default)]
    response_chunk_size: Option<u64>,
    #[serde(default)]
    response_chunk_delay: Option<String>,
    #[serde(default)]
    reset: Option<RawReset>,
    #[serde(default)]
    close_after_bytes: Option<RawCloseAfter>,
    #[serde(default)]
    stall: Option<RawStall>,
    #[serde(default)]
    status_faults: Option<Vec<RawStatusFault>>,
    #[serde(default)]
    emit_server_stats_headers: Option<bool>,
    #[serde(default)]
    seed: Option<u64>,
}

#[derive(Deserialize)]
#[serde(
    rename_all = "snake_case",
    deny_unknown_fields,
    expecting = "one of {\"fixed\": d}, {\"uniform\": {\"min\": d, \"max\": d}}, \
                 {\"exponential\": {\"mean\": d}}, {\"weighted\": [{\"delay\": d, \"weight\": n}]}"
)]
enum RawDistribution {
    Fixed(String),
    Uniform { min: String, max: String },
    Exponential { mean: String },
    Weighted(Vec<RawWeighted>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWeighted {
    delay: String,
    weight: u32,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum RawScope {
    Stream,
    Connection,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReset {
    #[serde(default)]
    scope: Option<RawScope>,
    #[serde(default)]
    probability: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCloseAfter {
    bytes: u64,
    #[serde(default)]
    probability: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStall {
    duration: String,
    #[serde(default)]
    after_bytes: Option<u64>,
    #[serde(default)]
    probability: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStatusFault {
    status: u64,
    #[serde(default)]
    probability: Option<f64>,
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
            delay_distribution: self.delay_distribution,
            response_chunk_size: self.response_chunk_size,
            response_chunk_delay: self.response_chunk_delay,
            reset: self.reset,
            close_after_bytes: self.close_after_bytes,
            stall: self.stall,
            status_faults: self.status_faults,
            emit_server_stats_headers: self.emit_server_stats_headers,
            seed: self.seed,
        }
    }
}

fn required(field: &'static str, value: &str) -> Result<Duration, ConfigError> {
    parse_duration(value).map_err(|error| ConfigError::InvalidDuration { field, error })
}

fn distribution(raw: RawDistribution) -> Result<Distribution, ConfigError> {
    let d = match raw {
        RawDistribution::Fixed(d) => Distribution::Fixed(required("delay_distribution.fixed", &d)?),
        RawDistribution::Uniform { min, max } => Distribution::Uniform {
            min: required("delay_distribution.uniform.min", &min)?,
            max: required("delay_distribution.uniform.max", &max)?,
        },
        RawDistribution::Exponential { mean } => Distribution::Exponential {
            mean: required("delay_distribution.exponential.mean", &mean)?,
        },
        RawDistribution::Weighted(choices) => Distribution::Weighted(
            choices
                .iter()
                .map(|c| Ok((required("delay_distribution.weighted.delay", &c.delay)?, c.weight)))
                .collect::<Result<Arc<[_]>, ConfigError>>()?,
        ),
    };
    d.validate()?;
    Ok(d)
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
    delay: Option<(Delay, Option<Distribution>)>,
    /// `Some(None)`: a header explicitly turned the delta header off with `""`.
    delta_header: Option<Option<Cow<'a, str>>>,
    response_status: Option<u16>,
    chunk_size: Option<u64>,
    chunk_delay: Option<Duration>,
    reset: Option<Reset>,
    close_after_bytes: Option<(u64, f64)>,
    stall: Option<(Stall, f64)>,
    status_faults: Option<Arc<[(u16, f64)]>>,
    stats_headers: Option<bool>,
    seed: Option<u64>,
}

impl<'a> Overrides<'a> {
    fn merge(&mut self, raw: RawConfig<'a>, max_body_size: u64) -> Result<(), ConfigError> {
        self.merge_faults(&raw)?;
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
        let set = usize::from(raw.static_delay.is_some())
            + usize::from(raw.concurrency_based_linear_delay.is_some())
            + usize::from(raw.delay_distribution.is_some());
        if set > 1 {
            return Err(ConfigError::ConflictingDelays);
        }
        if let Some(d) = raw.delay_distribution {
            self.delay = Some((Delay::None, Some(distribution(d)?)));
        }
        match (raw.static_delay, raw.concurrency_based_linear_delay) {
            (Some(_), Some(_)) => return Err(ConfigError::ConflictingDelays),
            (Some(d), None) => {
                self.delay = Some((Delay::from_static(duration("static_delay", Some(&d))?), None));
            }
            (None, Some(linear)) => {
                let linear = Delay::Linear {
                    minimal: duration(
                        "concurrency_based_linear_delay.minimal_delay",
                        linear.minimal_delay.as_deref(),
                    )?,
                    factor: duration(
                        "concurrency_based_linear_delay.concurrency_delay_factor",
                        linear.concurrency_delay_factor.as_deref(),
                    )?,
                };
                self.delay = Some((linear, None));
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

    fn merge_faults(&mut self, raw: &RawConfig<'_>) -> Result<(), ConfigError> {
        if let Some(size) = raw.response_chunk_size {
            self.chunk_size = Some(size);
        }
        if let Some(d) = &raw.response_chunk_delay {
            self.chunk_delay = Some(required("response_chunk_delay", d)?);
        }
        if let Some(r) = &raw.reset {
            let scope = match r.scope.unwrap_or(RawScope::Stream) {
                RawScope::Stream => ResetScope::Stream,
                RawScope::Connection => ResetScope::Connection,
            };
            let probability = probability("reset.probability", r.probability)?;
            self.reset = Some(Reset { scope, probability });
        }
        if let Some(c) = &raw.close_after_bytes {
            let p = probability("close_after_bytes.probability", c.probability)?;
            self.close_after_bytes = Some((c.bytes, p));
        }
        if let Some(st) = &raw.stall {
            let duration = required("stall.duration", &st.duration)?;
            let p = probability("stall.probability", st.probability)?;
            self.stall = Some((Stall { duration, after_bytes: st.after_bytes }, p));
        }
        if let Some(list) = &raw.status_faults {
            let list = list
                .iter()
                .map(|f| {
                    let status =
                        validate_status(f.status).map_err(|_| ConfigError::InvalidFault {
                            field: "status_faults.status",
                            why: format!("{} is out of range: expected 200..=599", f.status),
                        })?;
                    Ok((status, probability("status_faults.probability", f.probability)?))
                })
                .collect::<Result<Vec<_>, ConfigError>>()?;
            super::Faults::validate_status_sum(&list)?;
            self.status_faults = Some(list.into());
        }
        if let Some(on) = raw.emit_server_stats_headers {
            self.stats_headers = Some(on);
        }
        if let Some(seed) = raw.seed {
            self.seed = Some(seed);
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
        if let Some((delay, random)) = self.delay {
            plan.delay = delay;
            plan.random_delay = random;
        }
        if let Some(status) = self.response_status {
            plan.status = status;
        }
        if let Some(delta) = self.delta_header {
            plan.delta_header = delta;
        }
        if self.chunk_size.is_some() || self.chunk_delay.is_some() {
            let base = plan.chunking;
            let size = self.chunk_size.or(base.map(|c| c.size)).unwrap_or(0);
            let delay = self.chunk_delay.or(base.map(|c| c.delay)).unwrap_or(Duration::ZERO);
            // Size 0 turns chunking off (a header can undo a server default).
            plan.chunking = (size > 0).then_some(Chunking { size, delay });
        }
        let faults = &mut plan.faults;
        if let Some(reset) = self.reset {
            faults.reset = (reset.probability > 0.0).then_some(reset);
        }
        if let Some((bytes, p)) = self.close_after_bytes {
            faults.close_after_bytes = (p > 0.0).then_some((bytes, p));
        }
        if let Some((stall, p)) = self.stall {
            faults.stall = (p > 0.0).then_some((stall, p));
        }
        if let Some(list) = self.status_faults {
            faults.status = list;
        }
        if let Some(on) = self.stats_headers {
            plan.stats_headers = on;
        }
        if self.seed.is_some() {
            plan.seed = self.seed;
        }
        plan
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
    fn fault_and_pacing_fields() {
        let config = ServerConfig::default();
        let p = plan(
            &config,
            &[r#"{"reset": {"scope": "connection", "probability": 0.25},
                  "close_after_bytes": {"bytes": 5},
                  "stall": {"duration": "0.000250s", "after_bytes": 2, "probability": 0.5},
                  "status_faults": [{"status": 503, "probability": 0.2}, {"status": 429}],
                  "response_chunk_size": 4, "response_chunk_delay": "1ms",
                  "delay_distribution": {"weighted": [{"delay": "1ms", "weight": 90},
                                                      {"delay": "50ms", "weight": 10}]},
                  "emit_server_stats_headers": true, "seed": 9}"#],
        );
        // 0.2 + 1 > 1.
        assert!(p.unwrap_err().contains("status_faults"));
        let p = plan(
            &config,
            &[r#"{"reset": {"scope": "connection", "probability": 0.25},
                  "close_after_bytes": {"bytes": 5},
                  "stall": {"duration": "0.000250s", "after_bytes": 2, "probability": 0.5},
                  "status_faults": [{"status": 503, "probability": 0.2}],
                  "response_chunk_size": 4, "response_chunk_delay": "1ms",
                  "delay_distribution": {"exponential": {"mean": "2ms"}},
                  "emit_server_stats_headers": true, "seed": 9}"#],
        )
        .unwrap();
        let f = &p.faults;
        assert_eq!(f.reset, Some(Reset { scope: ResetScope::Connection, probability: 0.25 }));
        assert_eq!(f.close_after_bytes, Some((5, 1.0)));
        let stall = Stall { duration: Duration::from_micros(250), after_bytes: Some(2) };
        assert_eq!(f.stall, Some((stall, 0.5)));
        assert_eq!(&f.status[..], &[(503, 0.2)]);
        assert_eq!(p.chunking, Some(Chunking { size: 4, delay: Duration::from_millis(1) }));
        assert_eq!(
            p.random_delay,
            Some(Distribution::Exponential { mean: Duration::from_millis(2) })
        );
        assert!(p.delay.is_none());
        assert!(p.stats_headers);
        assert_eq!(p.seed, Some(9));
    }

    #[test]
    fn header_overrides_server_defaults_field_by_field() {
        let base = ServerConfig::builder()
            .defaults_json(
                r#"{"response_status": 503, "reset": {"probability": 0.5},
                    "response_chunk_size": 8, "response_chunk_delay": "2ms",
                    "concurrency_based_linear_delay": {"minimal_delay": "1ms"}}"#,
            )
            .build()
            .unwrap();
        let d = Plan::defaults(&base);
        assert_eq!(d.status, 503);
        assert_eq!(d.faults.reset.map(|r| r.probability), Some(0.5));
        // Only the named fields change: probability 0 turns the reset off, the chunk delay
        // keeps its default, and a static delay replaces the linear one.
        let p = plan(
            &base,
            &[r#"{"reset": {"probability": 0}, "response_chunk_size": 16, "static_delay": "3ms"}"#],
        )
        .unwrap();
        assert_eq!(p.status, 503);
        assert_eq!(p.faults.reset, None);
        assert_eq!(p.chunking, Some(Chunking { size: 16, delay: Duration::from_millis(2) }));
        assert_eq!(p.delay, Delay::Static(Duration::from_millis(3)));
        let p = plan(&base, &[r#"{"response_chunk_size": 0}"#]).unwrap();
        assert_eq!(p.chunking, None);
        let bad = ServerConfig::builder().defaults_json(r#"{"seed": -1}"#).build();
        assert!(matches!(bad, Err(ConfigError::InvalidDefaults(_))), "{bad:?}");
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
            (r#"{"reset": {"probability": -0.1}}"#, "invalid reset.probability"),
            (r#"{"close_after_bytes": {}}"#, "missing field `bytes`"),
            (r#"{"stall": {"duration": "x"}}"#, "invalid stall.duration"),
            (r#"{"status_faults": [{"status": 600}]}"#, "invalid status_faults.status"),
            (r#"{"delay_distribution": {"normal": {}}}"#, "unknown variant `normal`"),
            (r#"{"delay_distribution": {"weighted": []}}"#, "delay_distribution.weighted"),
            (
                r#"{"static_delay": "1s", "delay_distribution": {"fixed": "1ms"}}"#,
                "mutually exclusive",
            ),
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
