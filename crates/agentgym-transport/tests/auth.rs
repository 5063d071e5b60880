//! Signed streams over real sockets: matching secrets stream, anything else is refused,
//! counted and reported with the peer's address, in both directions.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns
use std::time::{Duration, Instant};

use agentgym_transport::{
    AuthFailure, Bytes, GroupReceiver, GroupSender, ReceiverOptions, Secret, SenderOptions,
    TransportError,
};
use zeromq::{DealerSocket, RouterSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

const WAIT: Duration = Duration::from_secs(10);

fn secret(byte: u8) -> Secret {
    Secret::new(&[byte; 32]).unwrap()
}

fn sender(endpoint: &str, secret: Option<Secret>) -> GroupSender {
    let options = SenderOptions {
        sender_id: Some("s".into()),
        heartbeat_interval: Duration::from_millis(50),
        peer_timeout: Duration::from_millis(500),
        handshake_timeout: Duration::from_millis(500),
        max_reconnect_interval: Duration::from_millis(100),
        secret,
    };
    GroupSender::connect(endpoint, options).unwrap()
}

fn receiver(secret: Option<Secret>) -> GroupReceiver {
    let options = ReceiverOptions { window: 4, secret };
    GroupReceiver::bind("tcp://127.0.0.1:0", options).unwrap()
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A runtime for the hand-made peers: multi-threaded, because zeromq's sockets hand reads and
/// writes to tasks of their own, which must go on running between the test's `block_on` calls.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn the_same_secret_streams_every_group() {
    let rx = receiver(Some(secret(1)));
    let tx = sender(rx.endpoint(), Some(secret(1)));
    for i in 0..20u64 {
        assert_eq!(tx.send(&Bytes::from(vec![i as u8; 100]), WAIT).unwrap(), i);
        let d = rx.recv(WAIT).unwrap().expect("a group");
        assert_eq!(d.payload, Bytes::from(vec![i as u8; 100]));
    }
    tx.flush(WAIT).unwrap();
    assert_eq!(rx.stats().unauthenticated, 0);
    assert_eq!(tx.stats().unauthenticated, 0);
}

/// The sender stops with `Unauthenticated`; the receiver counts the refusal and names the peer.
fn refused(sender_secret: Option<Secret>, receiver_secret: Option<Secret>) -> String {
    let rx = receiver(receiver_secret);
    let tx = sender(rx.endpoint(), sender_secret);
    let err = tx.wait_connected(WAIT).unwrap_err();
    let TransportError::Unauthenticated { detail } = err else {
        panic!("expected an authentication error, got {err:?}");
    };
    let payload = Bytes::from_static(b"group");
    assert!(matches!(
        tx.send(&payload, Duration::from_millis(50)),
        Err(TransportError::Unauthenticated { .. })
    ));
    assert!(rx.recv(Duration::from_millis(100)).unwrap().is_none());
    assert_eq!(rx.stats().received, 0);
    detail
}

#[test]
fn an_unsigned_sender_is_refused_with_the_reason_and_its_address() {
    let rx = receiver(Some(secret(1)));
    let tx = sender(rx.endpoint(), None);
    let err = tx.wait_connected(WAIT).unwrap_err();
    assert!(err.to_string().contains("not signed"), "{err}");
    assert!(rx.stats().unauthenticated >= 1);
    let refusals = rx.take_refusals();
    assert_eq!(refusals[0].reason, AuthFailure::Unsigned);
    assert!(
        refusals[0].peer.starts_with("tcp://127.0.0.1:"),
        "{refusals:?}"
    );
    assert!(rx.take_refusals().is_empty(), "taking empties the list");
    assert!(refused(None, Some(secret(1))).contains("secret"));
}

#[test]
fn a_wrong_secret_is_refused_on_both_sides() {
    let rx = receiver(Some(secret(1)));
    let tx = sender(rx.endpoint(), Some(secret(2)));
    assert!(tx.wait_connected(WAIT).is_err());
    wait_until("the refusal", || rx.stats().unauthenticated >= 1);
    assert_eq!(rx.take_refusals()[0].reason, AuthFailure::BadTag);
    let detail = refused(Some(secret(2)), Some(secret(1)));
    assert!(detail.contains("same secret"), "{detail}");
}

#[test]
fn a_signing_sender_refuses_a_receiver_without_the_secret() {
    let detail = refused(Some(secret(1)), None);
    assert!(detail.contains("not signed"), "{detail}");
}

#[test]
fn forged_data_from_another_peer_is_dropped_and_the_stream_goes_on() {
    let rx = receiver(Some(secret(1)));
    let tx = sender(rx.endpoint(), Some(secret(1)));
    tx.send(&Bytes::from_static(b"first"), WAIT).unwrap();
    assert_eq!(rx.recv(WAIT).unwrap().unwrap().payload, "first");
    // A stranger sends a data message in the sender's name, session guessed, tag forged.
    let data = header(&[
        ("t", Value::S("data")),
        ("sender", Value::S("s")),
        ("session", Value::U(1)),
        ("hs", Value::U(1)),
        ("seq", Value::U(1)),
    ]);
    // the rogue and its runtime live until the refusal: zeromq writes queued messages from a
    // task of the socket's own, after `send` has returned
    let rt = runtime();
    let _rogue = rt.block_on(async {
        let mut rogue = DealerSocket::new();
        rogue.connect(rx.endpoint()).await.unwrap();
        let frames = vec![
            data,
            Bytes::from_static(b"poison"),
            Bytes::from(vec![0u8; 32]),
        ];
        rogue
            .send(ZmqMessage::try_from(frames).unwrap())
            .await
            .unwrap();
        rogue
    });
    wait_until("the refusal", || rx.stats().unauthenticated == 1);
    tx.send(&Bytes::from_static(b"second"), WAIT).unwrap();
    assert_eq!(rx.recv(WAIT).unwrap().unwrap().payload, "second");
    assert!(rx.recv(Duration::from_millis(100)).unwrap().is_none());
    assert_eq!(rx.take_refusals()[0].reason, AuthFailure::BadTag);
}

/// A msgpack map with string keys, as the protocol's headers are.
fn header(fields: &[(&str, Value)]) -> Bytes {
    let map: std::collections::BTreeMap<&str, &Value> =
        fields.iter().map(|(k, v)| (*k, v)).collect();
    Bytes::from(rmp_serde::to_vec_named(&map).unwrap())
}

#[derive(serde::Serialize)]
#[serde(untagged)]
enum Value {
    S(&'static str),
    U(u64),
}

#[derive(serde::Deserialize)]
struct Hello {
    session: u64,
}

#[test]
fn replies_not_signed_by_the_receiver_are_ignored_by_the_sender() {
    // A fake receiver that signs its READY but then sends an unsigned ACK claiming everything
    // was consumed: the sender must keep its groups (unacked) and count the forgery.
    let s = secret(3);
    let rt = runtime();
    let mut router = RouterSocket::new();
    let endpoint = rt
        .block_on(router.bind("tcp://127.0.0.1:0"))
        .unwrap()
        .to_string();
    let tx = sender(&endpoint, Some(s.clone()));
    let session = rt.block_on(async {
        let hello = router.recv().await.unwrap().into_vecdeque();
        let session = rmp_serde::from_slice::<Hello>(&hello[1]).unwrap().session;
        let ready = vec![header(&[
            ("t", Value::S("ready")),
            ("v", Value::U(1)),
            ("session", Value::U(session)),
            ("hs", Value::U(1)),
            ("next", Value::U(0)),
            ("acked", Value::U(0)),
            ("credit", Value::U(4)),
            ("window", Value::U(4)),
        ])];
        let tag = s.tag(&ready);
        let frames = [vec![hello[0].clone()], ready, vec![tag]].concat();
        router
            .send(ZmqMessage::try_from(frames).unwrap())
            .await
            .unwrap();
        session
    });
    tx.wait_connected(WAIT).unwrap();
    tx.send(&Bytes::from_static(b"kept"), WAIT).unwrap();
    rt.block_on(async {
        let data = router.recv().await.unwrap().into_vecdeque();
        let ack = header(&[
            ("t", Value::S("ack")),
            ("session", Value::U(session)),
            ("hs", Value::U(1)),
            ("acked", Value::U(1)),
            ("credit", Value::U(1)),
        ]);
        let forged = vec![data[0].clone(), ack, Bytes::from(vec![0u8; 32])];
        router
            .send(ZmqMessage::try_from(forged).unwrap())
            .await
            .unwrap();
    });
    wait_until("the ignored ack", || tx.stats().unauthenticated == 1);
    assert_eq!(tx.stats().unacked(), 1);
}
