//! Translation between [`Op`]/[`Reply`] and the AgentGym HTTP protocol variants.
//!
//! The reference servers disagree on field names (`id` vs `env_idx`), answer `/create` with an
//! object or a bare int, `/reset` with an object or a bare prompt string, signal the end with
//! `done` or `terminated`/`truncated`, and report refusals as HTTP 200 `{"error": ...}`. These
//! pure functions absorb that, so the transport code never looks at a field name.
//!
//! Health: the reference servers (AgentGym at 3ef9235) have no health endpoint; every one of
//! them answers `GET /` (FastAPI: a JSON string such as `"This is environment BabyAI."`,
//! WebArena's Quart: the plain text `ok`). This project's servers also answer `GET /health`
//! with their live-episode count and uptime, which is what notices a restart. So the AgentGym
//! dialect probes `/health` and falls back to `/` when that path does not exist (see
//! [`health_paths`]), and any 200 body counts as up.
use serde_json::{json, Map, Value};

use crate::config::Dialect;
use crate::message::{DecodeError, Health, Op, Reply, StepOutcome};

/// An HTTP request to send: method is POST when `body` is set, GET otherwise.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HttpRequest {
    pub path: String,
    pub body: Option<Vec<u8>>,
}

/// The request `op` becomes in `dialect`.
pub(crate) fn request(dialect: Dialect, op: &Op) -> HttpRequest {
    let key = dialect.id_key();
    let post = |path: &str, body: Value| HttpRequest {
        path: path.to_owned(),
        body: Some(body.to_string().into_bytes()),
    };
    match op {
        Op::Create => match dialect {
            // SearchQA's /create names the item up front; the real task comes with /reset.
            Dialect::SearchQa => post("/create", json!({ "id": 0 })),
            _ => post("/create", json!({})),
        },
        Op::Reset { id, data_idx } => match dialect {
            Dialect::AgentGym => post("/reset", json!({ "id": id, "data_idx": data_idx })),
            Dialect::SearchQa => post("/reset", json!({ "env_idx": id, "id": data_idx })),
            Dialect::WebArena => post(
                "/reset",
                json!({ "env_idx": id, "seed": 0, "idx": data_idx }),
            ),
        },
        Op::Step { id, action } => post("/step", json!({ key: id, "action": action })),
        Op::Close { id } => post("/close", json!({ key: id })),
        Op::Observation { id } => HttpRequest {
            path: format!("/observation?{key}={id}"),
            body: None,
        },
        Op::Health => HttpRequest {
            path: health_paths(dialect)[0].to_owned(),
            body: None,
        },
    }
}

/// The paths a health probe tries, in order: a 404 or 405 on one moves to the next (and the
/// transport remembers the one that answered). Never empty.
pub(crate) fn health_paths(dialect: Dialect) -> &'static [&'static str] {
    match dialect {
        // Our servers: `/health` (live episodes, uptime); AgentGym's own: only `/`.
        Dialect::AgentGym | Dialect::WebArena => &["/health", "/"],
        Dialect::SearchQa => &["/"],
    }
}

/// Decode the body of a 200 reply to `op`.
pub(crate) fn decode(dialect: Dialect, op: &Op, body: &[u8]) -> Result<Reply, DecodeError> {
    let value: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        // A 200 to a health probe or a close is an answer whatever its body (AgentGym's WebArena
        // server answers them with the plain text `ok` and `closed`).
        Err(_) if *op == Op::Health => return Ok(Reply::Health(Health::default())),
        Err(_) if matches!(op, Op::Close { .. }) => return Ok(Reply::Closed),
        Err(e) => {
            return Err(DecodeError::Malformed(format!(
                "not JSON ({e}): {}",
                preview(body)
            )))
        }
    };
    if let Some(message) = refusal(&value) {
        return Err(DecodeError::Refused {
            message,
            code: None,
        });
    }
    match op {
        Op::Create => decode_create(dialect, &value),
        Op::Reset { .. } => decode_outcome(&value)
            .map(|outcome| with_task_description(outcome, &value))
            .map(Reply::Outcome),
        Op::Step { .. } => decode_outcome(&value).map(Reply::Outcome),
        Op::Observation { .. } => match &value {
            Value::String(s) => Ok(Reply::Observation(s.clone())),
            Value::Object(map) => match map.get("observation") {
                Some(obs) => Ok(Reply::Observation(text(obs))),
                None => Err(malformed(
                    "observation object without 'observation'",
                    &value,
                )),
            },
            _ => Err(malformed("observation is neither text nor object", &value)),
        },
        // BabyAI and TextCraft answer `true`/`false`, SciWorld `true`, ours an object.
        Op::Close { .. } => Ok(Reply::Closed),
        Op::Health => Ok(Reply::Health(decode_health(&value))),
    }
}

