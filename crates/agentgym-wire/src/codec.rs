//! Encode and decode [`Group`] messages (schema versions 1 and [`SCHEMA_VERSION`]).
//!
//! Layout (msgpack, string keys, `"v"` first):
//!
//! ```text
//! group  = {"v": 1 | 2 | 3, "group_id": u64, "task_id": str, "env": str, "samples": [sample, ...]}
//! sample = {"tokens": tokens, "reward": f32, "status": str, "drift": bool, "turns": u32,
//!           "turn_cap": u32, "stage": u32, "dispatch_version": u32, "request_id": str,
//!           "turn_rewards": arr<f4>[k], "turn_keys": arr<u4>[k], "episode": u32}
//! tokens = {"input_ids": arr<u4>[n], "loss_mask": arr<u1>[n], "logprobs": arr<f4>[n],
//!           "versions": arr<u4>[n], "turn_spans": arr<u4>[k, 2]}
//! arr    = {"dtype": "<u4" | "|u1" | "<f4", "shape": [..], "data": bin (little-endian)}
//! ```
//!
//! `"request_id"` came after version 1's first writers: it is written only when not empty, and
//! a sample without it reads as `""` (so older messages and fixtures read, byte for byte).
//! Version 2 adds the per-turn arrays (`k` = the number of turn spans; each written only when
//! not empty): a group in which no sample has them is written as version 1, byte for byte as
//! before, so readers of version 1 keep taking what they can read; a sample without them reads
//! as empty arrays. Version 3 adds `"episode"` (the sample's episode's place in its group), written
//! only on the samples of a group in which some episode trained as several samples; a group
//! without it is written as before (1 or 2). A version-2 reader would take each sample of such a
//! group for an episode of its own, so it is refused there rather than misread. Readers skip unknown keys (forward-compatible additions within a version)
//! and reject a `"v"` they do not know with [`WireError::SchemaVersion`] before looking at
//! anything else.
use crate::array::{read_array, write_array};
use crate::error::{Result, WireError};
use crate::msgpack::{Reader, Writer};
use crate::schema::{validate_episodes, validate_turns, Group, Sample, Status, TokenArrays};

/// The newest schema version this build writes and reads (it reads every version from 1).
pub const SCHEMA_VERSION: u32 = 3;

/// The version a group is written as: 3 when a sample names its episode, 2 when a sample has
/// per-turn arrays, else 1.
pub fn version_of(group: &Group) -> u32 {
    if group.samples.iter().any(|s| s.episode.is_some()) {
        SCHEMA_VERSION
    } else if group.samples.iter().any(Sample::has_turn_arrays) {
        2
    } else {
        1
    }
}

/// Bytes of msgpack framing per sample on top of its array data (an upper bound).
const SAMPLE_OVERHEAD: usize = 320;

/// Check the invariants of one sample's token arrays (shared by encode and decode).
pub fn validate_tokens(t: &TokenArrays) -> Result<()> {
    let n = t.input_ids.len();
    for (field, len) in [
        ("loss_mask", t.loss_mask.len()),
        ("logprobs", t.logprobs.len()),
        ("versions", t.versions.len()),
    ] {
        if len != n {
            return Err(WireError::InconsistentLength {
                field,
                expected: n,
                found: len,
            });
        }
    }
    if t.turn_spans.len() & 1 == 1 {
        return Err(WireError::InconsistentLength {
            field: "turn_spans",
            expected: t.turn_spans.len() + 1,
            found: t.turn_spans.len(),
        });
    }
    for (i, span) in t.turn_spans.chunks_exact(2).enumerate() {
        let (start, end) = (span[0] as usize, span[1] as usize);
        if start > end || end > n {
            return Err(WireError::InvalidValue {
                field: "turn_spans",
                detail: format!("span {i} = [{start}, {end}) is not within [0, {n}]"),
            });
        }
    }
    if n.saturating_mul(4) > u32::MAX as usize {
        return Err(WireError::InvalidValue {
            field: "input_ids",
            detail: format!("{n} tokens do not fit in one msgpack binary"),
        });
    }
    Ok(())
}

