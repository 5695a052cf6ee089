//! Raw TCP messages from a connection's client bytes: up to and including a delimiter, or
//! fixed-length frames. Each message keeps how many bytes the server sent back before the
//! client's next message, so a replay can read answers by count.

use shrike_jobs::Body;

use super::{Found, Splitter};
use crate::flows::Flow;
use crate::report::Report;

pub fn split(flow: &Flow, how: &Splitter, report: &mut Report) -> Vec<Found> {
    let data = flow.up.data();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let end = match how {
            Splitter::Fixed(n) if *n > 0 && at + n <= data.len() => Some(at + n),
            Splitter::Delimited(d) if !d.is_empty() => {
                data[at..].windows(d.len()).position(|w| w == &d[..]).map(|i| at + i + d.len())
            }
            _ => None,
        };
        let Some(end) = end else {
            report.problem("tcp: bytes after the last complete message", 1);
            report.unparsed_bytes += (data.len() - at) as u64;
            break;
        };
        cuts.push((at, end));
        at = end;
    }
    let times: Vec<_> =
        cuts.iter().map(|(s, _)| flow.up.time_at(*s as u64).unwrap_or(flow.first)).collect();
    cuts.iter()
        .enumerate()
        .map(|(i, (s, e))| {
            let answered = flow.down.bytes_between(times[i], times.get(i + 1).copied());
            (times[i], Body::Raw { data: data[*s..*e].to_vec(), response_bytes: Some(answered) })
        })
        .collect()
}
