//! Builder unit tests on the committed ChatML fixture tokenizer.
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::SpecialTokens;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/templates")
        .join(name)
}

fn chatml() -> Arc<ChatTokenizer> {
    Arc::new(ChatTokenizer::from_dir(fixture("chatml")).unwrap())
}

fn start(chat: &Arc<ChatTokenizer>, max_len: usize) -> TrajectoryBuilder {
    let config = BuilderConfig {
        max_len,
        ..BuilderConfig::default()
    };
    TrajectoryBuilder::from_messages(
        chat.clone(),
        vec![json!({"role": "user", "content": "hi"})],
        None,
        config,
    )
    .unwrap()
}

fn turn(chat: &ChatTokenizer, text: &str) -> Vec<u32> {
    let mut ids = chat.encode(text).unwrap();
    ids.push(chat.eos_token_id().unwrap());
    ids
}

#[test]
fn prompt_matches_apply_chat_template_and_glue_is_added() {
    let chat = chatml();
    let mut b = start(&chat, 10_000);
    let msgs = vec![json!({"role": "user", "content": "hi"})];
    assert_eq!(
        b.tokens().input_ids,
        chat.apply_chat_template(&msgs, None, true).unwrap()
    );
    assert_eq!(b.prompt.closing(), "<|im_end|>\n");
    let ids = turn(&chat, "hello there");
    let n = ids.len();
    assert_eq!(
        b.add_generated(&ids, &vec![-0.5; n], Versions::Uniform(3))
            .unwrap(),
        Appended::Appended
    );
    let obs = [json!({"role": "user", "content": "next"})];
    assert_eq!(b.add_observation(&obs).unwrap(), Appended::Appended);
    let text = chat.decode(&b.tokens().input_ids).unwrap();
    assert!(
        text.ends_with(
            "hello there<|im_end|>\n<|im_start|>user\nnext<|im_end|>\n<|im_start|>assistant\n"
        ),
        "{text}"
    );
    let t = b.finish().unwrap();
    assert!(!t.drift && !t.truncated);
    assert_eq!(t.turns, 1);
    let (s, e) = (
        t.tokens.turn_spans[0] as usize,
        t.tokens.turn_spans[1] as usize,
    );
    assert_eq!(e - s, n);
    assert!(t.tokens.loss_mask[s..e].iter().all(|&m| m == 1));
    assert_eq!(
        t.tokens
            .loss_mask
            .iter()
            .map(|&m| usize::from(m))
            .sum::<usize>(),
        n
    );
    assert!(t.tokens.logprobs[..s]
        .iter()
        .chain(&t.tokens.logprobs[e..])
        .all(|&l| l == 0.0));
    assert!(t.tokens.versions[e..].iter().all(|&v| v == 3));
    assert_eq!(chat.checked_count(), 1);
}

#[test]
fn per_token_versions_and_input_validation() {
    let chat = chatml();
    let mut b = start(&chat, 10_000);
    let ids = turn(&chat, "ab cd");
    let n = ids.len();
    let versions: Vec<u32> = (0..n as u32).map(|i| if i < 2 { 4 } else { 5 }).collect();
    assert!(matches!(
        b.add_generated(&ids, &[0.0], Versions::Uniform(1)),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        b.add_generated(&ids, &vec![0.0; n], Versions::PerToken(&[1])),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        b.add_generated(&[], &[], Versions::Uniform(1)),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        b.add_observation(&[json!({"role": "user", "content": "x"})]),
        Err(Error::InvalidInput(_))
    ));
    assert_eq!(
        b.add_generated(&ids, &vec![0.0; n], Versions::PerToken(&versions))
            .unwrap(),
        Appended::Appended
    );
    assert!(matches!(
        b.add_generated(&ids, &vec![0.0; n], Versions::Uniform(1)),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        b.add_observation(&[]),
        Err(Error::InvalidInput(_))
    ));
    assert_eq!(b.tokens().min_version(), Some(4));
    assert_eq!(b.tokens().max_version(), Some(5));
}

#[test]
fn truncation_refuses_whole_turns() {
    let chat = chatml();
    let prompt_len = start(&chat, 10_000).len();
    let ids = turn(&chat, "a fairly long answer with many words in it");
    let mut b = start(&chat, prompt_len + ids.len() + 3);
    assert_eq!(
        b.add_generated(&ids, &vec![0.0; ids.len()], Versions::Uniform(0))
            .unwrap(),
        Appended::Appended
    );
    let before = b.len();
    let obs = [json!({"role": "user", "content": "a long observation that cannot fit"})];
    assert_eq!(b.add_observation(&obs).unwrap(), Appended::Truncated);
    assert_eq!(b.len(), before);
    assert!(b.is_truncated());
    assert_eq!(b.add_observation(&obs).unwrap(), Appended::Truncated);
    let t = b.finish().unwrap();
    assert!(t.truncated && !t.drift);
    assert_eq!(t.tokens.len(), before);

    let mut b = start(&chat, prompt_len + 2);
    assert_eq!(b.remaining(), 2);
    assert_eq!(
        b.add_generated(&ids, &vec![0.0; ids.len()], Versions::Uniform(0))
            .unwrap(),
        Appended::Truncated
    );
    assert_eq!(b.finish().unwrap().tokens.len(), prompt_len);
    assert!(start(&chat, 1).is_truncated());
}

