//! Rust sender <-> Rust receiver over real sockets (tcp loopback and ipc).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns
use std::collections::HashSet;
use std::time::{Duration, Instant};

use agentgym_transport::{
    GroupReceiver, GroupSender, ReceiverOptions, SenderOptions, TransportError, DEFAULT_BIND,
};
use bytes::Bytes;

const WAIT: Duration = Duration::from_secs(10);

fn fast_options(id: &str) -> SenderOptions {
    SenderOptions {
        sender_id: Some(id.into()),
        heartbeat_interval: Duration::from_millis(50),
        peer_timeout: Duration::from_millis(500),
        handshake_timeout: Duration::from_millis(500),
        max_reconnect_interval: Duration::from_millis(100),
        secret: None,
    }
}

fn receiver(endpoint: &str, window: u32) -> GroupReceiver {
    GroupReceiver::bind(
        endpoint,
        ReceiverOptions {
            window,
            secret: None,
        },
    )
    .unwrap()
}

fn payload(tag: &str, i: u64) -> Bytes {
    Bytes::from(format!("{tag}:{i}:").repeat(1 + (i as usize % 7)))
}

/// Poll a condition with a deadline (the condition is the synchronisation, not the pause).
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn ipc_endpoint(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("agentgym-{}-{name}", std::process::id()));
    format!("ipc://{}", dir.display())
}

fn stream_in_order(endpoint: &str) {
    let rx = receiver(endpoint, 4);
    let tx = GroupSender::connect(rx.endpoint(), fast_options("a")).unwrap();
    let n = 50;
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..n {
                assert_eq!(tx.send(&payload("a", i), WAIT).unwrap(), i);
            }
        });
        for i in 0..n {
            let d = rx.recv(WAIT).unwrap().expect("a group");
            assert_eq!((d.sender_id.as_str(), d.seq), ("a", i));
            assert_eq!(d.payload, payload("a", i));
        }
    });
    tx.flush(WAIT).unwrap();
    let st = tx.stats();
    assert_eq!((st.sent, st.acked, st.unacked()), (n, n, 0));
    assert_eq!(rx.stats().duplicates, 0);
    tx.close();
    rx.close();
}

#[test]
fn rust_to_rust_over_tcp() {
    stream_in_order(DEFAULT_BIND);
}

#[test]
fn rust_to_rust_over_ipc() {
    stream_in_order(&ipc_endpoint("order"));
}

#[test]
fn send_times_out_without_credit_and_nothing_is_queued() {
    let rx = receiver(DEFAULT_BIND, 2);
    let tx = GroupSender::connect(rx.endpoint(), fast_options("t")).unwrap();
    tx.wait_connected(WAIT).unwrap();
    tx.send(&payload("t", 0), WAIT).unwrap();
    tx.send(&payload("t", 1), WAIT).unwrap();
    let err = tx
        .send(&payload("t", 2), Duration::from_millis(100))
        .unwrap_err();
    assert!(matches!(err, TransportError::Timeout { .. }), "{err:?}");
    assert_eq!(tx.stats().sent, 2);
    // Consuming returns credit; the same group then goes through.
    assert_eq!(rx.recv(WAIT).unwrap().unwrap().seq, 0);
    assert_eq!(tx.send(&payload("t", 2), WAIT).unwrap(), 2);
}

#[test]
fn flush_while_linked_waits_while_the_receiver_is_up_and_ends_once_it_is_gone() {
    let rx = receiver(DEFAULT_BIND, 4);
    let tx = GroupSender::connect(rx.endpoint(), fast_options("f")).unwrap();
    tx.wait_connected(WAIT).unwrap();
    tx.send(&payload("f", 0), WAIT).unwrap();
    // Up but not consuming: a timeout after the whole wait, as `flush`.
    let short = Duration::from_millis(300);
    let err = tx.flush_while_linked(short).unwrap_err();
    assert!(matches!(err, TransportError::Timeout { .. }), "{err:?}");
    // Gone with the group untaken: the link drops after the peer timeout (500 ms), and the
    // flush ends then rather than after its 10 s.
    rx.close();
    let t0 = Instant::now();
    let err = tx.flush_while_linked(WAIT).unwrap_err();
    assert!(
        matches!(err, TransportError::LinkDown { unacked: 1 }),
        "{err:?}"
    );
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    // `flush` itself waits for a reconnection.
    let err = tx.flush(short).unwrap_err();
    assert!(matches!(err, TransportError::Timeout { .. }), "{err:?}");
}

