//! Encode/decode throughput of a realistic group (8 samples x 8k tokens).
//!
//! `cargo bench -p agentgym-wire --bench codec -- --quick --noplot`
use std::hint::black_box;

use agentgym_wire::{decode_group, encode_group, Group, Sample, Status, TokenArrays};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn group(n_samples: u32, n_tokens: u32) -> Group {
    let samples = (0..n_samples)
        .map(|i| Sample {
            tokens: TokenArrays {
                input_ids: (0..n_tokens).map(|t| (t * 31 + i) % 151_936).collect(),
                loss_mask: (0..n_tokens).map(|t| u8::from(t % 3 == 0)).collect(),
                logprobs: (0..n_tokens).map(|t| -(t as f32) / 1e4).collect(),
                versions: vec![i; n_tokens as usize],
                turn_spans: vec![0, n_tokens / 2, n_tokens / 2, n_tokens],
            },
            reward: 1.0,
            status: Status::Done,
            drift: false,
            turns: 2,
            turn_cap: 8,
            stage: 1,
            dispatch_version: 5,
            request_id: format!("g1-e{i}"),
            turn_rewards: Vec::new(),
            turn_keys: Vec::new(),
            episode: None,
        })
        .collect();
    Group {
        group_id: 1,
        task_id: "babyai_1".into(),
        env: "babyai".into(),
        samples,
    }
}

fn bench(c: &mut Criterion) {
    for (n_samples, n_tokens) in [(8u32, 8192u32), (8, 512)] {
        let g = group(n_samples, n_tokens);
        let Ok(bytes) = encode_group(&g) else { return };
        let mut grp = c.benchmark_group(format!("codec/{n_samples}x{n_tokens}"));
        grp.throughput(Throughput::Bytes(bytes.len() as u64));
        grp.bench_function("encode", |b| b.iter(|| encode_group(black_box(&g))));
        grp.bench_function("decode", |b| b.iter(|| decode_group(black_box(&bytes))));
        grp.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
