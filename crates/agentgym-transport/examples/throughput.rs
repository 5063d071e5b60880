//! Rust-only stream throughput over tcp loopback (no Python in the loop).
//!
//! `cargo run --release -p agentgym-transport --example throughput -- [groups] [bytes] [window]`
//! (set `AGENTGYM_RL_SECRET` to any 16+ characters to sign every message).
#![allow(clippy::print_stdout)]
use std::time::{Duration, Instant};

use agentgym_transport::{
    Bytes, GroupReceiver, GroupSender, ReceiverOptions, Result, Secret, SenderOptions, DEFAULT_BIND,
};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().ok());
    let n = args.next().flatten().unwrap_or(2000);
    let size = args.next().flatten().unwrap_or(850_000);
    let window = args.next().flatten().unwrap_or(16) as u32;
    let secret = match std::env::var("AGENTGYM_RL_SECRET") {
        Ok(s) => Some(Secret::new(s.as_bytes())?),
        Err(_) => None,
    };
    let rx = GroupReceiver::bind(
        DEFAULT_BIND,
        ReceiverOptions {
            window,
            secret: secret.clone(),
        },
    )?;
    let tx = GroupSender::connect(
        rx.endpoint(),
        SenderOptions {
            secret,
            ..SenderOptions::default()
        },
    )?;
    let payload = Bytes::from(vec![7u8; size]);
    let wait = Duration::from_secs(30);
    tx.wait_connected(wait)?;
    let start = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        s.spawn(|| (0..n).try_for_each(|_| tx.send(&payload, wait).map(|_| ())));
        for _ in 0..n {
            rx.recv(wait)?;
        }
        Ok(())
    })?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{n} groups of {size} B in {secs:.2}s: {:.0} groups/s, {:.0} MB/s",
        n as f64 / secs,
        (n * size) as f64 / secs / 1e6
    );
    Ok(())
}
