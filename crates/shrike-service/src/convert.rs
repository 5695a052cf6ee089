//! Between the wire (`shrike.v1` messages) and Shrike's types: options as a protobuf `Struct`
//! and JSON, samples with their exact histograms, results as Shrike's JSON.

use std::collections::HashMap;
use std::time::Duration;

use prost_types::{value::Kind, ListValue, Struct, Value as PValue};
use serde_json::{Map, Number, Value};
use shrike_engine::Sample;
use shrike_stats::{Counters, RunResult, StatId, Statistic, StatusCodes, Termination};

use crate::proto;

/// JSON to a protobuf `Struct` (a JSON object; anything else is wrapped as `{"value": …}`).
pub fn to_struct(v: &Value) -> Struct {
    match to_pvalue(v).kind {
        Some(Kind::StructValue(s)) => s,
        other => {
            Struct { fields: [("value".to_string(), PValue { kind: other })].into_iter().collect() }
        }
    }
}

fn to_pvalue(v: &Value) -> PValue {
    let kind = match v {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        // A Struct holds doubles only; integers above 2^53 would lose digits, so they travel
        // as the decimal strings proto3 JSON uses for 64-bit integers (the spec reads both).
        Value::Number(n) => match n.as_u64().or_else(|| n.as_i64().map(|i| i as u64)) {
            Some(i) if i > (1u64 << 53) => Kind::StringValue(n.to_string()),
            _ => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(a) => Kind::ListValue(ListValue { values: a.iter().map(to_pvalue).collect() }),
        Value::Object(o) => Kind::StructValue(Struct {
            fields: o.iter().map(|(k, v)| (k.clone(), to_pvalue(v))).collect(),
        }),
    };
    PValue { kind: Some(kind) }
}

/// A protobuf `Struct` back to JSON. Whole numbers become integers: the spec reads counts
/// (connections, concurrency, …) as integers, and a Struct can only carry them as doubles.
pub fn from_struct(s: &Struct) -> Value {
    Value::Object(s.fields.iter().map(|(k, v)| (k.clone(), from_pvalue(v))).collect::<Map<_, _>>())
}

fn from_pvalue(v: &PValue) -> Value {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::NumberValue(x)) => {
            if x.fract() == 0.0 && x.abs() < 9.0e15 {
                Value::from(*x as i64)
            } else {
                Number::from_f64(*x).map_or(Value::Null, Value::Number)
            }
        }
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::ListValue(l)) => Value::Array(l.values.iter().map(from_pvalue).collect()),
        Some(Kind::StructValue(s)) => from_struct(s),
    }
}

pub fn to_duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: d.subsec_nanos() as i32,
    }
}

/// A wire duration; negative or malformed ones are zero.
pub fn from_duration(d: Option<&prost_types::Duration>) -> Duration {
    match d {
        Some(d) if d.seconds >= 0 && d.nanos >= 0 => {
            Duration::new(d.seconds as u64, d.nanos.unsigned_abs().min(999_999_999))
        }
        _ => Duration::ZERO,
    }
}

/// The statistics a sample carries, in wire order.
const SAMPLE_STATS: [StatId; 3] =
    [StatId::ScheduledToResponse, StatId::RequestToResponse, StatId::SendLateness];

fn sample_stat(s: &Sample, id: StatId) -> &Statistic {
    match id {
        StatId::RequestToResponse => &s.request_to_response,
        StatId::SendLateness => &s.send_lateness,
        _ => &s.scheduled_to_response,
    }
}

pub fn histogram(id: StatId, s: &Statistic) -> proto::Histogram {
    proto::Histogram {
        id: id.id().to_string(),
        hdr_v2: s.encode_histogram_bytes(),
        count: s.count(),
        mean: s.mean(),
        pstdev: s.pstdev(),
        min: if s.count() == 0 { 0 } else { s.min() },
        max: s.max(),
    }
}

/// An engine sample on the wire.
pub fn to_sample(s: &Sample) -> proto::Sample {
    let mut counters = HashMap::new();
    for (name, n) in s.counters.non_zero_named() {
        counters.insert(name.to_string(), n);
    }
    proto::Sample {
        start: Some(to_duration(s.start)),
        duration: Some(to_duration(s.duration)),
        counters,
        status_codes: s
            .status_codes
            .non_zero()
            .into_iter()
            .map(|(c, n)| (u32::from(c), n))
            .collect(),
        histograms: SAMPLE_STATS.iter().map(|&id| histogram(id, sample_stat(s, id))).collect(),
        in_flight: s.in_flight,
        in_flight_max: s.in_flight_max,
        last: s.last,
    }
}

/// Why a message from a service cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    #[error("histogram {id}: {reason}")]
    Histogram { id: String, reason: String },
    #[error("result: {0}")]
    Result(String),
}