#[test]
fn wrong_stop_token_is_drift_and_strict_errors() {
    let chat = chatml();
    let pad = chat.token_to_id("<|endoftext|>").unwrap();
    let mut ids = chat.encode("done").unwrap();
    ids.push(pad);
    let config = BuilderConfig {
        stop_ids: Some(vec![pad]),
        strict: true,
        ..BuilderConfig::default()
    };
    let msgs = vec![json!({"role": "user", "content": "hi"})];
    let mut b = TrajectoryBuilder::from_messages(chat.clone(), msgs, None, config).unwrap();
    let _ = b
        .add_generated(&ids, &vec![0.0; ids.len()], Versions::Uniform(0))
        .unwrap();
    let report = b.check_drift().unwrap();
    assert!(!report.is_clean());
    assert!(matches!(b.finish(), Err(Error::Drift { .. })));
    assert_eq!(chat.drift_count(), 1);
}

#[test]
fn non_verbatim_template_is_placeholder_error() {
    let tok = fixture("chatml").join("tokenizer.json");
    let chat = ChatTokenizer::from_parts(
        tok,
        "{% for m in messages %}{{ m.content | upper }}{% endfor %}",
        SpecialTokens::new(),
    )
    .unwrap();
    let err = Prompt::new(&chat, vec![json!({"role": "user", "content": "x"})], None).unwrap_err();
    assert!(matches!(err, Error::PlaceholderNotFound));
}

#[test]
fn history_rewriting_base_is_not_a_prefix() {
    // The assistant turn renders differently once it is no longer last.
    let tok = fixture("chatml").join("tokenizer.json");
    let src = "{% for m in messages %}{% if m.role == 'assistant' and loop.last %}[{% endif %}{{ m.content }}|{% endfor %}";
    let chat = ChatTokenizer::from_parts(tok, src, SpecialTokens::new()).unwrap();
    let prompt = Prompt::new(&chat, vec![json!({"role": "user", "content": "x"})], None).unwrap();
    let err = prompt
        .observation_delta(&chat, &[json!({"role": "user", "content": "y"})])
        .unwrap_err();
    assert!(
        matches!(err, Error::BaseNotPrefix { offset: 2, .. }),
        "{err}"
    );
}

/// A Llama 2 chat episode: the prompt, then `replies` (each + `</s>`) separated by observations.
fn llama2_episode(
    replies: &[&str],
    config: BuilderConfig,
) -> (Arc<ChatTokenizer>, TrajectoryBuilder) {
    llama2_shaped_episode("llama2", replies, config)
}

/// The same on a fixture of the Llama 2 shape: `llama2` trims a reply, `llama2_raw` does not.
fn llama2_shaped_episode(
    name: &str,
    replies: &[&str],
    config: BuilderConfig,
) -> (Arc<ChatTokenizer>, TrajectoryBuilder) {
    let chat = Arc::new(ChatTokenizer::from_dir(fixture(name)).unwrap());
    let msgs = vec![json!({"role": "user", "content": "You are in a maze."})];
    let mut b = TrajectoryBuilder::from_messages(chat.clone(), msgs, None, config).unwrap();
    for (i, reply) in replies.iter().enumerate() {
        if i > 0 {
            let obs = [json!({"role": "user", "content": "A wall."})];
            assert_eq!(b.add_observation(&obs).unwrap(), Appended::Appended);
        }
        let ids = turn(&chat, reply);
        let n = ids.len();
        assert_eq!(
            b.add_generated(&ids, &vec![0.0; n], Versions::Uniform(0))
                .unwrap(),
            Appended::Appended
        );
    }
    (chat, b)
}

#[test]
fn llama2_glue_is_what_follows_the_end_token() {
    let (chat, mut b) = llama2_episode(&[" Action: turn left"], BuilderConfig::default());
    assert_eq!(b.prompt.closing(), " </s>");
    assert_eq!(b.prompt.split_closing("</s>"), Some((" ", "")));
    assert_eq!(b.prompt.split_closing("<|im_end|>"), None);
    let obs = [json!({"role": "user", "content": "A wall."})];
    assert_eq!(b.add_observation(&obs).unwrap(), Appended::Appended);
    let text = chat.decode(&b.tokens().input_ids).unwrap();
    // Generated ids verbatim, then the template's text after `</s>`: no second `</s>`.
    assert!(
        text.ends_with("[/INST] Action: turn left</s><s>[INST] A wall. [/INST]"),
        "{text}"
    );
    let rendered = chat.render(&b.conversation().unwrap(), None, true).unwrap();
    assert!(rendered.ends_with("turn left </s><s>[INST] A wall. [/INST]"));
    assert!(b.check_drift().unwrap().is_clean());
    assert!(!b.finish().unwrap().drift);
}

