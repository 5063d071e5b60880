//! Round trips, typed errors and a short property-based fuzz of the decoder.
mod common;

use agentgym_wire::{decode_group, encode_group, Group, Status, WireError, SCHEMA_VERSION};
use proptest::prelude::*;

#[test]
fn round_trip_of_fixtures_and_a_large_group() {
    let mut groups: Vec<Group> = common::fixtures().into_iter().map(|(_, g)| g).collect();
    groups.push(common::large_group(8, 8192));
    for g in groups {
        let bytes = encode_group(&g).unwrap();
        assert_eq!(decode_group(&bytes).unwrap(), g);
    }
}

#[test]
fn flags_survive_the_round_trip() {
    let (_, g) = common::fixtures().remove(1);
    let back = decode_group(&encode_group(&g).unwrap()).unwrap();
    let statuses: Vec<Status> = back.samples.iter().map(|s| s.status).collect();
    assert_eq!(statuses, Status::ALL.to_vec());
    assert!(back.samples[2].truncated());
    assert!(back.samples[3].env_failure());
    let (_, small) = common::fixtures().remove(0);
    assert!(
        decode_group(&encode_group(&small).unwrap())
            .unwrap()
            .samples[1]
            .drift
    );
}

#[test]
fn every_strict_prefix_is_an_error_not_a_panic() {
    let (_, g) = common::fixtures().remove(0);
    let bytes = encode_group(&g).unwrap();
    for cut in 0..bytes.len() {
        let err = decode_group(&bytes[..cut]).unwrap_err();
        assert!(
            matches!(
                err,
                WireError::Truncated { .. } | WireError::MissingField { .. }
            ),
            "cut {cut}: {err:?}"
        );
    }
}

#[test]
fn wrong_version_is_reported_as_such() {
    let (_, g) = common::fixtures().remove(0);
    let mut bytes = encode_group(&g).unwrap();
    // fixmap(5), fixstr "v", positive fixint version (1: no per-turn arrays in this group).
    assert_eq!(&bytes[..4], &[0x85, 0xa1, b'v', 1]);
    bytes[3] = 9;
    assert_eq!(
        decode_group(&bytes).unwrap_err(),
        WireError::SchemaVersion {
            found: 9,
            supported: SCHEMA_VERSION
        }
    );
}

#[test]
fn per_turn_arrays_make_version_2_and_must_match_the_turns() {
    let (_, mut g) = common::fixtures().remove(0);
    assert_eq!(encode_group(&g).unwrap()[3], 1);
    g.samples[0].turn_rewards = vec![0.5, 0.5];
    g.samples[0].turn_keys = vec![1, 2];
    let bytes = encode_group(&g).unwrap();
    assert_eq!(bytes[3], 2);
    let back = decode_group(&bytes).unwrap();
    assert_eq!(back.samples[0].turn_rewards, vec![0.5, 0.5]);
    assert_eq!(back.samples[0].turn_keys, vec![1, 2]);
    assert!(back.samples[1].turn_rewards.is_empty() && back.samples[1].turn_keys.is_empty());
    g.samples[0].turn_keys = vec![1, 2, 3]; // three keys, two turns
    assert_eq!(
        encode_group(&g).unwrap_err(),
        WireError::InconsistentLength {
            field: "turn_keys",
            expected: 2,
            found: 3
        }
    );
    g.samples[0].turn_keys = vec![];
    g.samples[0].turn_rewards = vec![f32::NAN, 1.0];
    assert!(matches!(
        encode_group(&g),
        Err(WireError::InvalidValue {
            field: "turn_rewards",
            ..
        })
    ));
}

#[test]
fn trailing_bytes_and_wrong_types_are_malformed() {
    let (_, g) = common::fixtures().remove(0);
    let mut bytes = encode_group(&g).unwrap();
    bytes.push(0xc0);
    assert!(matches!(
        decode_group(&bytes),
        Err(WireError::Malformed { .. })
    ));
    assert!(matches!(
        decode_group(&[0x93, 1, 2, 3]),
        Err(WireError::Malformed { .. })
    ));
    assert!(matches!(
        decode_group(&[0x80]),
        Err(WireError::MissingField { field: "v" })
    ));
}