#[test]
fn send_times_out_when_no_receiver_listens() {
    let tx = GroupSender::connect("tcp://127.0.0.1:1", fast_options("n")).unwrap();
    let err = tx
        .send(&payload("n", 0), Duration::from_millis(200))
        .unwrap_err();
    assert!(matches!(err, TransportError::Timeout { .. }), "{err:?}");
    tx.close();
    let err = tx.send(&payload("n", 0), WAIT).unwrap_err();
    assert!(matches!(err, TransportError::Closed), "{err:?}");
}

#[test]
fn invalid_endpoints_are_typed_errors() {
    for bad in ["tcp://*:5555", "ipc://*", "udp://x", "127.0.0.1:5"] {
        let err = GroupReceiver::bind(bad, ReceiverOptions::default()).unwrap_err();
        assert!(
            matches!(err, TransportError::InvalidEndpoint { .. }),
            "{bad}: {err:?}"
        );
    }
    let rx = receiver(DEFAULT_BIND, 1);
    let err = GroupReceiver::bind(rx.endpoint(), ReceiverOptions::default()).unwrap_err();
    assert!(matches!(err, TransportError::Socket { .. }), "{err:?}");
}

fn receiver_restart(endpoint: &str) {
    let rx1 = receiver(endpoint, 4);
    let endpoint = rx1.endpoint().to_owned();
    let tx = GroupSender::connect(&endpoint, fast_options("r")).unwrap();
    let n = 30;
    let mut seen = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..n {
                assert_eq!(tx.send(&payload("r", i), WAIT).unwrap(), i);
            }
        });
        for _ in 0..5 {
            seen.push(rx1.recv(WAIT).unwrap().unwrap().seq);
        }
        // Close only once the sender knows what was consumed, so nothing is delivered twice.
        wait_until("acks of the first five", || tx.stats().acked == 5);
        rx1.close();
        drop(rx1);
        let rx2 = receiver(&endpoint, 4);
        while seen.len() < n as usize {
            let d = rx2.recv(WAIT).unwrap().expect("resent group");
            assert_eq!(d.payload, payload("r", d.seq));
            seen.push(d.seq);
        }
        tx.flush(WAIT).unwrap();
        assert!(tx.stats().handshakes >= 2);
        assert!(rx2.recv(Duration::from_millis(50)).unwrap().is_none());
    });
    assert_eq!(seen, (0..n).collect::<Vec<_>>());
}

#[test]
fn receiver_restart_mid_stream_loses_and_duplicates_nothing_tcp() {
    // A fixed port so that the new receiver binds the same address.
    let probe = receiver(DEFAULT_BIND, 1);
    let endpoint = probe.endpoint().to_owned();
    probe.close();
    drop(probe);
    receiver_restart(&endpoint);
}

#[test]
fn receiver_restart_mid_stream_loses_and_duplicates_nothing_ipc() {
    receiver_restart(&ipc_endpoint("restart"));
}

#[test]
fn restarted_sender_resets_its_state_at_the_receiver() {
    let rx = receiver(DEFAULT_BIND, 8);
    let tx1 = GroupSender::connect(rx.endpoint(), fast_options("s")).unwrap();
    for i in 0..3 {
        tx1.send(&payload("old", i), WAIT).unwrap();
    }
    for i in 0..3 {
        assert_eq!(rx.recv(WAIT).unwrap().unwrap().seq, i);
    }
    tx1.flush(WAIT).unwrap();
    tx1.close();
    // Same id, new process-like instance: seq restarts at 0 and must not be taken as duplicates.
    let tx2 = GroupSender::connect(rx.endpoint(), fast_options("s")).unwrap();
    for i in 0..3 {
        assert_eq!(tx2.send(&payload("new", i), WAIT).unwrap(), i);
    }
    for i in 0..3 {
        let d = rx.recv(WAIT).unwrap().unwrap();
        assert_eq!((d.seq, d.payload), (i, payload("new", i)));
    }
    tx2.flush(WAIT).unwrap();
    assert_eq!(rx.stats().duplicates, 0);
    assert_eq!(rx.stats().senders, 1);
}

#[test]
fn many_senders_one_receiver() {
    let rx = receiver(DEFAULT_BIND, 3);
    let senders: Vec<GroupSender> = (0..4)
        .map(|k| GroupSender::connect(rx.endpoint(), fast_options(&format!("m{k}"))).unwrap())
        .collect();
    let per = 25u64;
    let mut got = HashSet::new();
    std::thread::scope(|s| {
        for (k, tx) in senders.iter().enumerate() {
            s.spawn(move || {
                for i in 0..per {
                    tx.send(&payload(&format!("m{k}"), i), WAIT).unwrap();
                }
            });
        }
        for _ in 0..4 * per {
            let d = rx.recv(WAIT).unwrap().unwrap();
            assert!(got.insert((d.sender_id, d.seq)));
        }
    });
    assert_eq!(got.len(), 100);
    for tx in &senders {
        tx.flush(WAIT).unwrap();
    }
}