/// An upper bound of the encoded size of `group`.
pub fn encoded_len_hint(group: &Group) -> usize {
    let strings = group.task_id.len() + group.env.len() + 64;
    group.samples.iter().fold(strings, |acc, s| {
        acc + SAMPLE_OVERHEAD
            + s.request_id.len()
            + s.tokens.len() * 13
            + s.tokens.turn_spans.len() * 4
            + (s.turn_rewards.len() + s.turn_keys.len()) * 4
            + 96
    })
}

/// Encode `group` into a new buffer.
pub fn encode_group(group: &Group) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(encoded_len_hint(group));
    encode_group_into(group, &mut out)?;
    Ok(out)
}

/// Append the encoding of `group` to `out` (on error `out` is left unchanged).
pub fn encode_group_into(group: &Group, out: &mut Vec<u8>) -> Result<()> {
    for s in &group.samples {
        validate_tokens(&s.tokens)?;
        validate_turns(s)?;
    }
    validate_episodes(&group.samples)?;
    out.reserve(encoded_len_hint(group));
    let mut w = Writer { out };
    w.map_len(5);
    w.str("v");
    w.uint(version_of(group).into());
    w.str("group_id");
    w.uint(group.group_id);
    w.str("task_id");
    w.str(&group.task_id);
    w.str("env");
    w.str(&group.env);
    w.str("samples");
    w.array_len(group.samples.len());
    for s in &group.samples {
        write_sample(&mut w, s);
    }
    Ok(())
}

fn write_sample(w: &mut Writer<'_>, s: &Sample) {
    let t = &s.tokens;
    let named = !s.request_id.is_empty();
    let (rewarded, keyed) = (!s.turn_rewards.is_empty(), !s.turn_keys.is_empty());
    let optional = [named, rewarded, keyed, s.episode.is_some()];
    w.map_len(8 + optional.iter().filter(|&&b| b).count());
    w.str("tokens");
    w.map_len(5);
    w.str("input_ids");
    write_array(w, &t.input_ids, &[t.len()]);
    w.str("loss_mask");
    write_array(w, &t.loss_mask, &[t.len()]);
    w.str("logprobs");
    write_array(w, &t.logprobs, &[t.len()]);
    w.str("versions");
    write_array(w, &t.versions, &[t.len()]);
    w.str("turn_spans");
    write_array(w, &t.turn_spans, &[t.turn_spans.len() / 2, 2]);
    w.str("reward");
    w.f32(s.reward);
    w.str("status");
    w.str(s.status.as_str());
    w.str("drift");
    w.bool(s.drift);
    w.str("turns");
    w.uint(s.turns.into());
    w.str("turn_cap");
    w.uint(s.turn_cap.into());
    w.str("stage");
    w.uint(s.stage.into());
    w.str("dispatch_version");
    w.uint(s.dispatch_version.into());
    if named {
        w.str("request_id");
        w.str(&s.request_id);
    }
    if rewarded {
        w.str("turn_rewards");
        write_array(w, &s.turn_rewards, &[s.turn_rewards.len()]);
    }
    if keyed {
        w.str("turn_keys");
        write_array(w, &s.turn_keys, &[s.turn_keys.len()]);
    }
    if let Some(episode) = s.episode {
        w.str("episode");
        w.uint(episode.into());
    }
}

