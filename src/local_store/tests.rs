//! S6: the checkpoint's text, the start's decision and the order of a
//! checkpoint's writes.

use std::collections::BTreeMap;

use super::checkpoint::crc32;
use super::*;

fn sample() -> StoreCheckpoint {
    StoreCheckpoint {
        app: "orders".into(),
        changelog: "orders-count-state-changelog".into(),
        partition: 3,
        offset: 1042,
        last: Some(LastApplied {
            offset: 1041,
            fingerprint: record_fingerprint(b"\x01k", Some(b"v")),
        }),
    }
}

#[test]
fn s6_crc32_is_the_ieee_one() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
}

#[test]
fn s6_checkpoint_text_round_trips() {
    let checkpoint = sample();
    assert_eq!(
        StoreCheckpoint::from_text(&checkpoint.to_text()).unwrap(),
        checkpoint
    );
    let empty = StoreCheckpoint {
        offset: 0,
        last: None,
        ..sample()
    };
    assert_eq!(StoreCheckpoint::from_text(&empty.to_text()).unwrap(), empty);
}

#[test]
fn s6_any_changed_or_missing_byte_of_a_checkpoint_is_refused() {
    let text = sample().to_text();
    for at in 0..text.len() {
        let mut torn = text.clone();
        torn.truncate(at);
        assert!(
            StoreCheckpoint::from_text(&torn).is_err(),
            "a file cut at byte {at} was taken"
        );
        let mut bytes = text.clone().into_bytes();
        bytes[at] ^= 0x04;
        if let Ok(edited) = String::from_utf8(bytes) {
            assert!(
                StoreCheckpoint::from_text(&edited).is_err(),
                "a file with byte {at} changed was taken"
            );
        }
    }
}

#[test]
fn s6_a_last_record_at_or_after_the_offset_is_refused() {
    let mut checkpoint = sample();
    checkpoint.last = Some(LastApplied {
        offset: checkpoint.offset,
        fingerprint: 7,
    });
    assert!(StoreCheckpoint::from_text(&checkpoint.to_text()).is_err());
}

#[test]
fn s6_fingerprints_tell_keys_values_and_tombstones_apart() {
    let all = [
        record_fingerprint(b"ab", Some(b"c")),
        record_fingerprint(b"a", Some(b"bc")),
        record_fingerprint(b"ab", None),
        record_fingerprint(b"ab", Some(b"")),
        record_fingerprint(b"ab", Some(b"d")),
    ];
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert_ne!(a, b);
        }
    }
}

fn judge(existed: bool, found: CheckpointFound) -> Opened {
    judge_opened(
        existed,
        None,
        found,
        "orders",
        "orders-count-state-changelog",
        3,
    )
}

#[test]
fn s6_a_start_trusts_only_its_own_checkpoint_beside_its_store() {
    let own = judge(true, CheckpointFound::Found(sample()));
    assert_eq!(own.checkpoint, Some(sample()));
    assert_eq!(own.distrust, None);
    let new = judge(false, CheckpointFound::Missing);
    assert_eq!(
        new,
        Opened::default(),
        "a new store is built without a warning"
    );
    let cases = [
        (
            false,
            CheckpointFound::Found(sample()),
            "the store is missing",
        ),
        (true, CheckpointFound::Missing, "there is no checkpoint"),
        (
            true,
            CheckpointFound::Unreadable("the checkpoint file is corrupt: x".into()),
            "corrupt",
        ),
        (
            true,
            CheckpointFound::Found(StoreCheckpoint {
                app: "other".into(),
                ..sample()
            }),
            "application `other`",
        ),
        (
            true,
            CheckpointFound::Found(StoreCheckpoint {
                partition: 4,
                ..sample()
            }),
            "orders-count-state-changelog-4",
        ),
    ];
    for (existed, found, why) in cases {
        let opened = judge(existed, found.clone());
        assert_eq!(opened.checkpoint, None, "{found:?}");
        assert!(
            opened.distrust.as_deref().is_some_and(|d| d.contains(why)),
            "{found:?}: {:?}",
            opened.distrust
        );
    }
    let broken = judge_opened(
        true,
        Some("the store did not open (x)".into()),
        CheckpointFound::Missing,
        "orders",
        "orders-count-state-changelog",
        3,
    );
    assert_eq!(
        broken.distrust.as_deref(),
        Some("the store did not open (x)")
    );
}

