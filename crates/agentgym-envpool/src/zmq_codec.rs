//! msgpack schema of the native ZeroMQ protocol (envs' `server/PROTOCOL.md`): requests are maps
//! `{"op", "req", ...fields}`, replies echo `req` and carry `ok` plus the result fields or
//! `error`/`code`; `{"op": "batch", "ops": [...]}` answers with one result per item.
use serde::{Deserialize, Serialize};

use crate::message::{DecodeError, Health, Op, Reply, StepOutcome};

#[derive(Debug, Serialize)]
struct WireOp<'a> {
    op: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    req: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data_idx: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    action: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ops: Option<Vec<WireOp<'a>>>,
}

fn wire(op: &Op, req: Option<u64>) -> WireOp<'_> {
    let (id, data_idx, action) = match op {
        Op::Create | Op::Health => (None, None, None),
        Op::Reset { id, data_idx } => (Some(*id), Some(*data_idx), None),
        Op::Step { id, action } => (Some(*id), None, Some(action.as_str())),
        Op::Observation { id } | Op::Close { id } => (Some(*id), None, None),
    };
    WireOp {
        op: op.name(),
        req,
        id,
        data_idx,
        action,
        ops: None,
    }
}

/// Encode one request tagged `req`.
pub(crate) fn encode(op: &Op, req: u64) -> Result<Vec<u8>, String> {
    rmp_serde::to_vec_named(&wire(op, Some(req))).map_err(|e| e.to_string())
}

/// Encode a batch of requests as one message tagged `req`.
pub(crate) fn encode_batch(ops: &[Op], req: u64) -> Result<Vec<u8>, String> {
    let batch = WireOp {
        op: "batch",
        req: Some(req),
        id: None,
        data_idx: None,
        action: None,
        ops: Some(ops.iter().map(|op| wire(op, None)).collect()),
    };
    rmp_serde::to_vec_named(&batch).map_err(|e| e.to_string())
}

/// Every field any reply may carry; the op that asked decides which must be present.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub(crate) struct WireReply {
    pub req: Option<u64>,
    pub ok: bool,
    pub error: Option<String>,
    pub code: Option<String>,
    pub id: Option<i64>,
    pub observation: Option<String>,
    pub reward: Option<f64>,
    pub score: Option<f64>,
    pub done: Option<bool>,
    pub invalid: Option<bool>,
    pub results: Option<Vec<WireReply>>,
    pub live_episodes: Option<u64>,
    pub uptime_s: Option<f64>,
}

/// Decode a reply frame (the `req` tag is read by the dispatcher from the result).
pub(crate) fn decode_frame(frame: &[u8]) -> Result<WireReply, String> {
    rmp_serde::from_slice(frame).map_err(|e| format!("malformed msgpack reply: {e}"))
}

/// Interpret a reply to `op`.
pub(crate) fn reply(op: &Op, r: WireReply) -> Result<Reply, DecodeError> {
    if !r.ok {
        return Err(DecodeError::Refused {
            message: r.error.unwrap_or_else(|| "error without a message".into()),
            code: r.code,
        });
    }
    let missing = |f: &str| DecodeError::Malformed(format!("{} reply without '{f}'", op.name()));
    match op {
        Op::Create => {
            let id = r.id.ok_or_else(|| missing("id"))?;
            let first = r.observation.clone().map(|_| outcome(&r)).transpose()?;
            Ok(Reply::Created { id, first })
        }
        Op::Reset { .. } | Op::Step { .. } => outcome(&r).map(Reply::Outcome),
        Op::Observation { .. } => r
            .observation
            .map(Reply::Observation)
            .ok_or_else(|| missing("observation")),
        Op::Close { .. } => Ok(Reply::Closed),
        Op::Health => Ok(Reply::Health(Health {
            live_episodes: r.live_episodes,
            uptime_s: r.uptime_s,
        })),
    }
}

fn outcome(r: &WireReply) -> Result<StepOutcome, DecodeError> {
    let observation = r
        .observation
        .clone()
        .ok_or_else(|| DecodeError::Malformed("outcome without 'observation'".into()))?;
    let reward = r.reward.unwrap_or(0.0);
    Ok(StepOutcome {
        observation,
        reward,
        score: r.score.unwrap_or(reward),
        done: r.done.unwrap_or(false),
        invalid: r.invalid.unwrap_or(false),
        info: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Seen {
        op: String,
        req: Option<u64>,
        id: Option<i64>,
        action: Option<String>,
        ops: Option<Vec<Seen>>,
    }

    #[test]
    fn requests_are_named_maps() {
        let step = Op::Step {
            id: 4,
            action: "go".into(),
        };
        let seen: Seen = rmp_serde::from_slice(&encode(&step, 9).unwrap()).unwrap();
        assert_eq!(
            seen,
            Seen {
                op: "step".into(),
                req: Some(9),
                id: Some(4),
                action: Some("go".into()),
                ops: None
            }
        );
        let batch: Seen =
            rmp_serde::from_slice(&encode_batch(&[step.clone(), step], 1).unwrap()).unwrap();
        assert_eq!(batch.op, "batch");
        let items = batch.ops.unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].req, None);
    }

    #[test]
    fn replies_decode_per_op() {
        #[derive(Serialize)]
        struct R<'a> {
            req: u64,
            ok: bool,
            observation: &'a str,
            reward: i64,
            done: bool,
            invalid: bool,
            extra: &'a str,
        }
        let raw = rmp_serde::to_vec_named(&R {
            req: 3,
            ok: true,
            observation: "o",
            reward: 1,
            done: true,
            invalid: true,
            extra: "ignored",
        })
        .unwrap();
        let r = decode_frame(&raw).unwrap();
        assert_eq!(r.req, Some(3));
        let op = Op::Step {
            id: 0,
            action: "a".into(),
        };
        let Ok(Reply::Outcome(o)) = reply(&op, r) else {
            panic!()
        };
        assert_eq!(
            (o.reward, o.score, o.done, o.invalid),
            (1.0, 1.0, true, true)
        );
        let refused = WireReply {
            error: Some("unknown episode id 0".into()),
            code: Some("unknown_episode".into()),
            ..WireReply::default()
        };
        assert!(matches!(
            reply(&op, refused),
            Err(DecodeError::Refused { code: Some(c), .. }) if c == "unknown_episode"
        ));
        let empty = WireReply {
            ok: true,
            ..WireReply::default()
        };
        assert!(matches!(reply(&op, empty), Err(DecodeError::Malformed(_))));
        assert!(decode_frame(b"\xc1garbage").is_err());
    }
}
