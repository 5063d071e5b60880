//! Bench-style fuzz run of the decoder: mutated valid messages and random bytes.
//!
//! `cargo run --release -p agentgym-wire --example fuzz_decode -- 1000000 [seed]`
//!
//! Exits non-zero if any input panics the decoder, or if an input that decodes fails to
//! re-encode. A panic is caught and the offending input is written to `fuzz-crash-<n>.bin`.
#![allow(clippy::print_stdout)]
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use agentgym_wire::{decode_group, encode_group, Group, Sample, Status, TokenArrays};

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn seed_group(rng: &mut Rng) -> Group {
    let samples = (0..1 + rng.below(4))
        .map(|i| {
            let n = rng.below(40) as u32;
            let spans = if n >= 2 { vec![n / 2, n] } else { vec![] };
            Sample {
                tokens: TokenArrays {
                    input_ids: (0..n).collect(),
                    loss_mask: (0..n).map(|i| u8::from(i >= n / 2)).collect(),
                    logprobs: (0..n).map(|i| -(i as f32) / 10.0).collect(),
                    versions: vec![i as u32; n as usize],
                    turn_spans: spans,
                },
                reward: 0.5,
                status: Status::ALL[rng.below(5)],
                drift: rng.below(2) == 1,
                turns: 1,
                turn_cap: 4,
                stage: 0,
                dispatch_version: 3,
                request_id: String::from("g0-e0"),
                turn_rewards: Vec::new(),
                turn_keys: Vec::new(),
                episode: None,
            }
        })
        .collect();
    Group {
        group_id: rng.next(),
        task_id: "babyai_1".into(),
        env: "babyai".into(),
        samples,
    }
}

fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut b = base.to_vec();
    match rng.below(6) {
        // Random bytes, random length.
        0 => (0..rng.below(256)).map(|_| rng.next() as u8).collect(),
        // Truncate.
        1 => {
            b.truncate(rng.below(b.len() + 1));
            b
        }
        // Insert or delete a run of bytes.
        2 => {
            let at = rng.below(b.len() + 1);
            if rng.below(2) == 0 {
                let run: Vec<u8> = (0..1 + rng.below(8)).map(|_| rng.next() as u8).collect();
                b.splice(at..at, run);
            } else {
                let end = (at + 1 + rng.below(8)).min(b.len());
                b.drain(at.min(end)..end);
            }
            b
        }
        // Interesting bytes (markers, length extremes).
        3 => {
            const MARKERS: [u8; 12] = [
                0xc0, 0xc1, 0xc4, 0xc6, 0xca, 0xcb, 0xcf, 0xd3, 0xdb, 0xdd, 0xdf, 0xff,
            ];
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(b.len());
                if let Some(x) = b.get_mut(at) {
                    *x = MARKERS[rng.below(MARKERS.len())];
                }
            }
            b
        }
        // Bit flips.
        _ => {
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(b.len());
                if let Some(x) = b.get_mut(at) {
                    *x ^= 1 << rng.below(8);
                }
            }
            b
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let iterations: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let seed: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(0x9e37_79b9);
    let mut rng = Rng(seed | 1);
    let corpus: Vec<Vec<u8>> = (0..32)
        .filter_map(|_| encode_group(&seed_group(&mut rng)).ok())
        .collect();
    // Silence the default hook: panics are counted and reported here.
    std::panic::set_hook(Box::new(|_| {}));
    let (mut ok, mut err, mut panics) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    for i in 0..iterations {
        let pick = rng.below(corpus.len());
        let input = mutate(&mut rng, &corpus[pick]);
        let outcome = catch_unwind(AssertUnwindSafe(|| match decode_group(&input) {
            Ok(g) => encode_group(&g).is_ok(),
            Err(_) => false,
        }));
        match outcome {
            Ok(true) => ok += 1,
            Ok(false) => err += 1,
            Err(_) => {
                panics += 1;
                let _ = std::fs::write(format!("fuzz-crash-{i}.bin"), &input);
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "fuzz_decode: {iterations} inputs in {secs:.1}s ({:.0}/s): {ok} decoded, {err} rejected \
         with a typed error, {panics} panics",
        iterations as f64 / secs
    );
    if panics > 0 {
        std::process::exit(1);
    }
}
