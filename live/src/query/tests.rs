//! Queries without a cluster: keys read by their stage's codec, the
//! typed refusals, and one instance's answers from its board and stores.

use std::time::Duration;

use bytes::Bytes;
use parsley::{App, Json, Parsley, RawBytes, Stage, Step, TaskId, Topic, Utf8, I64};

use super::*;
use crate::runtime::figures::Figures;
use crate::state::tests::scratch_dir;
use crate::state::LocalStore;

fn counter<K: 'static>(name: &str, topic: &Topic<K, i64>) -> Stage {
    Stage::named(name)
        .state(I64, || 0i64)
        .on(topic, |count: i64, _| Step::of(count + 1))
        .build()
}

fn app() -> App {
    let words: Topic<String, i64> = Topic::with_codecs("words", Utf8, I64);
    let numbers: Topic<i64, i64> = Topic::with_codecs("numbers", I64, I64);
    let docs: Topic<serde_json::Value, i64> = Topic::with_codecs("docs", Json, I64);
    let blobs: Topic<Bytes, i64> = Topic::with_codecs("blobs", RawBytes, I64);
    let copied: Topic<String, i64> = Topic::with_codecs("copied", Utf8, I64);
    let copy = {
        let out = copied.clone();
        Stage::named("copy")
            .on(&words, move |record| {
                vec![out.send(record.key().cloned(), *record.value())]
            })
            .into(&copied)
            .build()
    };
    Parsley::named("iq")
        .stage(counter("words", &words))
        .stage(counter("numbers", &numbers))
        .stage(counter("docs", &docs))
        .stage(counter("blobs", &blobs))
        .stage(copy)
        .build()
        .expect("the application builds")
}

/// Every topic with the same partition count.
struct Every(u32);

impl parsley::TopicMetadata for Every {
    fn partitions(&self, _: &str) -> Option<u32> {
        Some(self.0)
    }
}

fn plan<'a>(app: &'a App, stage: &str) -> &'a parsley::StagePlan {
    app.stage(stage).expect("a stage")
}