#[test]
fn inconsistent_lengths_and_bad_values_are_rejected_on_encode() {
    let (_, mut g) = common::fixtures().remove(0);
    g.samples[0].tokens.logprobs.pop();
    assert!(matches!(
        encode_group(&g),
        Err(WireError::InconsistentLength {
            field: "logprobs",
            ..
        })
    ));
    let (_, mut g) = common::fixtures().remove(0);
    g.samples[0].tokens.turn_spans[1] = 1000;
    assert!(matches!(
        encode_group(&g),
        Err(WireError::InvalidValue {
            field: "turn_spans",
            ..
        })
    ));
}

#[test]
fn inconsistent_lengths_are_rejected_on_decode() {
    let (_, g) = common::fixtures().remove(0);
    let bytes = encode_group(&g).unwrap();
    // Find the shape of the first loss_mask ([10]) and claim 11 elements.
    let key = b"loss_mask";
    let at = bytes.windows(key.len()).position(|w| w == key).unwrap();
    let shape_key = b"shape";
    let rel = bytes[at..].windows(5).position(|w| w == shape_key).unwrap();
    let dim = at + rel + 5 + 1; // skip "shape" and the fixarray marker
    assert_eq!(bytes[dim], 10);
    let mut bad = bytes.clone();
    bad[dim] = 11;
    assert!(matches!(
        decode_group(&bad),
        Err(WireError::InconsistentLength {
            field: "loss_mask",
            ..
        })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_group(&bytes);
    }

    #[test]
    fn mutated_messages_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let (_, g) = common::fixtures().remove(1);
        let mut bytes = encode_group(&g).unwrap();
        for (i, b) in edits {
            let at = i.index(bytes.len());
            bytes[at] = b;
        }
        let end = cut.index(bytes.len() + 1);
        if let Ok(back) = decode_group(&bytes[..end]) {
            // Whatever decodes must re-encode (all invariants hold).
            prop_assert!(encode_group(&back).is_ok());
        }
    }

    #[test]
    fn arbitrary_groups_round_trip(
        lens in proptest::collection::vec(0u32..64, 0..5),
        group_id in any::<u64>(),
        reward in any::<f32>().prop_filter("not NaN", |r| !r.is_nan()),
    ) {
        let samples = lens
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let mut s = common::sample(n, &[(n / 2, n)], Status::ALL[i % 5], i as u32);
                s.reward = reward;
                s
            })
            .collect();
        let g = Group { group_id, task_id: "t_1".into(), env: "t".into(), samples };
        prop_assert_eq!(decode_group(&encode_group(&g).unwrap()).unwrap(), g);
    }
}

#[test]
fn request_ids_round_trip_and_an_unnamed_sample_writes_none() {
    let (_, named) = common::fixtures().remove(3);
    let back = decode_group(&encode_group(&named).unwrap()).unwrap();
    let ids: Vec<&str> = back.samples.iter().map(|s| s.request_id.as_str()).collect();
    assert_eq!(ids, ["g42-e0", "g42-e1"]);
    // an older writer's message (no "request_id" key) reads as unnamed
    let (_, small) = common::fixtures().remove(0);
    let bytes = encode_group(&small).unwrap();
    assert!(!bytes.windows(10).any(|w| w == b"request_id"));
    assert!(decode_group(&bytes)
        .unwrap()
        .samples
        .iter()
        .all(|s| s.request_id.is_empty()));
}

#[test]
fn named_episodes_make_version_3_and_must_be_all_or_none_in_order() {
    let (_, mut g) = common::fixtures().remove(0);
    g.samples.push(g.samples[1].clone());
    for (s, e) in g.samples.iter_mut().zip([0, 1, 1]) {
        s.episode = Some(e);
    }
    let bytes = encode_group(&g).unwrap();
    assert_eq!(bytes[3], SCHEMA_VERSION as u8);
    let back = decode_group(&bytes).unwrap();
    let places: Vec<_> = back.samples.iter().map(|s| s.episode).collect();
    assert_eq!(places, [Some(0), Some(1), Some(1)]);
    for bad in [
        [Some(0), None, Some(1)],
        [Some(1), Some(1), Some(2)],
        [Some(0), Some(2), Some(2)],
    ] {
        for (s, e) in g.samples.iter_mut().zip(bad) {
            s.episode = e;
        }
        assert!(
            matches!(
                encode_group(&g),
                Err(WireError::InvalidValue {
                    field: "episode",
                    ..
                })
            ),
            "{bad:?}"
        );
    }
}