fn start(opened: &Opened, end: u64, empty: bool) -> RestoreStart {
    restore_start::<()>(opened, end, || Ok(empty)).unwrap()
}

#[test]
fn s6_a_start_restores_after_the_checkpoint_or_rebuilds_saying_why() {
    let trusted = Opened {
        checkpoint: Some(sample()),
        distrust: None,
    };
    assert_eq!(
        start(&trusted, 1042, false),
        RestoreStart::Check(sample().last.unwrap())
    );
    let RestoreStart::Whole { rebuild: Some(why) } = start(&trusted, 1041, false) else {
        panic!("a checkpoint ahead of the changelog is trusted");
    };
    assert!(why.contains("ahead of the changelog"), "{why}");
    let nameless = Opened {
        checkpoint: Some(StoreCheckpoint {
            offset: 5,
            last: None,
            ..sample()
        }),
        distrust: None,
    };
    assert_eq!(start(&nameless, 9, true), RestoreStart::From(5));
    assert!(matches!(
        start(&nameless, 9, false),
        RestoreStart::Whole { rebuild: Some(_) }
    ));
    assert_eq!(
        start(&Opened::default(), 9, false),
        RestoreStart::Whole { rebuild: None }
    );
    let distrusted = Opened {
        checkpoint: None,
        distrust: Some("there is no checkpoint".into()),
    };
    assert_eq!(
        start(&distrusted, 9, true),
        RestoreStart::Whole {
            rebuild: Some("there is no checkpoint".into())
        }
    );
}

#[test]
fn s6_the_last_applied_record_must_be_the_changelogs() {
    let last = sample().last.unwrap();
    let record = |key: Option<&'static [u8]>, value: &'static [u8]| crate::RecordData {
        key: key.map(bytes::Bytes::from_static),
        value: Some(bytes::Bytes::from_static(value)),
        headers: Vec::new(),
        timestamp: 0,
    };
    let applied = record(Some(b"\x01k"), b"v");
    assert_eq!(check_last_applied(last, Some((1041, &applied))), Ok(()));
    let other = check_last_applied(last, Some((1041, &record(Some(b"\x01k"), b"w"))));
    assert!(
        other
            .as_ref()
            .is_err_and(|why| why.contains("not the one the store last applied")),
        "{other:?}"
    );
    let keyless = check_last_applied(last, Some((1041, &record(None, b"v"))));
    assert!(
        keyless.is_err(),
        "a record without a key is not the one applied"
    );
    let gone = check_last_applied(last, Some((1050, &applied))).unwrap_err();
    assert!(gone.contains("no longer holds offset 1041"), "{gone}");
    assert!(check_last_applied(last, None).is_err());
}

/// A store on a disk where an OS crash keeps only what was synced, as a
/// driver writes it through the ledger.
#[derive(Default, Clone)]
struct Disk {
    written: BTreeMap<u64, ()>,
    synced: BTreeMap<u64, ()>,
    checkpoint: Option<StoreCheckpoint>,
}

impl Disk {
    /// After an OS crash now, does the checkpoint vouch only for records
    /// the store kept?
    fn crash_keeps_its_word(&self) -> bool {
        let vouched = self.checkpoint.as_ref().map_or(0, |c| c.offset);
        (0..vouched).all(|offset| self.synced.contains_key(&offset))
    }
}

#[test]
fn s6_a_checkpoint_never_vouches_for_writes_a_crash_between_its_steps_loses() {
    let mut ledger = StoreLedger::new("orders", "changelog", 0, 2, None);
    let mut disk = Disk::default();
    for offset in 0..6u64 {
        disk.written.insert(offset, ());
        ledger.applied(1, offset, b"\x01k", Some(b"v"));
        if ledger.checkpoint_due() {
            ledger
                .write_checkpoint(|step| -> Result<(), ()> {
                    match step {
                        CheckpointStep::SyncStore => disk.synced = disk.written.clone(),
                        CheckpointStep::Write(checkpoint) => {
                            disk.checkpoint = Some(checkpoint.clone())
                        }
                    }
                    assert!(
                        disk.crash_keeps_its_word(),
                        "a crash after {step:?} leaves a checkpoint vouching for lost writes"
                    );
                    Ok(())
                })
                .unwrap();
        }
    }
    assert_eq!(ledger.checkpoint().map(|c| c.offset), Some(6));
    assert_eq!(ledger.next_offset(), 6);
}

