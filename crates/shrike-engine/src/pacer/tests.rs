use super::*;

fn offsets(p: &mut Pacer, n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| match p.next_release() {
            Release::At(d) => d.as_nanos() as u64,
            other => panic!("expected a scheduled release, got {other:?}"),
        })
        .collect()
}

fn rate(r: f64) -> Rate {
    Rate::try_new(r).expect("rate")
}

#[test]
fn linear_spacing() {
    let mut p = Pacer::linear(rate(1000.0), 1, Duration::ZERO, 0.0, 1);
    assert_eq!(offsets(&mut p, 4), vec![0, 1_000_000, 2_000_000, 3_000_000]);
}

#[test]
fn bursts_release_in_groups() {
    let mut p = Pacer::linear(rate(100.0), 3, Duration::ZERO, 0.0, 1);
    // 3 requests every 30 ms keeps the average at 100 rps.
    assert_eq!(offsets(&mut p, 7), vec![0, 0, 0, 30_000_000, 30_000_000, 30_000_000, 60_000_000]);
}

#[test]
fn phase_interleaves_workers() {
    let mut a = Pacer::linear(rate(100.0), 1, Duration::ZERO, 0.0, 1);
    let mut b = Pacer::linear(rate(100.0), 1, Duration::ZERO, 0.5, 1);
    assert_eq!(offsets(&mut a, 2), vec![0, 10_000_000]);
    assert_eq!(offsets(&mut b, 2), vec![5_000_000, 15_000_000]);
}

#[test]
fn jitter_stays_in_bounds_and_varies() {
    let mut p = Pacer::linear(rate(1000.0), 1, Duration::from_micros(100), 0.0, 42);
    let v = offsets(&mut p, 1000);
    let mut distinct = std::collections::HashSet::new();
    for (i, o) in v.iter().enumerate() {
        let base = i as u64 * 1_000_000;
        assert!(*o >= base && *o <= base + 100_000, "release {i} at {o}");
        distinct.insert(o - base);
    }
    assert!(distinct.len() > 100);
}

#[test]
fn jittered_releases_keep_their_order_and_the_run_end() {
    // A jitter ten times the spacing: each release is jittered within its own slot, so the
    // releases stay in order and all 20 of a 2 s run at 10/s fall inside it.
    for phase in [0.0, 0.5, 0.99] {
        let mut p = Pacer::linear(rate(10.0), 1, Duration::from_secs(1), phase, 7)
            .ending_at(Some(Duration::from_secs(2)));
        let v = offsets(&mut p, 20);
        assert!(v.windows(2).all(|w| w[0] < w[1]), "out of order: {v:?}");
        assert!(v.iter().all(|&o| o < 2_000_000_000), "past the end: {v:?}");
        let spread: std::collections::HashSet<u64> =
            v.iter().enumerate().map(|(i, o)| (o - (i as u64 * 100_000_000)) / 1_000_000).collect();
        assert!(spread.len() > 5, "jitter drawn: {v:?}");
    }
    // A burst keeps its requests together, jittered as one.
    let mut p = Pacer::linear(rate(100.0), 3, Duration::from_millis(5), 0.0, 3);
    let v = offsets(&mut p, 6);
    assert!(v[0] == v[1] && v[1] == v[2] && v[3] == v[4] && v[4] == v[5], "{v:?}");
    assert!(v[2] < v[3], "{v:?}");
}

#[test]
fn planned_count_matches_rate_times_duration() {
    let p = Pacer::linear(rate(250.0), 1, Duration::ZERO, 0.0, 1);
    assert_eq!(p.planned_before(Duration::from_secs(2)), 500);
    let p = Pacer::linear(rate(0.5), 1, Duration::ZERO, 0.0, 1);
    assert_eq!(p.planned_before(Duration::from_secs(3)), 2);
}

#[test]
fn sub_one_rps_is_spaced_by_seconds() {
    let mut p = Pacer::linear(rate(0.25), 1, Duration::ZERO, 0.0, 1);
    assert_eq!(offsets(&mut p, 3), vec![0, 4_000_000_000, 8_000_000_000]);
}

/// Releases before `t` seconds, by walking the pacer (what the worker does).
fn released_before(plan: &RatePlan, t: f64) -> u64 {
    let mut p = Pacer::new(plan, 1, Duration::ZERO, 0.0, 1);
    let mut n = 0;
    while let Release::At(d) = p.next_release() {
        if d.as_secs_f64() >= t {
            break;
        }
        n += 1;
    }
    n
}

#[test]
fn stages_plan_exact_per_stage_counts() {
    let stages = RatePlan::parse_stages("10s:1000,30s:5000,10s:0").expect("stages");
    assert_eq!(RatePlan::stages_duration(&stages), Duration::from_secs(50));
    let plan = RatePlan::Stages(stages);
    // Ramps are linear: 0→1000 over 10 s plans 5000, 1000→5000 over 30 s plans 90000,
    // 5000→0 over 10 s plans 25000; nothing after the plan ends at 0.
    assert_eq!(released_before(&plan, 10.0), 5_000);
    assert_eq!(released_before(&plan, 40.0), 95_000);
    assert_eq!(released_before(&plan, 50.0), 120_000);
    assert_eq!(released_before(&plan, 1e6), 120_000);
    let p = Pacer::new(&plan, 1, Duration::ZERO, 0.0, 1);
    assert_eq!(p.planned_before(Duration::from_secs(10)), 5_000);
    assert_eq!(p.planned_before(Duration::from_secs(40)), 95_000);
}