/// A wire statistic back, exactly.
pub fn from_histogram(h: &proto::Histogram) -> Result<(Option<StatId>, Statistic), WireError> {
    let hist = Statistic::decode_histogram_bytes(&h.hdr_v2)
        .map_err(|e| WireError::Histogram { id: h.id.clone(), reason: e.to_string() })?;
    let stat = Statistic::from_parts(hist, h.count, h.mean, h.pstdev, h.min, h.max);
    Ok((StatId::from_id(&h.id), stat))
}

/// A wire sample back into the engine's form, exactly (statistics it does not know are
/// left out).
pub fn from_sample(p: &proto::Sample) -> Result<Sample, WireError> {
    let mut counters = Counters::new();
    for (name, &n) in &p.counters {
        counters.set_named(name, n);
    }
    let mut status_codes = StatusCodes::new();
    for (&code, &n) in &p.status_codes {
        if let Ok(code) = u16::try_from(code) {
            status_codes.add(code, n);
        }
    }
    let mut s = Sample {
        start: from_duration(p.start.as_ref()),
        duration: from_duration(p.duration.as_ref()),
        counters,
        status_codes,
        scheduled_to_response: Statistic::new(),
        request_to_response: Statistic::new(),
        send_lateness: Statistic::new(),
        in_flight: p.in_flight,
        in_flight_max: p.in_flight_max,
        last: p.last,
    };
    for h in &p.histograms {
        match from_histogram(h)? {
            (Some(StatId::ScheduledToResponse), st) => s.scheduled_to_response = st,
            (Some(StatId::RequestToResponse), st) => s.request_to_response = st,
            (Some(StatId::SendLateness), st) => s.send_lateness = st,
            _ => {}
        }
    }
    Ok(s)
}

/// How the wire names a termination.
pub fn termination_name(t: &Termination) -> String {
    match t {
        Termination::Completed => "completed".into(),
        Termination::Interrupted => "interrupted".into(),
        Termination::TerminationPredicate(p) => format!("termination_predicate: {p}"),
        Termination::FailurePredicate(p) => format!("failure_predicate: {p}"),
    }
}

pub fn to_result(r: &RunResult) -> proto::Result {
    let mut json = Vec::new();
    // Writing JSON into a Vec performs no I/O and cannot fail.
    let _ = shrike_output::json::write(r, &mut json);
    proto::Result {
        json: String::from_utf8_lossy(&json).into_owned(),
        termination: termination_name(&r.termination),
        failed: r.verdict.is_failure(),
        verdict: r.verdict.describe(),
    }
}

pub fn from_result(p: &proto::Result) -> Result<RunResult, WireError> {
    shrike_output::json::from_json(&p.json).map_err(|e| WireError::Result(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_survive_a_struct() {
        let v = serde_json::json!({
            "uri": "http://127.0.0.1:1/", "connections": 10, "requests_per_second": 2.5,
            "labels": ["a"], "open_loop": true, "tls": {"sni": null},
            "total_requests": 18_000_000_000_000_000u64,
        });
        let back = from_struct(&to_struct(&v));
        assert_eq!(back["connections"], 10);
        assert_eq!(back["requests_per_second"], 2.5);
        assert_eq!(back["labels"][0], "a");
        assert_eq!(back["open_loop"], true);
        assert_eq!(back["tls"]["sni"], Value::Null);
        assert_eq!(back["total_requests"], "18000000000000000");
    }

    #[test]
    fn samples_round_trip_exactly() {
        let mut s = Sample {
            start: Duration::from_millis(250),
            duration: Duration::from_millis(250),
            counters: Counters::new(),
            status_codes: StatusCodes::new(),
            scheduled_to_response: Statistic::new(),
            request_to_response: Statistic::new(),
            send_lateness: Statistic::new(),
            in_flight: 3,
            in_flight_max: 9,
            last: true,
        };
        s.counters.add(shrike_stats::Counter::Http2xx, 7);
        s.counters.set_named("some.future_counter", 2);
        s.status_codes.add(200, 7);
        for v in [1_000, 52_123, 9_999_999, 1] {
            s.request_to_response.record(v);
        }
        let back = from_sample(&to_sample(&s)).unwrap();
        assert_eq!(back.counters.non_zero_named(), s.counters.non_zero_named());
        assert_eq!(back.status_codes.non_zero(), vec![(200, 7)]);
        assert_eq!(back.request_to_response.histogram(), s.request_to_response.histogram());
        assert_eq!(back.request_to_response.min(), 1);
        assert_eq!(back.request_to_response.max(), 9_999_999);
        assert_eq!(back.request_to_response.mean(), s.request_to_response.mean());
        assert_eq!((back.start, back.in_flight_max, back.last), (s.start, 9, true));
        let mut bad = to_sample(&s);
        bad.histograms[0].hdr_v2 = vec![1, 2, 3];
        assert!(from_sample(&bad).unwrap_err().to_string().contains("scheduled_to_response"));
    }
}
