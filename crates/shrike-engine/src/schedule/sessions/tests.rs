//! The session schedule's order: sessions wait for their own answers only, openings come at
//! their captured time, and a worker that fell behind sends due requests first.

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A fed schedule over `sessions` (in start order), and its payload store. Each session is
/// `(start, connect)` in ms, with one request at its start.
fn fed(sessions: &[(u64, Option<u64>)]) -> (SessionSchedule, Rc<Payloads>) {
    use crate::feed::{FedRequest, FedSession};
    let (mut sender, mut feed) = crate::feed::feed(1, sessions.len());
    for &(start, connect) in sessions {
        let payload = Payload::bytes(&b"GET /"[..]);
        assert!(sender.send(FedSession {
            start: ms(start),
            connect: connect.map(ms),
            per_request_connections: false,
            requests: vec![FedRequest { at: ms(0), payload }],
        }));
    }
    drop(sender);
    let payloads = Rc::new(Payloads::default());
    let rx = feed.receivers.remove(0);
    (SessionSchedule::fed(rx, feed.admission.clone(), payloads.clone()), payloads)
}

#[test]
fn a_session_waits_for_its_previous_request_and_others_do_not() {
    let plan = |start, own| SessionPlan {
        start: ms(start),
        requests: vec![(ms(0), 0), (ms(10), 1)],
        own_connection: own,
    };
    let mut s = SessionSchedule::new(vec![plan(0, true), plan(5, false)]);
    assert_eq!(s.peek(), Peek::At(ms(0)));
    let a = s.take().expect("a0");
    assert_eq!(a.session.map(|r| (r.id, r.own_connection, r.last)), Some((0, true, false)));
    // Session 0 is in flight; session 1 is next, at 5 ms.
    assert_eq!(s.peek(), Peek::At(ms(5)));
    let b = s.take().expect("b0");
    assert_eq!((b.request, b.session.map(|r| r.id)), (0, Some(1)));
    assert_eq!(s.peek(), Peek::Wait, "both sessions wait for a response");
    // Session 1 answers first: its second request is due at 5 + 10 ms.
    assert!(s.finished(1));
    assert_eq!(s.peek(), Peek::At(ms(15)));
    assert!(s.finished(0));
    assert_eq!(s.peek(), Peek::At(ms(10)), "session 0's second request comes first");
    let a1 = s.take().expect("a1");
    assert_eq!((a1.request, a1.session.map(|r| r.last)), (1, Some(true)));
    let b1 = s.take().expect("b1");
    assert_eq!(b1.session.map(|r| r.last), Some(true));
    assert_eq!(s.peek(), Peek::Wait);
    assert!(s.finished(0) && s.finished(1));
    assert!(!s.finished(1), "a session with nothing in flight changes nothing");
    assert_eq!(s.peek(), Peek::End);
}

#[test]
fn a_fed_session_opens_its_connection_at_its_captured_time_then_sends() {
    // Opens 30 ms ahead; another opens with its request (a lead of 0 is none).
    let (mut s, payloads) = fed(&[(50, Some(20)), (60, Some(60))]);
    assert_eq!(s.peek(), Peek::At(ms(20)), "the opening comes first, at its own time");
    let open = s.take().expect("opening");
    let r = open.session.expect("session");
    assert!(r.opening && !r.first && r.fed);
    // The first request's payload is in the store already (a login may read it).
    assert_eq!(payloads.get(open.request).map(|p| p.data), Some(bytes::Bytes::from("GET /")));
    assert_eq!(s.peek(), Peek::At(ms(50)));
    let first = s.take().expect("first request");
    let f = first.session.expect("session");
    assert!(!f.opening && f.first && f.last);
    assert_eq!(first.request, open.request, "the request the connection opened for");
    assert_eq!(s.peek(), Peek::At(ms(60)));
    let other = s.take().expect("the other session's request");
    assert!(other.session.is_some_and(|r| !r.opening && r.first));
}

#[test]
fn a_worker_that_fell_behind_sends_due_requests_before_openings_with_slack() {
    // In start order: C (opens at 10, sends at 30), D (sends at 40), A (opens at 10,
    // sends at 100).
    let (mut s, _) = fed(&[(30, Some(10)), (40, None), (100, Some(10))]);
    let mut order = Vec::new();
    // The worker wakes at 50 ms, behind everything but A's request.
    while let Some((due, at)) = s.take_by(ms(50)) {
        let r = due.session.expect("session");
        order.push((r.id, r.opening, at));
        if order.len() == 5 {
            break;
        }
    }
    let (c, d, a) = (0, 1, 2);
    assert_eq!(
        order,
        vec![
            // C's opening first: its request (30) is due before D's (40).
            (c, true, ms(10)),
            (c, false, ms(30)),
            (d, false, ms(40)),
            // A's opening has slack until 100: it waits for the due requests.
            (a, true, ms(10)),
            // Nothing else due by 50: A's request, at its own time.
            (a, false, ms(100)),
        ]
    );
}