/// `{"error": "..."}` (with a non-null error) is a refusal in every dialect.
fn refusal(value: &Value) -> Option<String> {
    match value.as_object()?.get("error")? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn decode_create(dialect: Dialect, value: &Value) -> Result<Reply, DecodeError> {
    let id = match value {
        Value::Number(n) => n.as_i64(),
        Value::Object(map) => [dialect.id_key(), "id", "env_idx"]
            .iter()
            .find_map(|k| map.get(*k).and_then(Value::as_i64)),
        _ => None,
    };
    let id = id.ok_or_else(|| malformed("create reply without an integer id", value))?;
    // TextCraft's /create also resets and carries the first observation.
    let first = match value {
        Value::Object(map) if map.contains_key("observation") => Some(decode_outcome(value)?),
        _ => None,
    };
    Ok(Reply::Created { id, first })
}

/// A reset/step body: an outcome object, or (SearchQA's reset) the bare observation text.
pub(crate) fn decode_outcome(value: &Value) -> Result<StepOutcome, DecodeError> {
    let map = match value {
        Value::String(s) => {
            return Ok(StepOutcome {
                observation: s.clone(),
                ..StepOutcome::default()
            })
        }
        Value::Object(map) => map,
        _ => return Err(malformed("outcome is neither text nor object", value)),
    };
    let observation = map
        .get("observation")
        .map(text)
        .ok_or_else(|| malformed("outcome without 'observation'", value))?;
    let reward = number(map, "reward", value)?.unwrap_or(0.0);
    let score = number(map, "score", value)?.unwrap_or(reward);
    let done = ["done", "terminated", "truncated"]
        .iter()
        .any(|k| map.get(*k).is_some_and(truthy));
    let invalid = map.get("invalid").is_some_and(truthy);
    let info = map
        .get("info")
        .filter(|v| !v.is_null())
        .map(Value::to_string);
    Ok(StepOutcome {
        observation,
        reward,
        score,
        done,
        invalid,
        info,
    })
}

/// SciWorld's `/reset` sends the task apart from the first observation (`task_description`, and
/// `observation` = the look-around text, which its own client joins after the description): the
/// agent's first observation is both, so the task is never lost.
fn with_task_description(mut outcome: StepOutcome, value: &Value) -> StepOutcome {
    let description = value.get("task_description").and_then(Value::as_str);
    if let Some(description) = description.filter(|d| !outcome.observation.starts_with(d)) {
        outcome.observation = format!("{description}\n{}", outcome.observation);
    }
    outcome
}

/// The live count and uptime of a health body that is a JSON object carrying them; any other
/// body (a reference server's greeting string) reports nothing.
fn decode_health(value: &Value) -> Health {
    let map = value.as_object();
    let get = |k: &str| map.and_then(|m| m.get(k));
    Health {
        live_episodes: get("live_episodes").and_then(Value::as_u64),
        uptime_s: get("uptime_s").and_then(Value::as_f64),
    }
}

fn number(map: &Map<String, Value>, key: &str, whole: &Value) -> Result<Option<f64>, DecodeError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(Value::Bool(b)) => Ok(Some(f64::from(u8::from(*b)))),
        Some(_) => Err(malformed(&format!("'{key}' is not a number"), whole)),
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        _ => false,
    }
}

/// Observation text; a non-string observation (some envs send structures) as compact JSON.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn malformed(what: &str, value: &Value) -> DecodeError {
    DecodeError::Malformed(format!("{what}: {}", preview(value.to_string().as_bytes())))
}

fn preview(body: &[u8]) -> String {
    let s = String::from_utf8_lossy(body);
    let mut out: String = s.chars().take(120).collect();
    if s.chars().count() > 120 {
        out.push('…');
    }
    out
}

#[cfg(test)]
#[path = "dialect_tests.rs"]
mod tests;
