//! Where the group stream's time goes, without Python: the same group-sized messages over tcp
//! loopback through (1) a bare zeromq-rs DEALER -> ROUTER, the library floor under our stream,
//! (2) our `GroupSender` -> `GroupReceiver` (credit, acks, de-duplication, two thread hand-offs)
//! and (3) the same signed. `benches/bench_transport.py` sets these beside raw pyzmq (libzmq)
//! and the stream seen from Python.
//!
//! `cargo bench -p agentgym-transport --bench stream -- --noplot`
use std::time::Duration;

use agentgym_transport::{
    Bytes, GroupReceiver, GroupSender, ReceiverOptions, Secret, SenderOptions,
};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use zeromq::{DealerSocket, RouterSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

/// An encoded group of 8 samples x 8k tokens is ~0.85 MB (`benches/bench_codec.py`).
const GROUP_BYTES: usize = 850_000;
/// Messages a measured iteration moves: enough to fill the credit window several times over.
const BATCH: usize = 64;
const TIMEOUT: Duration = Duration::from_secs(30);
const SECRET: &[u8] = b"bench-secret-0123456789abcdef0123";

fn payload() -> Bytes {
    Bytes::from(
        (0..GROUP_BYTES)
            .map(|i| (i * 31 % 251) as u8)
            .collect::<Vec<u8>>(),
    )
}

/// A connected DEALER/ROUTER pair on a runtime of the transport's own size (4 workers).
struct Bare {
    rt: tokio::runtime::Runtime,
    dealer: Option<DealerSocket>,
    router: Option<RouterSocket>,
}

impl Bare {
    fn new() -> Option<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .ok()?;
        let (dealer, router) = rt.block_on(async {
            let mut router = RouterSocket::new();
            let endpoint = router.bind("tcp://127.0.0.1:0").await.ok()?;
            let mut dealer = DealerSocket::new();
            dealer.connect(&endpoint.to_string()).await.ok()?;
            // a DEALER refuses sends until the ROUTER has taken its peer in: ping until one
            // arrives, so that no measured message is refused
            for _ in 0..100 {
                if dealer.send(ZmqMessage::from("ping")).await.is_ok() {
                    let arrived = tokio::time::timeout(Duration::from_millis(100), router.recv());
                    if matches!(arrived.await, Ok(Ok(_))) {
                        return Some((dealer, router));
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            None
        })?;
        Some(Bare {
            rt,
            dealer: Some(dealer),
            router: Some(router),
        })
    }

    /// The sender and the receiver each on a task of their own, as our stream's are.
    fn move_batch(&mut self, group: &Bytes) {
        let (Some(mut dealer), Some(mut router)) = (self.dealer.take(), self.router.take()) else {
            return;
        };
        let group = group.clone();
        let sending = self.rt.spawn(async move {
            for _ in 0..BATCH {
                if dealer.send(ZmqMessage::from(group.clone())).await.is_err() {
                    break;
                }
            }
            dealer
        });
        let receiving = self.rt.spawn(async move {
            for _ in 0..BATCH {
                if router.recv().await.is_err() {
                    break;
                }
            }
            router
        });
        self.router = self.rt.block_on(receiving).ok();
        self.dealer = self.rt.block_on(sending).ok();
    }
}

/// Our stream: a sending thread against this one receiving, as the Python bench runs it.
fn stream_batch(tx: &GroupSender, rx: &GroupReceiver, group: &Bytes) {
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..BATCH {
                if tx.send(group, TIMEOUT).is_err() {
                    break;
                }
            }
        });
        for _ in 0..BATCH {
            if !matches!(rx.recv(TIMEOUT), Ok(Some(_))) {
                break;
            }
        }
    });
}

fn stream_pair(secret: Option<Secret>) -> Option<(GroupSender, GroupReceiver)> {
    let options = ReceiverOptions {
        window: 16,
        secret: secret.clone(),
    };
    let rx = GroupReceiver::bind("tcp://127.0.0.1:0", options).ok()?;
    let sender = SenderOptions {
        secret,
        ..SenderOptions::default()
    };
    let tx = GroupSender::connect(rx.endpoint(), sender).ok()?;
    tx.wait_connected(TIMEOUT).ok()?;
    Some((tx, rx))
}

fn bench(c: &mut Criterion) {
    let group = payload();
    let mut grp = c.benchmark_group(format!("stream/{BATCH}x{GROUP_BYTES}B"));
    grp.throughput(Throughput::Bytes((BATCH * GROUP_BYTES) as u64));
    grp.sample_size(10);
    if let Some(mut bare) = Bare::new() {
        grp.bench_function("bare zeromq-rs", |b| b.iter(|| bare.move_batch(&group)));
    }
    if let Some((tx, rx)) = stream_pair(None) {
        grp.bench_function("group stream", |b| {
            b.iter(|| stream_batch(&tx, &rx, &group))
        });
    }
    let secret = Secret::new(SECRET).ok();
    if let Some((tx, rx)) = stream_pair(secret) {
        grp.bench_function("group stream, signed", |b| {
            b.iter(|| stream_batch(&tx, &rx, &group))
        });
    }
    grp.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
