//! Groups shared by the wire tests (golden fixtures, round trips).
#![allow(dead_code)]
use agentgym_wire::{Group, Sample, Status, TokenArrays};

/// A sample of `n` tokens whose generated turns are the spans given.
pub fn sample(n: u32, spans: &[(u32, u32)], status: Status, seed: u32) -> Sample {
    let mut loss_mask = vec![0u8; n as usize];
    let mut logprobs = vec![0f32; n as usize];
    let mut versions = vec![0u32; n as usize];
    for (turn, &(s, e)) in spans.iter().enumerate() {
        for i in s..e {
            loss_mask[i as usize] = 1;
            // Exactly representable values so that JSON comparisons are exact.
            logprobs[i as usize] = -((i % 8) as f32) * 0.25 - 0.125;
            versions[i as usize] = seed + turn as u32;
        }
    }
    Sample {
        tokens: TokenArrays {
            input_ids: (0..n).map(|i| (i * 7919 + seed) % 151_936).collect(),
            loss_mask,
            logprobs,
            versions,
            turn_spans: spans.iter().flat_map(|&(s, e)| [s, e]).collect(),
        },
        reward: if status == Status::Done { 1.0 } else { 0.0 },
        status,
        drift: false,
        turns: spans.len() as u32,
        turn_cap: 4,
        stage: 1,
        dispatch_version: seed,
        request_id: String::new(),
        turn_rewards: Vec::new(),
        turn_keys: Vec::new(),
        episode: None,
    }
}

/// The golden fixtures: (file stem, group).
pub fn fixtures() -> Vec<(&'static str, Group)> {
    let mut drifted = sample(12, &[(4, 6), (9, 12)], Status::Truncated, 3);
    drifted.drift = true;
    drifted.reward = -0.5;
    let small = Group {
        group_id: 42,
        task_id: "babyai_17".into(),
        env: "babyai".into(),
        samples: vec![sample(10, &[(3, 5), (7, 10)], Status::Done, 2), drifted],
    };
    let statuses = Group {
        group_id: u64::from(u32::MAX) + 5,
        task_id: "sciworld_3".into(),
        env: "sciworld".into(),
        samples: Status::ALL
            .iter()
            .enumerate()
            .map(|(i, &st)| sample(6 + i as u32, &[(2, 4)], st, 100 + i as u32))
            .collect(),
    };
    let empty = Group {
        group_id: 0,
        task_id: "webshop_0".into(),
        env: "webshop".into(),
        samples: vec![sample(0, &[], Status::EnvFailure, 0)],
    };
    let mut named = small.clone();
    for (i, s) in named.samples.iter_mut().enumerate() {
        s.request_id = format!("g42-e{i}");
    }
    // schema version 2: per-turn rewards (summing to the reward) and state keys; two samples
    // whose first turns start from the same state
    let mut credited = named.clone();
    credited.samples[0].turn_rewards = vec![0.25, 0.75];
    credited.samples[0].turn_keys = vec![0xdead_beef, 7];
    credited.samples[1].turn_rewards = vec![0.0, -0.5];
    credited.samples[1].turn_keys = vec![0xdead_beef, 11];
    // schema version 3: the first episode trained as two samples (step-wise context), the
    // second as one; each sample names its episode's place in the group
    let mut stepwise = credited.clone();
    let mut second_step = stepwise.samples[0].clone();
    second_step.request_id = "g42-e0/s1".into();
    stepwise.samples.insert(1, second_step);
    for (s, e) in stepwise.samples.iter_mut().zip([0, 0, 1]) {
        s.episode = Some(e);
    }
    vec![
        ("group_small", small),
        ("group_all_statuses", statuses),
        ("group_empty_sample", empty),
        ("group_named", named),
        ("group_turn_credit", credited),
        ("group_step_context", stepwise),
    ]
}

/// A realistic large group: `n_samples` samples of `n_tokens` tokens, 4 turns each.
pub fn large_group(n_samples: u32, n_tokens: u32) -> Group {
    let q = n_tokens / 8;
    let spans: Vec<(u32, u32)> = (0..4).map(|t| (q * (2 * t + 1), q * (2 * t + 2))).collect();
    Group {
        group_id: 7,
        task_id: "babyai_1".into(),
        env: "babyai".into(),
        samples: (0..n_samples)
            .map(|i| sample(n_tokens, &spans, Status::Done, i))
            .collect(),
    }
}
