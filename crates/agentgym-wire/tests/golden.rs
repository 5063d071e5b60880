//! Golden byte fixtures under `tests/fixtures/wire/`, shared with the Python tests.
//!
//! Regenerate (only when the schema deliberately changes, with a version bump):
//! `AGENTGYM_REGEN_WIRE_FIXTURES=1 cargo test -p agentgym-wire --test golden`
mod common;

use std::path::PathBuf;

use agentgym_wire::{decode_group, encode_group, version_of, Group};

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/wire")
}

/// The expected decoded values, as JSON for the Python test.
fn to_json(g: &Group) -> String {
    let list = |v: Vec<String>| format!("[{}]", v.join(", "));
    let nums = |v: &[u32]| list(v.iter().map(|x| x.to_string()).collect());
    let samples: Vec<String> = g
        .samples
        .iter()
        .map(|s| {
            let t = &s.tokens;
            format!(
                "{{\"input_ids\": {}, \"loss_mask\": {}, \"logprobs\": {}, \"versions\": {}, \
                 \"turn_spans\": {}, \"reward\": {:?}, \"status\": \"{}\", \"drift\": {}, \
                 \"turns\": {}, \"turn_cap\": {}, \"stage\": {}, \"dispatch_version\": {}{}{}{}}}",
                nums(&t.input_ids),
                list(t.loss_mask.iter().map(|x| x.to_string()).collect()),
                list(t.logprobs.iter().map(|x| format!("{x:?}")).collect()),
                nums(&t.versions),
                list(t.turn_spans.chunks(2).map(&nums).collect()),
                s.reward,
                s.status.as_str(),
                s.drift,
                s.turns,
                s.turn_cap,
                s.stage,
                s.dispatch_version,
                if s.request_id.is_empty() {
                    String::new()
                } else {
                    format!(", \"request_id\": \"{}\"", s.request_id)
                },
                if s.has_turn_arrays() {
                    format!(
                        ", \"turn_rewards\": {}, \"turn_keys\": {}",
                        list(s.turn_rewards.iter().map(|x| format!("{x:?}")).collect()),
                        nums(&s.turn_keys)
                    )
                } else {
                    String::new()
                },
                s.episode
                    .map_or_else(String::new, |e| format!(", \"episode\": {e}"))
            )
        })
        .collect();
    format!(
        "{{\"v\": {}, \"group_id\": {}, \"task_id\": \"{}\", \"env\": \"{}\", \"samples\": {}}}\n",
        version_of(g),
        g.group_id,
        g.task_id,
        g.env,
        list(samples)
    )
}

#[test]
fn golden_fixtures_decode_and_match_the_encoder_byte_for_byte() {
    let regen = std::env::var_os("AGENTGYM_REGEN_WIRE_FIXTURES").is_some();
    for (stem, group) in common::fixtures() {
        let bin = fixture_dir().join(format!("{stem}.msgpack"));
        let json = fixture_dir().join(format!("{stem}.json"));
        let encoded = encode_group(&group).unwrap();
        if regen {
            std::fs::create_dir_all(fixture_dir()).unwrap();
            std::fs::write(&bin, &encoded).unwrap();
            std::fs::write(&json, to_json(&group)).unwrap();
        }
        let committed = std::fs::read(&bin)
            .unwrap_or_else(|e| panic!("{}: {e} (regenerate, see module docs)", bin.display()));
        assert_eq!(
            decode_group(&committed).unwrap(),
            group,
            "{stem}: decoded value"
        );
        assert_eq!(committed, encoded, "{stem}: encoder output changed");
        assert_eq!(std::fs::read_to_string(&json).unwrap(), to_json(&group));
    }
}
