use super::*;
use agentgym_wire::TokenArrays;
use proptest::prelude::*;

fn config(group_size: usize, b: usize, s: u32) -> AdmissionConfig {
    AdmissionConfig {
        group_size,
        groups_per_step: b,
        max_staleness: s,
        max_in_flight: 100,
        max_ready: 100,
        filter_zero_variance: false,
    }
}

fn sample(reward: f32, version: u32, status: Status) -> Sample {
    Sample {
        tokens: TokenArrays {
            input_ids: vec![1, 2, 3],
            loss_mask: vec![0, 1, 1],
            logprobs: vec![0.0, -0.5, -0.1],
            versions: vec![version; 3],
            turn_spans: vec![1, 3],
        },
        reward,
        status,
        drift: false,
        turns: 1,
        turn_cap: 4,
        stage: 0,
        dispatch_version: version,
        request_id: String::new(),
        turn_rewards: Vec::new(),
        turn_keys: Vec::new(),
        episode: None,
    }
}

fn complete(buf: &mut TrajectoryBuffer, t: Ticket, rewards: &[f32]) -> AddOutcome {
    let mut last = AddOutcome::Pending { have: 0, want: 0 };
    for &r in rewards {
        last = buf
            .add_sample(t.group_id, sample(r, t.dispatch_version, Status::Done))
            .unwrap();
    }
    last
}

#[test]
fn an_episode_of_several_samples_counts_once() {
    let mut buf = TrajectoryBuffer::new(config(2, 1, 0)).unwrap();
    let t = buf.try_admit("babyai_1", "babyai").unwrap();
    let forked = vec![sample(1.0, 0, Status::Done), sample(1.0, 0, Status::Done)];
    assert_eq!(
        buf.add_episode(t.group_id, forked).unwrap(),
        AddOutcome::Pending { have: 1, want: 2 }
    );
    let outcome = buf.add_episode(t.group_id, vec![sample(0.0, 0, Status::Done)]);
    assert_eq!(outcome.unwrap(), AddOutcome::Ready);
    let group = buf.pop_ready().unwrap();
    assert_eq!(group.samples.len(), 3);
    assert_eq!(buf.counters().samples, 3);
    let places: Vec<_> = group.samples.iter().map(|s| s.episode).collect();
    assert_eq!(places, [Some(0), Some(0), Some(1)]);
}

#[test]
fn a_group_of_one_sample_per_episode_names_no_episode() {
    let mut buf = TrajectoryBuffer::new(config(2, 1, 0)).unwrap();
    let t = buf.try_admit("babyai_1", "babyai").unwrap();
    assert_eq!(complete(&mut buf, t, &[1.0, 0.0]), AddOutcome::Ready);
    let group = buf.pop_ready().unwrap();
    assert!(group.samples.iter().all(|s| s.episode.is_none()));
}

#[test]
fn staleness_budget_follows_the_formula() {
    // S = 1, B = 2: by version v at most (1 + v + 1) * 2 groups may have started.
    let mut buf = TrajectoryBuffer::new(config(2, 2, 1)).unwrap();
    assert_eq!(buf.capacity(), 4);
    let tickets: Vec<_> = (0..4)
        .map(|i| buf.try_admit(&format!("babyai_{i}"), "babyai").unwrap())
        .collect();
    assert_eq!(buf.capacity(), 0);
    assert!(buf.try_admit("babyai_9", "babyai").is_none());
    for t in &tickets {
        complete(&mut buf, *t, &[0.0, 1.0]);
    }
    // Completion does not free budget: accepted + running is still 4.
    assert_eq!(buf.capacity(), 0);
    buf.set_version(1).unwrap();
    assert_eq!(buf.capacity(), 2);
    let t = buf.try_admit("babyai_5", "babyai").unwrap();
    assert_eq!(t.dispatch_version, 1);
}

#[test]
fn a_buffer_joining_at_version_v_budgets_from_v() {
    // S = 1, B = 2, joining a run at version 15: the budget is that of version 0, not 15.
    let mut buf = TrajectoryBuffer::new(config(2, 2, 1))
        .unwrap()
        .starting_at(15, 1 << 40);
    assert_eq!(buf.version(), 15);
    assert_eq!(buf.capacity(), 4);
    let first = buf.try_admit("babyai_0", "babyai").unwrap();
    assert_eq!(first.group_id, 1 << 40);
    assert_eq!(first.dispatch_version, 15);
    for i in 1..4 {
        buf.try_admit(&format!("babyai_{i}"), "babyai").unwrap();
    }
    assert_eq!(buf.capacity(), 0);
    buf.set_version(16).unwrap();
    assert_eq!(buf.capacity(), 2);
    assert!(buf.set_version(14).is_err());
}