#[test]
fn llama2_space_before_eos_is_the_only_difference_allowed() {
    let strict = BuilderConfig {
        strict: true,
        ..BuilderConfig::default()
    };
    // The model wrote the template's space itself: ids and render agree as they are.
    let (_, b) = llama2_episode(&[" turn left ", " go on"], strict.clone());
    assert!(!b.finish().unwrap().drift);
    // `content.strip()` rewrites these replies: the ids are not what the render says.
    for replies in [[" turn left  ", " go on"], [" go on", "  turn left"]] {
        let (chat, b) = llama2_episode(&replies, strict.clone());
        let report = b.check_drift().unwrap();
        assert!(!report.is_clean(), "{replies:?}");
        assert!(matches!(b.finish(), Err(Error::Drift { .. })));
        assert_eq!(chat.drift_count(), 1);
    }
}

#[test]
fn untrimmed_llama2_spaces_sampled_by_the_model_are_the_templates() {
    let strict = BuilderConfig {
        strict: true,
        ..BuilderConfig::default()
    };
    // `' ' + content + ' ' + eos`, no trim: the model samples the template's spaces (both turns),
    // or the leading one only (the gap before `</s>` is then the template's), or mixes them
    for replies in [
        [" Action: turn left ", " Action: go on "],
        [" Action: turn left", " Action: go on"],
        [" Action: turn left ", " Action: go on"],
        [" Action: turn left", " Action: go on "],
    ] {
        let (chat, b) = llama2_shaped_episode("llama2_raw", &replies, strict.clone());
        assert_eq!(b.prompt.opening(), " ");
        // the sampled text as content renders the spaces doubled ...
        let render = chat
            .render(&b.conversation().unwrap(), None, false)
            .unwrap();
        assert!(render.contains("[/INST]  Action: turn left"), "{render}");
        // ... yet the ids are the template's render of the reply without them
        assert!(b.check_drift().unwrap().is_clean(), "{replies:?}");
        assert!(!b.finish().unwrap().drift);
        assert_eq!(chat.drift_count(), 0);
    }
    // a reply whose text the template would render otherwise is still drift: here the model
    // wrote no leading space, which the template writes before any content
    let (chat, b) = llama2_shaped_episode("llama2_raw", &["Action: turn left"], strict);
    let report = b.check_drift().unwrap();
    assert!(!report.is_clean());
    assert!(matches!(b.finish(), Err(Error::Drift { .. })));
    assert_eq!(chat.drift_count(), 1);
}

#[test]
fn newline_before_eos_glue() {
    let chat = Arc::new(ChatTokenizer::from_dir(fixture("newline_eos")).unwrap());
    let msgs = vec![json!({"role": "user", "content": "hi"})];
    let config = BuilderConfig::default();
    let mut b = TrajectoryBuilder::from_messages(chat.clone(), msgs, None, config).unwrap();
    assert_eq!(b.prompt.closing(), "\n</s>\n\n");
    let ids = turn(&chat, "take apple");
    let _ = b
        .add_generated(&ids, &vec![0.0; ids.len()], Versions::Uniform(0))
        .unwrap();
    let obs = [json!({"role": "user", "content": "next"})];
    assert_eq!(b.add_observation(&obs).unwrap(), Appended::Appended);
    let text = chat.decode(&b.tokens().input_ids).unwrap();
    assert!(
        text.ends_with("take apple</s>\n\n### User:\nnext\n\n### Assistant:\n"),
        "{text}"
    );
    assert!(!b.finish().unwrap().drift);
}

#[test]
fn plain_text_stop_never_stands_for_the_end_token() {
    // The closing is ` </s>!`; a turn stopped on the plain `!` never wrote `</s>`, so the text
    // before `!` is not a gap to allow: the whole closing is owed and the turn is drift.
    let tok = fixture("newline_eos").join("tokenizer.json");
    let src = "{% for m in messages %}{% if m.role == 'assistant' %}{{ m.content + ' </s>!' }}{% else %}[{{ m.content }}]{% endif %}{% endfor %}";
    let special = SpecialTokens::new().with("eos_token", "</s>");
    let chat = Arc::new(ChatTokenizer::from_parts(tok, src, special).unwrap());
    let bang = chat.encode("!").unwrap();
    assert!(bang.len() == 1 && !chat.is_special(bang[0]));
    assert!(chat.is_special(chat.eos_token_id().unwrap()));
    let config = BuilderConfig {
        stop_ids: Some(bang.clone()),
        ..BuilderConfig::default()
    };
    let msgs = vec![json!({"role": "user", "content": "hi"})];
    let mut b = TrajectoryBuilder::from_messages(chat.clone(), msgs, None, config).unwrap();
    let mut ids = chat.encode("take apple").unwrap();
    ids.extend(&bang);
    let _ = b
        .add_generated(&ids, &vec![0.0; ids.len()], Versions::Uniform(0))
        .unwrap();
    assert_eq!(
        b.add_observation(&[json!({"role": "user", "content": "x"})])
            .unwrap(),
        Appended::Appended
    );
    let text = chat.decode(&b.tokens().input_ids).unwrap();
    assert_eq!(text, "[hi]take apple! </s>![x]");
    assert!(b.finish().unwrap().drift);
}