#[test]
fn a_key_is_read_by_its_stages_key_codec_or_given_as_base64() {
    let app = app();
    assert_eq!(key_bytes(plan(&app, "words"), "alice").unwrap(), "alice");
    assert_eq!(
        key_bytes(plan(&app, "numbers"), "-2").unwrap(),
        Bytes::copy_from_slice(&(-2i64).to_be_bytes())
    );
    assert_eq!(
        key_bytes(plan(&app, "docs"), r#"{"id":7}"#).unwrap(),
        r#"{"id":7}"#
    );
    assert_eq!(
        key_bytes(plan(&app, "blobs"), "base64:AAEC").unwrap(),
        Bytes::from_static(&[0, 1, 2])
    );
    assert_eq!(
        key_bytes(plan(&app, "words"), "base64:YWxpY2U=").unwrap(),
        "alice"
    );
}

#[test]
fn a_key_its_codec_cannot_read_is_refused_naming_the_stage_and_why() {
    let app = app();
    let error = key_bytes(plan(&app, "numbers"), "seven").unwrap_err();
    assert!(
        matches!(&error, QueryError::BadKey { stage, key, .. } if stage == "numbers" && key == "seven"),
        "{error:?}"
    );
    assert!(error.to_string().contains("I64"), "{error}");
    assert_eq!((error.kind(), error.status()), ("bad_key", 400));
    let error = key_bytes(plan(&app, "docs"), "{not json").unwrap_err();
    assert!(error.to_string().contains("is not JSON"), "{error}");
    let error = key_bytes(plan(&app, "words"), "base64:***").unwrap_err();
    assert!(error.to_string().contains("is not base64"), "{error}");
    let error = key_bytes(plan(&app, "blobs"), "abc").unwrap_err();
    assert!(
        matches!(&error, QueryError::UnknownKeyCodec { stage, raw: true, .. } if stage == "blobs"),
        "{error:?}"
    );
    assert!(error.to_string().contains("base64:"), "{error}");
    assert_eq!((error.kind(), error.status()), ("unknown_key_codec", 400));
}

#[test]
fn an_unknown_or_stateless_stage_is_refused_by_name() {
    let app = app();
    let assembly = parsley::assemble(&app, &Every(4)).expect("assembles");
    let error = task_of(&app, &assembly, "nope", b"k").unwrap_err();
    assert!(
        matches!(&error, QueryError::UnknownStage { stage, known } if stage == "nope" && known.contains(&"words".to_owned())),
        "{error:?}"
    );
    assert_eq!((error.kind(), error.status()), ("unknown_stage", 404));
    let error = task_of(&app, &assembly, "copy", b"k").unwrap_err();
    assert_eq!(
        error,
        QueryError::StatelessStage {
            stage: "copy".into()
        }
    );
    assert_eq!(error.status(), 400);
    let task = task_of(&app, &assembly, "words", b"alice").unwrap();
    assert_eq!(
        task.partition,
        parsley::partition_for(Some(b"alice"), 4, 0),
        "the key's task is the partition Kafka's partitioner gives it"
    );
}

#[test]
fn an_answer_is_json_when_the_state_is_and_base64_otherwise_and_reads_back() {
    let task = TaskId {
        stage: "words".into(),
        partition: 3,
    };
    let answer = |value: Option<&'static [u8]>| QueryAnswer {
        stage: "words".into(),
        task: task.clone(),
        instance: "host-1".into(),
        key: Bytes::from_static(b"alice"),
        value: value.map(Bytes::from_static),
    };
    let json = answer(Some(br#"{"total":3}"#)).to_json();
    assert_eq!(json["encoding"], "json");
    assert_eq!(json["value"]["total"], 3);
    assert_eq!(json["task"], "words/3");
    let long = answer(Some(&[0, 0, 0, 0, 0, 0, 0, 9]));
    let json = long.to_json();
    assert_eq!(
        (json["encoding"].as_str(), json["value"].as_str()),
        (Some("base64"), Some("AAAAAAAAAAk="))
    );
    assert_eq!(long.decode(&I64).unwrap(), Some(9));
    for answer in [long, answer(None), answer(Some(br#"{"total":3}"#))] {
        assert_eq!(QueryAnswer::from_json(&answer.to_json()), Some(answer));
    }
}

#[test]
fn a_path_segment_round_trips_through_percent_encoding() {
    for text in ["alice", "a/b c%", "base64:AA+/=", "é"] {
        assert_eq!(percent_decode(&percent_encode(text)).as_deref(), Some(text));
    }
    assert_eq!(percent_decode("%2"), None);
    assert_eq!(percent_decode("%ff"), None);
}

/// The owner answers from the store it serves, never while it restores,
/// and names a task it runs without a store.
#[test]
fn the_owner_answers_from_its_served_store_and_refuses_while_restoring() {
    let figures = Figures::new("iq", Duration::from_secs(30));
    let task = TaskId {
        stage: "words".into(),
        partition: 0,
    };
    figures.own(std::slice::from_ref(&task));
    figures.task_state(&task, TaskState::Restoring, None);
    figures.restoring(&task, 42);
    let error = answer_here(&figures, &task, b"alice").unwrap_err();
    assert_eq!(
        error,
        QueryError::Restoring {
            task: task.clone(),
            state: TaskState::Restoring,
            remaining: 42
        }
    );
    assert_eq!((error.kind(), error.status()), ("restoring", 503));
    assert_eq!(error.to_json()["remaining"], 42);

    figures.serve_store(&task, None);
    assert_eq!(
        answer_here(&figures, &task, b"alice").unwrap_err(),
        QueryError::NoStore { task: task.clone() }
    );

    let dir = scratch_dir("query");
    let mut store = LocalStore::open(&dir, "iq", "iq-words-state-changelog", 0).unwrap();
    let slot = |key: &[u8]| parsley::SlotKey::Key(Bytes::copy_from_slice(key)).changelog_key();
    store
        .apply(
            &[(
                slot(b"alice"),
                Some(Bytes::copy_from_slice(&5i64.to_be_bytes())),
            )],
            0,
        )
        .unwrap();
    figures.serve_store(&task, Some(store.reader()));
    figures.task_state(&task, TaskState::Running, None);
    let answer = answer_here(&figures, &task, b"alice").unwrap();
    assert_eq!(answer.decode(&I64).unwrap(), Some(5));
    assert_eq!(answer_here(&figures, &task, b"bob").unwrap().value, None);
    // The store holds what committed transactions applied: a later batch
    // is what the next query reads.
    store
        .apply(
            &[(
                slot(b"alice"),
                Some(Bytes::copy_from_slice(&6i64.to_be_bytes())),
            )],
            1,
        )
        .unwrap();
    assert_eq!(
        answer_here(&figures, &task, b"alice")
            .unwrap()
            .decode(&I64)
            .unwrap(),
        Some(6)
    );

    figures.withdraw_store(&task);
    figures.task_state(&task, TaskState::Stopped, None);
    assert!(matches!(
        answer_here(&figures, &task, b"alice").unwrap_err(),
        QueryError::Moving { .. }
    ));
    figures.disown(std::slice::from_ref(&task));
    assert!(matches!(
        answer_here(&figures, &task, b"alice").unwrap_err(),
        QueryError::NotOwner { .. }
    ));
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
}