#[test]
fn s6_a_checkpoint_is_due_every_n_records_and_after_one_naming_none() {
    let mut ledger = StoreLedger::new("a", "c", 0, 3, None);
    ledger.applied(2, 1, b"k", None);
    assert!(!ledger.checkpoint_due());
    ledger.applied(1, 2, b"k", None);
    assert!(ledger.checkpoint_due());
    let empty = StoreCheckpoint {
        app: "a".into(),
        changelog: "c".into(),
        partition: 0,
        offset: 0,
        last: None,
    };
    let mut ledger = StoreLedger::new("a", "c", 0, 3, Some(empty));
    assert!(!ledger.checkpoint_due());
    ledger.applied(1, 0, b"k", None);
    assert!(
        ledger.checkpoint_due(),
        "the first record after a nameless checkpoint"
    );
    ledger.cleared();
    assert_eq!((ledger.checkpoint(), ledger.next_offset()), (None, 0));
}

/// A store of changelog keys, and an open transaction a driver could show.
struct Beside {
    store: BTreeMap<Vec<u8>, &'static [u8]>,
    open: BTreeMap<Vec<u8>, Option<&'static [u8]>>,
    fails: bool,
}

impl QueryStore for Beside {
    type Error = &'static str;

    fn committed(&self, slot: &[u8]) -> Result<Option<bytes::Bytes>, &'static str> {
        if self.fails {
            return Err("the disk is gone");
        }
        Ok(self
            .store
            .get(slot)
            .map(|value| bytes::Bytes::from_static(value)))
    }

    fn open_change(&self, slot: &[u8]) -> Option<Option<bytes::Bytes>> {
        self.open
            .get(slot)
            .map(|value| value.map(bytes::Bytes::from_static))
    }
}

/// Q1: a serving task answers the store's committed value of the key's
/// slot (its changelog key: tag 1 and the key), none for a slot it does
/// not hold, and never the open transaction's change, a value or a
/// deletion; a failed read is the store's error.
#[test]
fn q1_a_serving_task_answers_its_stores_committed_value_only() {
    let beside = Beside {
        store: BTreeMap::from([
            (b"\x01a".to_vec(), &b"1"[..]),
            (b"\x01b".to_vec(), &b"2"[..]),
        ]),
        open: BTreeMap::from([
            (b"\x01a".to_vec(), Some(&b"9"[..])),
            (b"\x01b".to_vec(), None),
            (b"\x01c".to_vec(), Some(&b"3"[..])),
        ]),
        fails: false,
    };
    let ask = |key: &[u8]| answer_query(QueryStanding::Serving(&beside), key);
    assert_eq!(ask(b"a"), Ok(Some(bytes::Bytes::from_static(b"1"))));
    assert_eq!(ask(b"b"), Ok(Some(bytes::Bytes::from_static(b"2"))));
    assert_eq!(ask(b"c"), Ok(None));
    assert_eq!(ask(b"d"), Ok(None));
    let failing = Beside {
        fails: true,
        ..beside
    };
    assert_eq!(
        answer_query(QueryStanding::Serving(&failing), b"a"),
        Err(QueryRefusal::Store("the disk is gone"))
    );
}

/// Q1: a task not owned, not started, restoring, ended or without a store
/// answers its typed refusal, and its store is not read.
#[test]
fn q1_a_task_that_is_not_serving_refuses_with_why() {
    let cases: [(QueryStanding<&Beside>, QueryRefusal<&str>); 5] = [
        (QueryStanding::NotOwned, QueryRefusal::NotOwner),
        (QueryStanding::NotStarted, QueryRefusal::NotStarted),
        (
            QueryStanding::Restoring { remaining: 7 },
            QueryRefusal::Restoring { remaining: 7 },
        ),
        (QueryStanding::Ended, QueryRefusal::Ended),
        (QueryStanding::NoStore, QueryRefusal::NoStore),
    ];
    for (standing, refusal) in cases {
        assert_eq!(answer_query(standing, b"a"), Err(refusal));
    }
}
