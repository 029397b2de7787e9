//! The local store against a changelog kept in memory: whatever the store
//! and its checkpoint went through, a restore ends with the slots a replay
//! of the whole changelog gives, and reads the changelog only after the
//! checkpoint when the store can be trusted.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use parsley::TaskId;
use parsley::{ConsumedRecord, RecordData};

use super::checkpoint::{Checkpoint, FILE};
use super::*;

/// A fresh directory of its own under the system's temporary directory.
pub(crate) fn scratch_dir(name: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "parsley-state-test-{}-{}-{name}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

const APP: &str = "app";
const TOPIC: &str = "app-count-state-changelog";

fn task() -> TaskId {
    TaskId {
        stage: "count".into(),
        partition: 0,
    }
}

/// A changelog partition: committed records at their offsets, with the
/// gaps transaction markers leave.
#[derive(Default, Clone)]
struct Changelog {
    records: Vec<ConsumedRecord>,
    end: u64,
    /// The offsets each fetch started from.
    fetched_from: Vec<u64>,
}

impl Changelog {
    /// One committed transaction of `(key, value)` changes; returns the
    /// changes and the offset of the last.
    fn commit(&mut self, changes: &[(&str, Option<&str>)]) -> (Vec<(Bytes, Option<Bytes>)>, u64) {
        let mut applied = Vec::new();
        for (key, value) in changes {
            let key = Bytes::from(format!("\u{1}{key}"));
            let value = value.map(|value| Bytes::from(value.to_owned()));
            self.records.push(ConsumedRecord {
                offset: self.end,
                data: RecordData {
                    key: Some(key.clone()),
                    value: value.clone(),
                    headers: Vec::new(),
                    timestamp: 0,
                },
            });
            applied.push((key, value));
            self.end += 1;
        }
        let last = self.end - 1;
        // The commit marker.
        self.end += 1;
        (applied, last)
    }

    fn fetch(&mut self, from: u64) -> Result<Vec<ConsumedRecord>, Infallible> {
        self.fetched_from.push(from);
        Ok(self
            .records
            .iter()
            .filter(|record| record.offset >= from)
            .cloned()
            .collect())
    }

    /// The slots a replay of the whole changelog gives.
    fn replayed(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut slots = FakeSlots::default();
        for record in &self.records {
            slots.load(record.offset, &record.data).unwrap();
        }
        slots.slots
    }
}

/// Slots that refuse the value `unreadable`.
#[derive(Default)]
struct FakeSlots {
    slots: BTreeMap<Vec<u8>, Vec<u8>>,
    resets: usize,
}

impl Slots for FakeSlots {
    type Error = String;
    fn load(&mut self, _offset: u64, record: &RecordData) -> Result<(), String> {
        let key = record.key.as_ref().ok_or("no key")?.to_vec();
        match record.value.as_deref() {
            Some(b"unreadable") => return Err("the codec refused it".into()),
            Some(value) => self.slots.insert(key, value.to_vec()),
            None => self.slots.remove(&key),
        };
        Ok(())
    }
    fn load_stored(&mut self, record: &RecordData) -> Result<(), String> {
        self.load(0, record)
    }
    fn reset(&mut self) -> Result<(), String> {
        self.slots.clear();
        self.resets += 1;
        Ok(())
    }
}

fn open(dir: &Path) -> LocalStore {
    LocalStore::open(dir, APP, TOPIC, 0).unwrap()
}

/// Opens the store in `dir`, restores from `log` and checks the slots are
/// the replay's; returns what the restore did.
fn restore_checked(dir: &Path, log: &mut Changelog) -> (LocalStore, Restored) {
    let mut store = open(dir);
    let mut slots = FakeSlots::default();
    let end = log.end;
    let restored = restore(&mut store, &task(), end, |from| log.fetch(from), &mut slots)
        .unwrap_or_else(|error| panic!("restore failed: {error:?}"));
    assert_eq!(slots.slots, log.replayed(), "slots after {restored:?}");
    assert_eq!(
        restored.rebuilt.is_some(),
        slots.resets == 1,
        "a rebuild resets the slots once"
    );
    (store, restored)
}

/// Runs transactions on a started store as the runtime does: the
/// changelog gets them, then the store applies them.
fn run(store: &mut LocalStore, log: &mut Changelog, transactions: &[&[(&str, Option<&str>)]]) {
    for changes in transactions {
        let (applied, last) = log.commit(changes);
        apply(store, &applied, last);
    }
}

/// Applies one committed transaction, and checkpoints when one is due.
fn apply(store: &mut LocalStore, applied: &[(Bytes, Option<Bytes>)], last: u64) {
    store.apply(applied, last).unwrap();
    if store.checkpoint_due() {
        store.checkpoint().unwrap();
    }
}

fn history(log: &mut Changelog) {
    log.commit(&[("a", Some("1")), ("b", Some("1"))]);
    log.commit(&[("a", Some("2")), ("c", Some("1"))]);
    log.commit(&[("b", None)]);
}

#[test]
fn a_new_store_is_built_from_the_whole_changelog_without_a_warning() {
    let dir = scratch_dir("new");
    let mut log = Changelog::default();
    history(&mut log);
    let (store, restored) = restore_checked(&dir, &mut log);
    assert_eq!(restored.rebuilt, None);
    assert_eq!((restored.from_store, restored.from_changelog), (0, 5));
    assert_eq!(log.fetched_from, [0]);
    let checkpoint = Checkpoint::read(&dir).unwrap();
    assert_eq!(checkpoint.offset, 7, "after the last record, at 6");
    assert_eq!(checkpoint.last.unwrap().offset, 6);
    drop(store);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_restart_reads_only_the_changelog_after_the_checkpoint() {
    let dir = scratch_dir("restart");
    let mut log = Changelog::default();
    history(&mut log);
    let (mut store, _) = restore_checked(&dir, &mut log);
    run(
        &mut store,
        &mut log,
        &[&[("d", Some("1"))], &[("a", None), ("e", Some("1"))]],
    );
    store.checkpoint().unwrap();
    drop(store);
    // Another owner ran the task meanwhile.
    log.commit(&[("c", Some("9")), ("f", Some("1"))]);
    log.fetched_from.clear();
    let (store, restored) = restore_checked(&dir, &mut log);
    assert_eq!(restored.rebuilt, None);
    // c, d, e from the store; c and f from the changelog after the
    // checkpoint's last record (offset 11), read from 11 to check it.
    assert_eq!(
        (restored.from_store, restored.from_changelog),
        (3, 2),
        "{restored:?}"
    );
    assert_eq!(log.fetched_from, [11]);
    assert_eq!(restored.changelog_from, 12);
    drop(store);
    // Nothing new: nothing but the check is read.
    log.fetched_from.clear();
    let (store, restored) = restore_checked(&dir, &mut log);
    assert_eq!((restored.from_store, restored.from_changelog), (4, 0));
    assert_eq!(log.fetched_from, [14]);
    drop(store);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_store_ahead_of_its_checkpoint_after_a_crash_catches_up() {
    let dir = scratch_dir("crash");
    let mut log = Changelog::default();
    history(&mut log);
    let (mut store, _) = restore_checked(&dir, &mut log);
    // Applied but never checkpointed, as when the process dies between
    // checkpoints; then a transaction committed whose apply never ran.
    run(
        &mut store,
        &mut log,
        &[&[("a", Some("3"))], &[("b", Some("5"))]],
    );
    log.commit(&[("a", None), ("g", Some("1"))]);
    drop(store);
    let (store, restored) = restore_checked(&dir, &mut log);
    assert_eq!(restored.rebuilt, None);
    assert_eq!(restored.changelog_from, 7, "from the checkpoint on");
    drop(store);
    fs::remove_dir_all(&dir).unwrap();
}

/// Writes a checkpoint through `edit`, then restores: the store must be
/// rebuilt for the reason `why` names.
fn rebuilt_for(name: &str, edit: impl FnOnce(&Path, &mut Changelog), why: &str) {
    let dir = scratch_dir(name);
    let mut log = Changelog::default();
    history(&mut log);
    let (mut store, _) = restore_checked(&dir, &mut log);
    run(&mut store, &mut log, &[&[("d", Some("1"))]]);
    store.checkpoint().unwrap();
    drop(store);
    edit(&dir, &mut log);
    log.fetched_from.clear();
    let (store, restored) = restore_checked(&dir, &mut log);
    let said = restored.rebuilt.expect("rebuilt");
    assert!(said.contains(why), "{said:?} does not say {why:?}");
    assert_eq!(restored.from_store, 0);
    assert_eq!(restored.changelog_from, 0);
    assert_eq!(*log.fetched_from.last().unwrap(), 0, "the whole changelog");
    drop(store);
    // Rebuilt, it is trusted again.
    log.fetched_from.clear();
    let (store, restored) = restore_checked(&dir, &mut log);
    assert_eq!(restored.rebuilt, None);
    assert_ne!(log.fetched_from, [0]);
    drop(store);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_checkpoint_rebuilds() {
    rebuilt_for(
        "no-checkpoint",
        |dir, _| fs::remove_file(dir.join(FILE)).unwrap(),
        "no checkpoint",
    );
}

#[test]
fn a_corrupt_checkpoint_rebuilds() {
    rebuilt_for(
        "corrupt-checkpoint",
        |dir, _| {
            let text = fs::read_to_string(dir.join(FILE)).unwrap();
            fs::write(dir.join(FILE), text.replace("offset 9", "offset 3")).unwrap();
        },
        "checksum",
    );
}

#[test]
fn a_missing_store_rebuilds() {
    rebuilt_for(
        "no-store",
        |dir, _| fs::remove_dir_all(dir.join(STORE)).unwrap(),
        "store is missing",
    );
}

#[test]
fn a_store_that_does_not_open_rebuilds() {
    rebuilt_for(
        "unopenable",
        |dir, _| {
            // Every file of the store truncated to nothing.
            for entry in walk(&dir.join(STORE)) {
                fs::write(entry, b"").unwrap();
            }
        },
        "did not open",
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn another_applications_checkpoint_rebuilds() {
    rebuilt_for(
        "other-app",
        |dir, _| {
            let mut checkpoint = Checkpoint::read(dir).unwrap();
            checkpoint.app = "another".into();
            checkpoint.write(dir).unwrap();
        },
        "application `another`",
    );
}

#[test]
fn a_checkpoint_ahead_of_the_changelog_rebuilds() {
    rebuilt_for(
        "ahead",
        |_, log| {
            // The changelog lost its tail (recreated with fewer records).
            log.records.truncate(3);
            log.end = 4;
        },
        "ahead of the changelog",
    );
}

#[test]
fn another_record_at_the_last_applied_offset_rebuilds() {
    rebuilt_for(
        "recreated",
        |_, log| {
            // The topic was recreated and filled anew past the checkpoint.
            *log = Changelog::default();
            log.commit(&[("x", Some("1")), ("y", Some("1"))]);
            log.commit(&[("x", Some("2")), ("z", Some("1"))]);
            log.commit(&[("y", Some("2")), ("w", Some("1")), ("v", Some("3"))]);
        },
        "not the one the store last applied",
    );
}

#[test]
fn a_last_applied_record_compacted_away_rebuilds() {
    rebuilt_for(
        "compacted",
        |_, log| {
            // Compaction removed offset 8 (d=1), after a later d.
            log.commit(&[("d", Some("2"))]);
            log.records.retain(|record| record.offset != 8);
        },
        "no longer holds offset 8",
    );
}

#[test]
fn a_stored_slot_the_stage_cannot_read_rebuilds() {
    rebuilt_for(
        "unreadable",
        |dir, _| {
            let mut store = open(dir);
            let next = store.next_offset();
            // The batch's last record is the changelog's, so the check
            // against the changelog passes.
            let records = [
                (
                    Bytes::from_static(b"\x01x"),
                    Some(Bytes::from_static(b"unreadable")),
                ),
                (Bytes::from_static(b"\x01d"), Some(Bytes::from_static(b"1"))),
            ];
            store.apply(&records, next - 1).unwrap();
            store.checkpoint().unwrap();
        },
        "cannot read",
    );
}

#[test]
fn slots_applied_after_a_checkpoint_of_an_empty_changelog_are_checkpointed_at_once() {
    let dir = scratch_dir("empty");
    let mut log = Changelog::default();
    let (mut store, restored) = restore_checked(&dir, &mut log);
    assert_eq!(restored.from_changelog, 0);
    assert!(Checkpoint::read(&dir).unwrap().last.is_none());
    assert!(!store.checkpoint_due());
    let (applied, last) = log.commit(&[("a", Some("1"))]);
    store.apply(&applied, last).unwrap();
    assert!(store.checkpoint_due(), "the first records after it");
    // Without that checkpoint, the store cannot be checked: rebuilt.
    drop(store);
    let (mut store, restored) = restore_checked(&dir, &mut log);
    let said = restored.rebuilt.expect("rebuilt");
    assert!(said.contains("names no changelog record"), "{said}");
    // The rebuild's checkpoint names the record at 0; later ones wait.
    assert_eq!(Checkpoint::read(&dir).unwrap().last.unwrap().offset, 0);
    run(&mut store, &mut log, &[&[("b", Some("1"))]]);
    assert!(!store.checkpoint_due());
    drop(store);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_second_run_of_the_task_is_refused_while_the_first_holds_the_store() {
    let dir = scratch_dir("locked");
    let first = open(&dir);
    assert!(matches!(
        LocalStore::open(&dir, APP, TOPIC, 0),
        Err(StateError::Locked)
    ));
    drop(first);
    drop(open(&dir));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn crashes_anywhere_between_checkpoints_never_leave_wrong_state() {
    // Many short runs, each ending at a different point: with or without a
    // checkpoint, with the last commits applied or not.
    let dir = scratch_dir("runs");
    let mut log = Changelog::default();
    let mut next = 0u32;
    for run_number in 0..12u32 {
        let (mut store, restored) = restore_checked(&dir, &mut log);
        assert_eq!(restored.rebuilt, None, "run {run_number}");
        for transaction in 0..(run_number % 4 + 1) {
            let changes: Vec<(String, Option<String>)> = (0..3)
                .map(|i| {
                    next += 1;
                    let key = format!("k{}", (next * 7 + i) % 5);
                    let value = (!next.is_multiple_of(4)).then(|| next.to_string());
                    (key, value)
                })
                .collect();
            let changes: Vec<(&str, Option<&str>)> = changes
                .iter()
                .map(|(key, value)| (key.as_str(), value.as_deref()))
                .collect();
            let (applied, last) = log.commit(&changes);
            // Some commits never reach the store (a crash right after the
            // commit).
            if (run_number + transaction) % 3 != 2 {
                apply(&mut store, &applied, last);
            } else {
                break;
            }
            if transaction == 1 && run_number % 2 == 0 {
                store.checkpoint().unwrap();
            }
        }
        drop(store);
    }
    fs::remove_dir_all(&dir).unwrap();
}

/// S6: a store opened to checkpoint every 3 records is due after the third
/// applied since its checkpoint, and a restart then restores only what
/// came after it.
#[test]
fn s6_a_store_checkpoints_every_so_many_records_as_configured() {
    let dir = scratch_dir("every");
    let mut log = Changelog::default();
    history(&mut log);
    drop(restore_checked(&dir, &mut log));
    let mut store = LocalStore::open_checkpointing(&dir, APP, TOPIC, 0, 3).unwrap();
    let mut slots = FakeSlots::default();
    let end = log.end;
    restore(&mut store, &task(), end, |from| log.fetch(from), &mut slots).unwrap();
    let (applied, last) = log.commit(&[("a", Some("3")), ("d", Some("1"))]);
    store.apply(&applied, last).unwrap();
    assert!(!store.checkpoint_due(), "2 records of 3");
    let (applied, last) = log.commit(&[("e", Some("1"))]);
    store.apply(&applied, last).unwrap();
    assert!(store.checkpoint_due(), "3 records of 3");
    store.checkpoint().unwrap();
    drop(store);
    let (store, restored) = restore_checked(&dir, &mut log);
    assert_eq!(restored.from_changelog, 0, "{restored:?}");
    drop(store);
    fs::remove_dir_all(&dir).unwrap();
}