#[test]
fn steps_and_holds() {
    // A zero-length stage is a step; a stage to the same rate is a hold.
    let plan = RatePlan::Stages(RatePlan::parse_stages("0s:100,2s:100,0s:300,1s:300").expect("s"));
    assert_eq!(released_before(&plan, 2.0), 200);
    assert_eq!(released_before(&plan, 3.0), 500);
    // The last rate holds after the plan.
    assert_eq!(released_before(&plan, 4.0), 800);
}

#[test]
fn ramp_is_quadratic_then_linear() {
    let plan = RatePlan::ramp(rate(100.0), Duration::from_secs(4));
    assert_eq!(released_before(&plan, 2.0), 50); // ∫0..2 25t dt
    assert_eq!(released_before(&plan, 4.0), 200);
    assert_eq!(released_before(&plan, 6.0), 400);
    // The release times are increasing and spaced ever closer during the ramp.
    let mut p = Pacer::new(&plan, 1, Duration::ZERO, 0.0, 1);
    let v = offsets(&mut p, 150);
    assert!(v.windows(2).all(|w| w[0] < w[1]));
    assert!(v[2] - v[1] > v[101] - v[100]);
}

#[test]
fn unpaced_releases_now() {
    let mut p = Pacer::new(&RatePlan::Unpaced, 1, Duration::ZERO, 0.0, 1);
    assert_eq!(p.next_release(), Release::Now);
    assert_eq!(p.planned_before(Duration::from_secs(1)), 0);
}

#[test]
fn stage_parsing_rejects_bad_input() {
    for bad in ["", "10s", "10s:x", "x:10", "10s:-1", "10s:0,5s:0", "10s:inf"] {
        assert!(RatePlan::parse_stages(bad).is_err(), "{bad:?}");
    }
    assert_eq!(
        RatePlan::parse_stages(" 500ms:2.5 , 1m:0.5").expect("ok"),
        vec![
            Stage { duration: Duration::from_millis(500), target: 2.5 },
            Stage { duration: Duration::from_secs(60), target: 0.5 },
        ]
    );
}

#[test]
fn rate_validation() {
    assert!(Rate::try_new(0.0).is_none());
    assert!(Rate::try_new(-1.0).is_none());
    assert!(Rate::try_new(f64::NAN).is_none());
    assert!(Rate::try_new(f64::INFINITY).is_none());
    assert!(Rate::try_new(0.25).is_some());
}

#[test]
fn a_rescale_keeps_the_past_and_changes_the_rest() {
    let mut p = Pacer::linear(rate(100.0), 1, Duration::ZERO, 0.0, 1);
    assert_eq!(offsets(&mut p, 3), vec![0, 10_000_000, 20_000_000]);
    // One of three generators lost: the others send 3/2 of their rate from here on.
    p.rescale(1.5);
    let next = offsets(&mut p, 3);
    let gaps: Vec<u64> = next.iter().map(|t| t - 20_000_000).collect();
    for (got, want) in gaps.iter().zip([6_666_667, 13_333_333, 20_000_000]) {
        assert!(got.abs_diff(want) <= 1, "{gaps:?}");
    }
}

#[test]
fn a_rescaled_ramp_plans_its_integral() {
    // 0 → 100/s over 10 s, rescaled ×2 at the release nearest 5 s: the count planned by 10 s
    // is the first half's 125 plus twice the second half's 375.
    let plan = RatePlan::Stages(vec![
        Stage { duration: Duration::from_secs(10), target: 100.0 },
        Stage { duration: Duration::MAX, target: 100.0 },
    ]);
    let mut p = Pacer::new(&plan, 1, Duration::ZERO, 0.0, 1);
    let before = p.planned_before(Duration::from_secs(5));
    while let Release::At(t) = p.next_release() {
        if t >= Duration::from_secs(5) {
            break;
        }
    }
    let from = Duration::from_nanos(p.last as u64);
    p.rescale(2.0);
    let at = |s: f64| count_at(&p.segments, s * 1e9);
    let want_at_from = count_at(&Pacer::new(&plan, 1, Duration::ZERO, 0.0, 1).segments, p.last);
    assert!((at(from.as_secs_f64()) - want_at_from).abs() < 1e-6);
    let want = want_at_from + 2.0 * (500.0 - want_at_from);
    assert!((at(10.0) - want).abs() < 1e-6, "{} against {want}", at(10.0));
    assert!((124..=125).contains(&before), "{before}");
    // And the rate after the ramp holds at twice 100/s.
    assert!((at(11.0) - at(10.0) - 200.0).abs() < 1e-6);
}

#[test]
fn a_counted_worker_scales_what_it_has_left() {
    assert_eq!(scaled_limit(100, 40, 1.5), 130);
    assert_eq!(scaled_limit(u64::MAX, 40, 1.5), u64::MAX);
    let h = RateHandle::new();
    let mut f = Follower::new(Some(h.clone()));
    assert_eq!(f.change(), None);
    assert!(h.scale(1.5) && h.scale(2.0) && !h.scale(f64::NAN) && !h.scale(0.0));
    assert_eq!(f.change(), Some(3.0));
    assert_eq!(f.change(), None);
}