#[test]
fn in_flight_cap_limits_admission() {
    let mut cfg = config(1, 100, 4);
    cfg.max_in_flight = 3;
    let mut buf = TrajectoryBuffer::new(cfg).unwrap();
    let t: Vec<_> = std::iter::from_fn(|| buf.try_admit("t_1", "t"))
        .take(10)
        .collect();
    assert_eq!(t.len(), 3);
    complete(&mut buf, t[0], &[1.0]);
    assert_eq!(buf.capacity(), 1);
}

#[test]
fn a_changed_in_flight_cap_holds_from_the_next_admission() {
    let mut cfg = config(1, 100, 4);
    cfg.max_in_flight = 2;
    let mut buf = TrajectoryBuffer::new(cfg).unwrap();
    let t: Vec<_> = std::iter::from_fn(|| buf.try_admit("t_1", "t"))
        .take(10)
        .collect();
    assert_eq!(t.len(), 2);
    buf.set_max_in_flight(5).unwrap();
    assert_eq!(buf.capacity(), 3);
    // lowered below the running count: they finish, none starts until below the new cap
    buf.set_max_in_flight(1).unwrap();
    assert_eq!(buf.capacity(), 0);
    complete(&mut buf, t[0], &[1.0]);
    assert_eq!(buf.capacity(), 0);
    complete(&mut buf, t[1], &[1.0]);
    assert_eq!(buf.capacity(), 1);
    assert!(matches!(
        buf.set_max_in_flight(0),
        Err(BufferError::InvalidConfig {
            field: "max_in_flight",
            ..
        })
    ));
    assert_eq!(buf.config().max_in_flight, 1);
}

#[test]
fn groups_release_only_when_complete() {
    let mut buf = TrajectoryBuffer::new(config(3, 1, 4)).unwrap();
    let t = buf.try_admit("babyai_7", "babyai").unwrap();
    let out = buf
        .add_sample(t.group_id, sample(1.0, 0, Status::Done))
        .unwrap();
    assert_eq!(out, AddOutcome::Pending { have: 1, want: 3 });
    assert!(buf.pop_ready().is_none());
    buf.add_sample(t.group_id, sample(0.0, 0, Status::TurnCap))
        .unwrap();
    let out = buf
        .add_sample(t.group_id, sample(0.5, 0, Status::Done))
        .unwrap();
    assert_eq!(out, AddOutcome::Ready);
    let g = buf.pop_ready().unwrap();
    assert_eq!(g.task_id, "babyai_7");
    assert_eq!(g.samples.len(), 3);
    assert_eq!(buf.counters().released, 1);
    // The group is closed: more samples are an error, not a silent new group.
    assert_eq!(
        buf.add_sample(t.group_id, sample(1.0, 0, Status::Done)),
        Err(BufferError::UnknownGroup(t.group_id))
    );
}

#[test]
fn stale_groups_are_not_released_and_free_their_budget() {
    let mut buf = TrajectoryBuffer::new(config(1, 1, 1)).unwrap();
    let old = buf.try_admit("a_1", "a").unwrap();
    complete(&mut buf, old, &[1.0]);
    buf.set_version(2).unwrap(); // oldest token (v0) is 2 versions behind, S = 1
    let fresh = buf.try_admit("a_2", "a").unwrap();
    complete(&mut buf, fresh, &[1.0]);
    let g = buf.pop_ready().unwrap();
    assert_eq!(g.task_id, "a_2");
    let c = buf.counters();
    assert_eq!((c.stale, c.released, c.accepted), (1, 1, 1));
}

#[test]
fn zero_variance_groups_are_filtered_and_counted() {
    let mut cfg = config(4, 1, 4);
    cfg.filter_zero_variance = true;
    let mut buf = TrajectoryBuffer::new(cfg).unwrap();
    let t = buf.try_admit("x_1", "x").unwrap();
    assert_eq!(complete(&mut buf, t, &[1.0; 4]), AddOutcome::Filtered);
    let t = buf.try_admit("x_2", "x").unwrap();
    assert_eq!(
        complete(&mut buf, t, &[1.0, 1.0, 0.0, 1.0]),
        AddOutcome::Ready
    );
    assert_eq!(buf.counters().filtered, 1);
    assert_eq!(buf.pop_ready().unwrap().task_id, "x_2");
}

