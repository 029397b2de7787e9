//! §8: codec errors (and a checkpoint that does not decode, G7).

use std::collections::BTreeMap;

use super::fixtures::*;
use crate::codec::Direction;
use crate::emission::Record;
use crate::stage::logic::RecordPart;
use crate::stage::Stage;
use crate::task::{CommittedOffset, TaskError};
use crate::topic::Topic;

// ----- §8: codec errors -----

/// §8: a value (or key) the topic's codec rejects stops the task with a typed
/// codec error naming topic, tp and offset; the position stays at the record.
#[test]
fn codec_rejected_value_or_key_names_topic_tp_and_offset() {
    let f = fixture(echo(&[orders()], false));
    let o = tp(ORDERS, 0);

    let mut task = f.started(0);
    feed(
        &mut task,
        &o,
        vec![rec(0), rec(1).raw_value(Some(b"not json")), rec(2)],
        3,
    );
    deliver(&mut task, &o);
    let error = task.delivered(&o).unwrap_err();
    match &error {
        TaskError::Codec {
            task: who,
            tp,
            offset,
            part,
            error: codec,
        } => {
            assert_eq!(
                (who, tp, *offset, *part),
                (&id(0), &o, 1, RecordPart::Value)
            );
            assert_eq!((codec.codec, codec.direction), ("json", Direction::Decode));
        }
        other => panic!("expected a codec error, got {other:?}"),
    }
    let message = error.to_string();
    assert!(
        message.contains("orders-0@1") && message.contains("codec of topic orders"),
        "{message}"
    );
    assert_eq!(task.ready().unwrap_err(), error);
    assert_eq!(task.committing().unwrap().offsets, [(o.clone(), 1)]);

    // A key that does not decode, and a null value on a source.
    for (record, expected) in [
        (rec(0).raw_key(b"\xff"), RecordPart::Key),
        (rec(0).raw_value(None), RecordPart::Value),
    ] {
        let mut task = f.started(0);
        feed(&mut task, &o, vec![record], 1);
        let error = task.delivered(&o).unwrap_err();
        assert!(
            matches!(&error, TaskError::Codec { tp, offset: 0, part, .. } if tp == &o && *part == expected),
            "{error:?}"
        );
        assert_eq!(task.committing().unwrap().offsets, [(o.clone(), 0)]);
    }
}

/// §8: a tick record whose value is not an 8-byte timestamp stops the task
/// with `BadTick` naming tp and offset.
#[test]
fn codec_malformed_tick_value_is_a_bad_tick() {
    let f = fixture(echo(&[orders()], true));
    let (o, k) = (tp(ORDERS, 0), tp(TICKS, 0));
    for value in [Some(&[1u8, 2, 3][..]), Some(&[0u8; 9][..]), None] {
        let mut task = f.started(0);
        feed(&mut task, &k, vec![rec(3).raw_value(value)], 4);
        let error = task.delivered(&k).unwrap_err();
        assert_eq!(
            error,
            TaskError::BadTick {
                task: id(0),
                tp: k.clone(),
                offset: 3,
            }
        );
        assert_eq!(task.failure(), Some(&error));
        assert_eq!(
            task.committing().unwrap().offsets,
            [(o.clone(), 0), (k.clone(), 3)]
        );
    }
}

/// §8: an emission its sink's codec cannot encode stops the task naming the
/// topic, tp and offset.
#[test]
fn codec_emission_that_does_not_encode_is_an_error() {
    let maps: Topic<String, BTreeMap<(u8, u8), u8>> = Topic::new(MAPS);
    let sink = maps.clone();
    let stage = Stage::named("s")
        .on(&orders(), move |_: &Record<String, i64>| {
            vec![sink.send(None, BTreeMap::from([((1u8, 2u8), 3u8)]))]
        })
        .into(&maps)
        .build();
    let f = fixture(stage);
    let mut task = f.started(0);
    let o = tp(ORDERS, 0);
    feed(&mut task, &o, vec![rec(0)], 1);
    let error = task.delivered(&o).unwrap_err();
    assert!(
        matches!(&error, TaskError::EmissionCodec { task, topic, tp, offset: 0, .. }
            if task == &id(0) && topic == MAPS && tp == &o),
        "{error:?}"
    );
    assert_eq!(task.position(&o), Some(0));
}

/// G7: offset metadata that is not a Parsley checkpoint is refused at start.
#[test]
fn g7_bad_checkpoint_is_refused_at_start() {
    let f = fixture(echo(&[orders()], false));
    let mut task = f.task(0);
    let error = task
        .start(
            &[Some(CommittedOffset {
                offset: 3,
                metadata: "hello".into(),
            })],
            T0,
        )
        .unwrap_err();
    assert!(
        matches!(&error, TaskError::BadCheckpoint { task, tp, .. } if task == &id(0) && tp == &self::tp(ORDERS, 0)),
        "{error:?}"
    );
}