/// Decode one group message. The whole input must be consumed.
pub fn decode_group(bytes: &[u8]) -> Result<Group> {
    let mut r = Reader::new(bytes);
    let entries = r.map_len()?;
    if entries == 0 || r.str()? != "v" {
        return Err(WireError::MissingField { field: "v" });
    }
    let version = r.uint()?;
    if !(1..=u64::from(SCHEMA_VERSION)).contains(&version) {
        return Err(WireError::SchemaVersion {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    let (mut group_id, mut task_id, mut env, mut samples) = (None, None, None, None);
    for _ in 1..entries {
        match r.str()? {
            "group_id" => group_id = Some(r.uint()?),
            "task_id" => task_id = Some(r.str()?.to_owned()),
            "env" => env = Some(r.str()?.to_owned()),
            "samples" => {
                let n = r.array_len()?;
                let mut v = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    v.push(read_sample(&mut r)?);
                }
                samples = Some(v);
            }
            _ => r.skip()?,
        }
    }
    if r.remaining() != 0 {
        return Err(r.malformed(format!(
            "{} trailing byte(s) after the group",
            r.remaining()
        )));
    }
    let samples = samples.ok_or(WireError::MissingField { field: "samples" })?;
    validate_episodes(&samples)?;
    Ok(Group {
        group_id: group_id.ok_or(WireError::MissingField { field: "group_id" })?,
        task_id: task_id.ok_or(WireError::MissingField { field: "task_id" })?,
        env: env.ok_or(WireError::MissingField { field: "env" })?,
        samples,
    })
}

fn read_sample(r: &mut Reader<'_>) -> Result<Sample> {
    let mut tokens = None;
    let mut reward = None;
    let mut status = None;
    let mut drift = None;
    let (mut turns, mut turn_cap, mut stage, mut dispatch_version) = (None, None, None, None);
    let mut request_id = String::new();
    let (mut turn_rewards, mut turn_keys) = (Vec::new(), Vec::new());
    let mut episode = None;
    for _ in 0..r.map_len()? {
        match r.str()? {
            "tokens" => tokens = Some(read_tokens(r)?),
            "reward" => reward = Some(r.f32_value()?),
            "status" => {
                status = Some(Status::parse(r.str()?)?);
            }
            "drift" => drift = Some(r.bool()?),
            "turns" => turns = Some(r.u32_value("turns")?),
            "turn_cap" => turn_cap = Some(r.u32_value("turn_cap")?),
            "stage" => stage = Some(r.u32_value("stage")?),
            "dispatch_version" => dispatch_version = Some(r.u32_value("dispatch_version")?),
            "request_id" => r.str()?.clone_into(&mut request_id),
            "turn_rewards" => turn_rewards = read_array(r, "turn_rewards", None)?,
            "turn_keys" => turn_keys = read_array(r, "turn_keys", None)?,
            "episode" => episode = Some(r.u32_value("episode")?),
            _ => r.skip()?,
        }
    }
    let missing = |field| WireError::MissingField { field };
    let sample = Sample {
        tokens: tokens.ok_or(missing("tokens"))?,
        reward: reward.ok_or(missing("reward"))?,
        status: status.ok_or(missing("status"))?,
        drift: drift.ok_or(missing("drift"))?,
        turns: turns.ok_or(missing("turns"))?,
        turn_cap: turn_cap.ok_or(missing("turn_cap"))?,
        stage: stage.ok_or(missing("stage"))?,
        dispatch_version: dispatch_version.ok_or(missing("dispatch_version"))?,
        request_id,
        turn_rewards,
        turn_keys,
        episode,
    };
    validate_turns(&sample)?;
    Ok(sample)
}

fn read_tokens(r: &mut Reader<'_>) -> Result<TokenArrays> {
    let (mut input_ids, mut loss_mask, mut logprobs, mut versions, mut turn_spans) =
        (None, None, None, None, None);
    for _ in 0..r.map_len()? {
        match r.str()? {
            "input_ids" => input_ids = Some(read_array(r, "input_ids", None)?),
            "loss_mask" => loss_mask = Some(read_array(r, "loss_mask", None)?),
            "logprobs" => logprobs = Some(read_array(r, "logprobs", None)?),
            "versions" => versions = Some(read_array(r, "versions", None)?),
            "turn_spans" => turn_spans = Some(read_array(r, "turn_spans", Some(2))?),
            _ => r.skip()?,
        }
    }
    let missing = |field| WireError::MissingField { field };
    let t = TokenArrays {
        input_ids: input_ids.ok_or(missing("input_ids"))?,
        loss_mask: loss_mask.ok_or(missing("loss_mask"))?,
        logprobs: logprobs.ok_or(missing("logprobs"))?,
        versions: versions.ok_or(missing("versions"))?,
        turn_spans: turn_spans.ok_or(missing("turn_spans"))?,
    };
    validate_tokens(&t)?;
    Ok(t)
}