#[test]
fn memory_bound_applies_backpressure() {
    let mut cfg = config(1, 1000, 1000);
    cfg.max_ready = 2;
    let mut buf = TrajectoryBuffer::new(cfg).unwrap();
    for i in 0..2 {
        let t = buf.try_admit(&format!("x_{i}"), "x").unwrap();
        complete(&mut buf, t, &[1.0]);
    }
    assert!(
        buf.try_admit("x_3", "x").is_none(),
        "ready queue full: no admission"
    );
    buf.pop_ready().unwrap();
    assert!(buf.try_admit("x_3", "x").is_some());
}

#[test]
fn requeue_keeps_accounting_and_order() {
    let mut buf = TrajectoryBuffer::new(config(1, 10, 4)).unwrap();
    for i in 0..2 {
        let t = buf.try_admit(&format!("x_{i}"), "x").unwrap();
        complete(&mut buf, t, &[1.0]);
    }
    let g = buf.pop_ready().unwrap();
    buf.requeue_front(g);
    assert_eq!(buf.counters().released, 0);
    assert_eq!(buf.pop_ready().unwrap().task_id, "x_0");
}

#[test]
fn env_failures_and_aborts_are_counted() {
    let mut buf = TrajectoryBuffer::new(config(2, 1, 4)).unwrap();
    let t = buf.try_admit("x_1", "x").unwrap();
    buf.add_sample(t.group_id, sample(0.0, 0, Status::EnvFailure))
        .unwrap();
    assert_eq!(buf.abort_group(t.group_id), Ok(1));
    let c = buf.counters();
    assert_eq!((c.env_failures, c.aborted, c.running), (1, 1, 0));
    assert_eq!(
        buf.abort_group(t.group_id),
        Err(BufferError::UnknownGroup(t.group_id))
    );
}

#[test]
fn bad_config_and_version_regression_are_errors() {
    let mut cfg = config(0, 1, 1);
    assert!(matches!(
        TrajectoryBuffer::new(cfg.clone()),
        Err(BufferError::InvalidConfig {
            field: "group_size",
            ..
        })
    ));
    cfg.group_size = 1;
    let mut buf = TrajectoryBuffer::new(cfg).unwrap();
    buf.set_version(3).unwrap();
    assert_eq!(
        buf.set_version(2),
        Err(BufferError::VersionRegression {
            current: 3,
            requested: 2
        })
    );
}

#[derive(Debug, Clone)]
enum Op {
    Admit,
    Add(usize, u8),
    Abort(usize),
    Pop,
    Bump,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Admit),
        6 => (any::<usize>(), 0u8..3).prop_map(|(i, r)| Op::Add(i, r)),
        1 => any::<usize>().prop_map(Op::Abort),
        3 => Just(Op::Pop),
        1 => Just(Op::Bump),
    ]
}

proptest! {
    /// Whatever the sequence of events, every admitted group is accounted for exactly once and
    /// the memory and in-flight bounds hold.
    #[test]
    fn conservation_and_bounds(ops in proptest::collection::vec(op(), 1..300), filter in any::<bool>()) {
        let cfg = AdmissionConfig {
            group_size: 2, groups_per_step: 3, max_staleness: 1,
            max_in_flight: 5, max_ready: 7, filter_zero_variance: filter,
        };
        let mut buf = TrajectoryBuffer::new(cfg).unwrap();
        let mut live: Vec<Ticket> = Vec::new();
        for op in ops {
            match op {
                Op::Admit => { if let Some(t) = buf.try_admit("t_1", "t") { live.push(t); } }
                Op::Add(i, r) if !live.is_empty() => {
                    let t = live[i % live.len()];
                    let out = buf.add_sample(t.group_id, sample(f32::from(r), t.dispatch_version, Status::Done)).unwrap();
                    if !matches!(out, AddOutcome::Pending { .. }) { live.retain(|x| x.group_id != t.group_id); }
                }
                Op::Abort(i) if !live.is_empty() => {
                    let t = live.remove(i % live.len());
                    buf.abort_group(t.group_id).unwrap();
                }
                Op::Pop => { buf.pop_ready(); }
                Op::Bump => { let v = buf.version() + 1; buf.set_version(v).unwrap(); }
                _ => {}
            }
            let c = buf.counters().clone();
            prop_assert_eq!(c.admitted, c.running + c.ready + c.released + c.filtered + c.stale + c.aborted);
            prop_assert_eq!(c.accepted, c.ready + c.released);
            prop_assert!(c.ready + c.running <= 7);
            prop_assert!(c.running <= 5);
            prop_assert_eq!(c.running, live.len());
        }
    }
}
