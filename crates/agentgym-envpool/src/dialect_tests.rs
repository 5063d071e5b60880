//! Canned bodies of each reference server variant, decoded and encoded.
use super::*;
use crate::message::Health;

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
    assert_eq!(request(Dialect::WebArena, &Op::Health).path, "/health");
}

#[test]
fn sciworld_reset_puts_the_task_description_before_the_look_around() {
    let reset = Op::Reset { id: 0, data_idx: 3 };
    let body = r#"{"task_name": "boil", "var_num": 3, "task_description": "Your task is to boil water.",
        "observation": "This room is called the kitchen.", "reward": 0, "score": 0, "deleted": false,
        "done": false}"#;
    let Reply::Outcome(first) = decode(Dialect::AgentGym, &reset, body.as_bytes()).unwrap() else {
        panic!("not an outcome")
    };
    assert_eq!(
        first.observation,
        "Your task is to boil water.\nThis room is called the kitchen."
    );
    // already in front (our ZeroMQ-shaped replies): not repeated; steps are left alone
    let ours = r#"{"task_description": "Boil.", "observation": "Boil.\nKitchen.", "done": false}"#;
    let Reply::Outcome(same) = decode(Dialect::AgentGym, &reset, ours.as_bytes()).unwrap() else {
        panic!("not an outcome")
    };
    assert_eq!(same.observation, "Boil.\nKitchen.");
    let step = Op::Step {
        id: 0,
        action: "look around".into(),
    };
    let Reply::Outcome(s) = decode(Dialect::AgentGym, &step, body.as_bytes()).unwrap() else {
        panic!("not an outcome")
    };
    assert_eq!(s.observation, "This room is called the kitchen.");
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

/// Bodies exactly as AgentGym's own servers (at commit 3ef9235) send them.
mod reference_3ef9235 {
    use super::*;

    fn outcome(op: &Op, raw: &str) -> StepOutcome {
        match decode(Dialect::AgentGym, op, raw.as_bytes()) {
            Ok(Reply::Outcome(o)) => o,
            other => panic!("{raw}: {other:?}"),
        }
    }

    #[test]
    fn health_falls_back_to_root_which_every_server_answers() {
        assert_eq!(health_paths(Dialect::AgentGym), ["/health", "/"]);
        assert_eq!(health_paths(Dialect::SearchQa), ["/"]);
        // ours answer `/health` in the WebArena dialect too; AgentGym's WebArena server only `/`
        assert_eq!(health_paths(Dialect::WebArena), ["/health", "/"]);
        // FastAPI's `GET /`: a JSON string; WebArena's Flask: the plain text `ok`.
        for (dialect, raw) in [
            (Dialect::AgentGym, &br#""This is environment BabyAI.""#[..]),
            (Dialect::AgentGym, br#""This is environment ScienceWorld.""#),
            (Dialect::SearchQa, br#""ok""#),
            (Dialect::WebArena, b"ok"),
        ] {
            assert_eq!(
                decode(dialect, &Op::Health, raw),
                Ok(Reply::Health(Health::default())),
                "{raw:?}"
            );
        }
    }

    #[test]
    fn a_close_is_acknowledged_whatever_its_body() {
        // AgentGym's WebArena server answers `/close` with the plain text `closed`
        let close = Op::Close { id: 3 };
        for raw in [&b"closed"[..], b"true", br#"{"id": 3, "closed": true}"#] {
            assert_eq!(decode(Dialect::WebArena, &close, raw), Ok(Reply::Closed));
        }
        // a refusal is still one
        let refused = decode(
            Dialect::WebArena,
            &close,
            br#"{"error": "unknown env_idx 3"}"#,
        );
        assert!(
            matches!(refused, Err(DecodeError::Refused { .. })),
            "{refused:?}"
        );
    }

    #[test]
    fn babyai_shapes() {
        let reset = Op::Reset { id: 0, data_idx: 3 };
        let o = outcome(
            &reset,
            r#"{"observation": "Your goal: go to the red ball\n...", "reward": 0, "score": 0, "deleted": false, "done": false}"#,
        );
        assert!(o.observation.starts_with("Your goal:") && !o.done);
        let step = Op::Step {
            id: 0,
            action: "go to red ball 1".into(),
        };
        let o = outcome(
            &step,
            r#"{"observation": "... The task is completed.", "reward": 0.9, "score": 0.9, "done": true}"#,
        );
        assert_eq!(
            (o.reward, o.score, o.done, o.invalid),
            (0.9, 0.9, true, false)
        );
        // Stepping a finished episode: HTTP 200 with an error, a refusal.
        assert_eq!(
            decode(
                Dialect::AgentGym,
                &step,
                br#"{"error": "The task with environment 0 has finished."}"#
            ),
            Err(DecodeError::Refused {
                message: "The task with environment 0 has finished.".into(),
                code: None
            })
        );
        // BabyAI's /observation is an object; /close a bare boolean.
        assert_eq!(
            decode(
                Dialect::AgentGym,
                &Op::Observation { id: 0 },
                br#"{"observation": "Your goal: x", "reward": 0, "score": 0, "done": false, "deleted": false}"#
            ),
            Ok(Reply::Observation("Your goal: x".into()))
        );
        for raw in [&b"true"[..], b"false"] {
            assert_eq!(
                decode(Dialect::AgentGym, &Op::Close { id: 0 }, raw),
                Ok(Reply::Closed)
            );
        }
    }

    #[test]
    fn textcraft_shapes() {
        let Ok(Reply::Created { id, first }) = decode(
            Dialect::AgentGym,
            &Op::Create,
            br#"{"id": 2, "observation": "Crafting commands:\n...\n\nGoal: craft stick.", "done": false, "reward": 0}"#,
        ) else {
            panic!("not a create reply")
        };
        assert_eq!(id, 2);
        assert!(first.unwrap().observation.ends_with("Goal: craft stick."));
        let o = outcome(
            &Op::Reset { id: 2, data_idx: 7 },
            r#"{"id": 2, "observation": "Crafting commands: ...", "done": false, "reward": 0}"#,
        );
        assert_eq!((o.score, o.done), (0.0, false));
        // No `score` in a TextCraft step: the reward stands in for it.
        let o = outcome(
            &Op::Step {
                id: 2,
                action: "craft 4 stick using 2 planks".into(),
            },
            r#"{"observation": "Crafted 4 minecraft:stick", "reward": 1, "done": true}"#,
        );
        assert_eq!((o.reward, o.score, o.done), (1.0, 1.0, true));
        assert_eq!(
            decode(
                Dialect::AgentGym,
                &Op::Observation { id: 2 },
                br#""Got 1 oak log""#
            ),
            Ok(Reply::Observation("Got 1 oak log".into()))
        );
    }

    #[test]
    fn sciworld_shapes() {
        let o = outcome(
            &Op::Reset { id: 0, data_idx: 0 },
            r#"{"task_name": "boil", "var_num": 0, "task_description": "Your task is to boil water.", "observation": "This room is called the kitchen.", "reward": 0, "score": 0, "deleted": false, "done": false}"#,
        );
        // the task is not lost: its description comes first, as AgentGym's client shows it
        assert_eq!(
            o.observation,
            "Your task is to boil water.\nThis room is called the kitchen."
        );
        let o = outcome(
            &Op::Step {
                id: 0,
                action: "look around".into(),
            },
            r#"{"observation": "...", "reward": 8, "score": 16, "done": false}"#,
        );
        assert_eq!((o.reward, o.score), (8.0, 16.0));
    }
}
