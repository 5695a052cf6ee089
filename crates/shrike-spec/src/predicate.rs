//! Failure and termination predicates: `counter:threshold`, firing when the counter exceeds
//! the threshold. A failure predicate fails the run (exit 1); a termination predicate ends it
//! successfully. As in Nighthawk, each worker evaluates predicates on its own counters, so a
//! predicate reacts exactly, on the request that crossed the threshold, without cross-thread
//! traffic; the first to fire stops every worker.

use shrike_stats::{Counter, Counters};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PredicateKind {
    Failure,
    Termination,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Predicate {
    pub counter: Counter,
    pub threshold: u64,
    pub kind: PredicateKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PredicateError {
    #[error("invalid predicate {0:?}: expected COUNTER:THRESHOLD, e.g. benchmark.http_5xx:0")]
    Syntax(String),
    #[error("invalid predicate {input:?}: unknown counter {name:?}; known counters: {known}")]
    UnknownCounter { input: String, name: String, known: String },
    #[error("invalid predicate {0:?}: the threshold must be a whole number from 0 to 18446744073709551615")]
    Threshold(String),
}

impl Predicate {
    /// Parses `name:N` (also Nighthawk's older `name,N`).
    pub fn parse(input: &str, kind: PredicateKind) -> Result<Predicate, PredicateError> {
        let (name, n) = input
            .rsplit_once(':')
            .or_else(|| input.rsplit_once(','))
            .ok_or_else(|| PredicateError::Syntax(input.to_string()))?;
        let name = name.trim();
        let counter = Counter::from_name(name).ok_or_else(|| PredicateError::UnknownCounter {
            input: input.to_string(),
            name: name.to_string(),
            known: Counter::ALL.iter().map(|c| c.name()).collect::<Vec<_>>().join(", "),
        })?;
        let threshold =
            n.trim().parse::<u64>().map_err(|_| PredicateError::Threshold(input.to_string()))?;
        Ok(Predicate { counter, threshold, kind })
    }

    /// Nighthawk's defaults: no error status, connection failure or stream reset is tolerated.
    pub fn default_failures() -> Vec<Predicate> {
        [Counter::Http4xx, Counter::Http5xx, Counter::PoolConnectionFailure, Counter::StreamResets]
            .into_iter()
            .map(|counter| Predicate { counter, threshold: 0, kind: PredicateKind::Failure })
            .collect()
    }

    #[inline]
    pub fn fired(&self, counters: &Counters) -> bool {
        counters.get(self.counter) > self.threshold
    }

    pub fn describe(&self) -> String {
        format!("{}:{}", self.counter.name(), self.threshold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_forms() {
        let p = Predicate::parse("benchmark.http_5xx:3", PredicateKind::Failure).expect("ok");
        assert_eq!((p.counter, p.threshold), (Counter::Http5xx, 3));
        let p = Predicate::parse("upstream_rq_total,10", PredicateKind::Termination).expect("ok");
        assert_eq!((p.counter, p.threshold), (Counter::RqTotal, 10));
    }

    #[test]
    fn rejects_bad() {
        for bad in ["", "benchmark.http_5xx", "benchmark.http_5xx:-1", "nope:1", "x:y"] {
            assert!(Predicate::parse(bad, PredicateKind::Failure).is_err(), "{bad}");
        }
    }

    #[test]
    fn fires_strictly_above_threshold() {
        let p = Predicate::parse("benchmark.http_2xx:2", PredicateKind::Termination).expect("ok");
        let mut c = Counters::new();
        c.add(Counter::Http2xx, 2);
        assert!(!p.fired(&c));
        c.inc(Counter::Http2xx);
        assert!(p.fired(&c));
    }
}
