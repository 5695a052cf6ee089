//! The config header's JSON (and `shrike serve --config`'s): parsing, validation and the
//! field-by-field merge over the server's defaults.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use shrike_stats::duration::parse_duration;

use super::faults::{probability, Distribution, Reset, ResetScope, Stall};
use super::{Body, Chunking, Delay, Headers, ResponsePlan, CONFIG_HEADER};
use crate::config::{validate_body_size, validate_status, ConfigError, ServerConfig};
use crate::headers::{self, HeaderList};
use shrike_stats::relaxed;

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
) -> Result<ResponsePlan<'a>, RequestConfigError>
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

    fn resolve(self, config: &'a ServerConfig) -> ResponsePlan<'a> {
        let mut plan = ResponsePlan::defaults(config);
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
#[path = "parse_tests.rs"]
mod tests;
