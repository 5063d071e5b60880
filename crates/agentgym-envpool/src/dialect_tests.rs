//! Canned bodies of each reference server variant, decoded and encoded.
use super::*;

fn body(req: &HttpRequest) -> Value {
    serde_json::from_slice(req.body.as_deref().unwrap()).unwrap()
}

#[test]
fn requests_use_the_dialect_field_names() {
    let step = Op::Step {
        id: 3,
        action: "turn left".into(),
    };
    let r = request(Dialect::AgentGym, &step);
    assert_eq!(r.path, "/step");
    assert_eq!(body(&r), json!({"id": 3, "action": "turn left"}));
    assert_eq!(
        body(&request(Dialect::SearchQa, &step)),
        json!({"env_idx": 3, "action": "turn left"})
    );
    let reset = Op::Reset { id: 2, data_idx: 7 };
    assert_eq!(
        body(&request(Dialect::AgentGym, &reset)),
        json!({"id": 2, "data_idx": 7})
    );
    assert_eq!(
        body(&request(Dialect::SearchQa, &reset)),
        json!({"env_idx": 2, "id": 7})
    );
    assert_eq!(
        body(&request(Dialect::WebArena, &reset)),
        json!({"env_idx": 2, "seed": 0, "idx": 7})
    );
    let obs = request(Dialect::SearchQa, &Op::Observation { id: 5 });
    assert_eq!(obs.path, "/observation?env_idx=5");
    assert!(obs.body.is_none());
    assert_eq!(request(Dialect::AgentGym, &Op::Health).path, "/health");
    assert_eq!(request(Dialect::WebArena, &Op::Health).path, "/");
}

#[test]
fn create_replies_object_bare_int_and_first_observation() {
    let d = |b: &str, dialect| decode(dialect, &Op::Create, b.as_bytes()).unwrap();
    assert_eq!(
        d(r#"{"id": 4}"#, Dialect::AgentGym),
        Reply::Created { id: 4, first: None }
    );
    assert_eq!(
        d("17", Dialect::SearchQa),
        Reply::Created {
            id: 17,
            first: None
        }
    );
    assert_eq!(
        d(r#"{"env_idx": 2}"#, Dialect::WebArena),
        Reply::Created { id: 2, first: None }
    );
    let Reply::Created { id, first } = d(
        r#"{"id": 0, "observation": "Crafting commands: ...", "reward": 0, "done": false}"#,
        Dialect::AgentGym,
    ) else {
        panic!("not a create reply")
    };
    assert_eq!(id, 0);
    assert_eq!(first.unwrap().observation, "Crafting commands: ...");
}

#[test]
fn errors_sent_as_http_200_are_refusals() {
    for op in [
        Op::Create,
        Op::Step {
            id: 1,
            action: "x".into(),
        },
        Op::Close { id: 1 },
    ] {
        let err = decode(
            Dialect::AgentGym,
            &op,
            br#"{"error": "unknown episode id 1"}"#,
        );
        assert_eq!(
            err,
            Err(DecodeError::Refused {
                message: "unknown episode id 1".into(),
                code: None
            })
        );
    }
    // A null error field is no error.
    let ok = decode(
        Dialect::AgentGym,
        &Op::Step {
            id: 1,
            action: "x".into(),
        },
        br#"{"observation": "o", "reward": 1, "done": true, "error": null}"#,
    );
    assert!(ok.is_ok());
}

#[test]
fn outcomes_across_dialects() {
    let step = Op::Step {
        id: 0,
        action: "a".into(),
    };
    let Reply::Outcome(o) = decode(
        Dialect::AgentGym,
        &step,
        br#"{"observation": "o", "reward": 0.5, "score": 0.75, "done": true}"#,
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!((o.reward, o.score, o.done), (0.5, 0.75, true));
    assert!(!o.invalid, "a server that does not say accepted the action");
    let Reply::Outcome(o) = decode(
        Dialect::AgentGym,
        &step,
        br#"{"observation": "no", "reward": 0, "score": 0, "done": false, "invalid": true}"#,
    )
    .unwrap() else {
        panic!()
    };
    assert!(o.invalid && !o.done);
    let Reply::Outcome(o) = decode(
        Dialect::WebArena,
        &step,
        br#"{"observation": "tree", "reward": 1.0, "terminated": false, "truncated": true, "info": {"k": 1}}"#,
    )
    .unwrap() else {
        panic!()
    };
    assert!(o.done);
    assert_eq!(o.score, 1.0);
    assert_eq!(o.info.as_deref(), Some(r#"{"k":1}"#));
    let Reply::Outcome(o) = decode(
        Dialect::SearchQa,
        &Op::Reset { id: 0, data_idx: 3 },
        br#""Question: who?""#,
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!(o.observation, "Question: who?");
    assert!(!o.done);
}

#[test]
fn garbage_is_malformed_not_a_panic() {
    let step = Op::Step {
        id: 0,
        action: "a".into(),
    };
    for raw in [
        &b"<html>502 Bad Gateway</html>"[..],
        b"",
        b"[1, 2]",
        br#"{"reward": 1}"#,
        br#"{"observation": "o", "reward": "high"}"#,
        b"\xff\xfe",
    ] {
        assert!(
            matches!(
                decode(Dialect::AgentGym, &step, raw),
                Err(DecodeError::Malformed(_))
            ),
            "{raw:?}"
        );
    }
    assert!(matches!(
        decode(Dialect::AgentGym, &Op::Create, br#"{"id": "zero"}"#),
        Err(DecodeError::Malformed(_))
    ));
}

#[test]
fn health_reads_live_count_and_uptime() {
    let Reply::Health(h) = decode(
        Dialect::AgentGym,
        &Op::Health,
        br#"{"status": "ok", "live_episodes": 3, "uptime_s": 1.5}"#,
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!(h.live_episodes, Some(3));
    assert_eq!(h.uptime_s, Some(1.5));
    // Reference servers answer GET / with a bare string.
    assert!(decode(
        Dialect::SearchQa,
        &Op::Health,
        br#""This is environment searchqa.""#
    )
    .is_ok());
}
