//! Replays the golden cases of `tests/fixtures/templates/*/golden.json` (expected ids computed
//! by transformers' `apply_chat_template`, see `tests/fixtures/make_golden.py`) through the
//! builder and asserts exact ids and masks. For templates that write text before the reply's end
//! token (`pre_eos` in the fixture: Llama 2's space), the expected ids are the render's text less
//! that never-sampled text, encoded piecewise around the verbatim replies.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns: a panic is the failure report

use std::path::PathBuf;
use std::sync::Arc;

use agentgym_trajectory::{
    BuilderConfig, ChatTokenizer, Message, SpecialTokens, TrajectoryBuilder, Versions,
};
use serde_json::Value;

fn fixture_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/templates")
        .join(name)
}

fn load(name: &str) -> (Arc<ChatTokenizer>, Value) {
    let dir = fixture_dir(name);
    let golden: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("golden.json")).unwrap()).unwrap();
    let chat = match golden["pieces"].as_object() {
        None => ChatTokenizer::from_dir(&dir).unwrap(),
        Some(p) => {
            let template =
                std::fs::read_to_string(dir.join(p["template"].as_str().unwrap())).unwrap();
            let mut special = SpecialTokens::new();
            for (k, v) in golden["special_tokens"].as_object().unwrap() {
                special = special.with(k, v.as_str().unwrap());
            }
            ChatTokenizer::from_parts(
                dir.join(p["tokenizer"].as_str().unwrap()),
                &template,
                special,
            )
            .unwrap()
        }
    };
    (Arc::new(chat), golden)
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Prefix = messages up to the first assistant turn; then generated turns and observation runs.
fn replay(
    chat: &Arc<ChatTokenizer>,
    case: &Value,
    strict: bool,
) -> agentgym_trajectory::Result<agentgym_trajectory::Trajectory> {
    let messages: Vec<Message> = case["messages"].as_array().unwrap().clone();
    let first = messages
        .iter()
        .position(|m| m["role"] == "assistant")
        .unwrap();
    let tools = (!case["tools"].is_null()).then(|| case["tools"].clone());
    let config = BuilderConfig {
        strict,
        ..BuilderConfig::default()
    };
    let mut b =
        TrajectoryBuilder::from_messages(chat.clone(), messages[..first].to_vec(), tools, config)?;
    let mut engine = case["engine_ids"].as_array().unwrap().iter();
    let mut pending: Vec<Message> = Vec::new();
    for (turn, msg) in messages[first..].iter().enumerate() {
        if msg["role"] == "assistant" {
            if !pending.is_empty() {
                assert_eq!(
                    b.add_observation(&pending)?,
                    agentgym_trajectory::Appended::Appended
                );
                pending.clear();
            }
            let turn_ids = ids(engine.next().unwrap());
            let lp: Vec<f32> = (0..turn_ids.len()).map(|i| -(i as f32) / 10.0).collect();
            assert_eq!(
                b.add_generated(&turn_ids, &lp, Versions::Uniform(turn as u32))?,
                agentgym_trajectory::Appended::Appended
            );
        } else {
            pending.push(msg.clone());
        }
    }
    if !pending.is_empty() {
        assert_eq!(
            b.add_observation(&pending)?,
            agentgym_trajectory::Appended::Appended
        );
    }
    b.finish()
}

fn check_template(name: &str) {
    let (chat, golden) = load(name);
    let cases = golden["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for case in cases {
        let label = format!("{name}/{}", case["name"]);
        let t = replay(&chat, case, false).unwrap();
        assert!(!t.drift, "{label}: unexpected drift");
        assert_eq!(
            t.tokens.input_ids,
            ids(&case["expected_ids"]),
            "{label}: ids"
        );
        let mask: Vec<u8> = ids(&case["expected_mask"])
            .into_iter()
            .map(|m| m as u8)
            .collect();
        assert_eq!(t.tokens.loss_mask, mask, "{label}: mask");
        let spans: Vec<u32> = case["turn_spans"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(ids)
            .collect();
        assert_eq!(t.tokens.turn_spans, spans, "{label}: spans");
        assert_eq!(t.tokens.logprobs.len(), t.tokens.len());
        assert_eq!(t.tokens.versions.len(), t.tokens.len());
    }
    assert_eq!(chat.drift_count(), 0);
    assert_eq!(chat.checked_count(), cases.len() as u64);
}

#[test]
fn chatml_matches_transformers() {
    check_template("chatml");
}

#[test]
fn llama3_matches_transformers() {
    check_template("llama3");
}

#[test]
fn llama2_space_before_eos_matches_transformers() {
    check_template("llama2");
}

#[test]
fn untrimmed_llama2_spaces_match_transformers_either_way_a_model_samples_them() {
    // `' ' + content + ' ' + eos`: every case twice, the engine stopping before the template's
    // space and sampling it (`*_sampling_pre_eos`); no drift either way
    let (_, golden) = load("llama2_raw");
    let names: Vec<&str> = golden["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(names.iter().any(|n| n.ends_with("_sampling_pre_eos")));
    check_template("llama2_raw");
}

#[test]
fn newline_before_eos_matches_transformers() {
    check_template("newline_eos");
}

#[test]
fn mistral_eos_then_inst_matches_transformers() {
    check_template("mistral");
}

#[test]
fn history_rewriting_template_is_flagged_as_drift() {
    let (chat, golden) = load("qwen3_think");
    let case = &golden["cases"][0];
    assert!(case["expect_drift"].as_bool().unwrap());
    let t = replay(&chat, case, false).unwrap();
    assert!(t.drift);
    assert_eq!(chat.drift_count(), 1);
    let err = replay(&chat, case, true).unwrap_err();
    assert!(
        matches!(err, agentgym_trajectory::Error::Drift { .. }),
        "{err}"
    );
}
