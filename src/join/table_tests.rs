//! J8, J9 through the stage's public replay: a table–table join's logic
//! run over the slots kept here, as a checker would keep them.

use super::tests::refused_with;
use super::*;
use crate::stage::replaying::Replay;
use crate::{CompositionError, Emission, Json, Parsley, Utf8, I64};

fn balances() -> Topic<String, i64> {
    Topic::with_codecs("balances", Utf8, I64)
}

fn limits() -> Topic<String, i64> {
    Topic::with_codecs("limits", Utf8, I64)
}

fn view() -> Topic<String, String> {
    Topic::with_codecs("view", Utf8, Utf8)
}

fn side(value: Option<&i64>) -> String {
    value.map_or("none".to_string(), i64::to_string)
}

fn joined(kind: TableJoinKind) -> Stage {
    let join = Stage::named("view").join(Join::table_table(&balances(), &limits()));
    let builder = match kind {
        TableJoinKind::Inner => join.inner(|_, balance, limit| format!("{balance}/{limit}")),
        TableJoinKind::Left => join.left(|_, balance, limit| format!("{balance}/{}", side(limit))),
        TableJoinKind::Outer => {
            join.outer(|_, balance, limit| format!("{}/{}", side(balance), side(limit)))
        }
    };
    builder.into(&view()).build()
}

/// When every record is delivered.
const AT: i64 = 1_000;

/// The two tables' records, delivered at [`AT`].
trait Sides {
    fn left(&mut self, key: &str, value: Option<i64>) -> Vec<Emission>;

    fn right(&mut self, key: &str, value: Option<i64>) -> Vec<Emission>;
}

impl Sides for Replay {
    fn left(&mut self, key: &str, value: Option<i64>) -> Vec<Emission> {
        self.deliver("balances", Some(key), value, AT).unwrap()
    }

    fn right(&mut self, key: &str, value: Option<i64>) -> Vec<Emission> {
        self.deliver("limits", Some(key), value, AT).unwrap()
    }
}

fn result(key: &str, value: &str) -> Vec<Emission> {
    vec![view().send(key.to_string(), value.to_string())]
}

fn tombstone(key: &str) -> Vec<Emission> {
    vec![view().tombstone(key.to_string())]
}

/// J8: an inner join writes a key's result when it has both sides, on an
/// update of either, and the latest value of each side.
#[test]
fn j8_an_update_of_either_side_rewrites_the_inner_result() {
    let mut join = Replay::of(joined(TableJoinKind::Inner));
    assert_eq!(join.left("alice", Some(10)), vec![], "no right side yet");
    assert_eq!(join.right("alice", Some(100)), result("alice", "10/100"));
    assert_eq!(join.left("alice", Some(20)), result("alice", "20/100"));
    assert_eq!(join.right("alice", Some(150)), result("alice", "20/150"));
    assert_eq!(join.right("bob", Some(5)), vec![], "bob has no left side");
    // The same value again is an update, written again (as Kafka Streams).
    assert_eq!(join.right("alice", Some(150)), result("alice", "20/150"));
}

/// J8: a deletion that removes the inner result writes a tombstone once;
/// a tombstone for a side without a value changes nothing and writes
/// nothing, and neither does deleting a side of a key without a result.
#[test]
fn j8_a_deletion_removing_the_result_writes_one_tombstone() {
    let mut join = Replay::of(joined(TableJoinKind::Inner));
    join.left("alice", Some(10));
    join.right("alice", Some(100));
    assert_eq!(join.left("alice", None), tombstone("alice"));
    assert_eq!(join.left("alice", None), vec![], "already deleted");
    assert_eq!(join.right("alice", None), vec![], "no result to remove");
    assert!(join.slots.is_empty(), "a key without sides has no slot");
    join.left("carol", Some(1));
    assert_eq!(join.left("carol", None), vec![], "carol never had a result");
    assert_eq!(join.right("dave", None), vec![]);
    assert!(join.slots.is_empty());
}

/// J8: a left join has a result while the key has a left side, with `None`
/// for a missing right side; losing the right side rewrites it, losing the
/// left side writes a tombstone.
#[test]
fn j8_a_left_join_follows_its_left_side() {
    let mut join = Replay::of(joined(TableJoinKind::Left));
    assert_eq!(join.right("alice", Some(100)), vec![], "no left side");
    assert_eq!(join.left("alice", Some(10)), result("alice", "10/100"));
    assert_eq!(join.right("alice", None), result("alice", "10/none"));
    assert_eq!(join.right("alice", None), vec![], "already deleted");
    assert_eq!(join.left("alice", None), tombstone("alice"));
    assert_eq!(join.left("bob", Some(7)), result("bob", "7/none"));
}

/// J8: an outer join has a result while the key has either side; the
/// tombstone comes when the last side goes.
#[test]
fn j8_an_outer_join_writes_a_tombstone_when_the_last_side_goes() {
    let mut join = Replay::of(joined(TableJoinKind::Outer));
    assert_eq!(join.right("alice", Some(100)), result("alice", "none/100"));
    assert_eq!(join.left("alice", Some(10)), result("alice", "10/100"));
    assert_eq!(join.right("alice", None), result("alice", "10/none"));
    assert_eq!(join.left("alice", None), tombstone("alice"));
    assert!(join.slots.is_empty());
    assert_eq!(join.left("alice", None), vec![]);
}

/// J8: the sides survive a restart: they are the slot's, on the
/// changelog, and decode to the same join.
#[test]
fn j8_the_sides_are_state() {
    let mut join = Replay::of(joined(TableJoinKind::Outer));
    join.left("alice", Some(10));
    join.right("alice", Some(100));
    let kept = join.slots.clone();
    let mut restarted = Replay::of(joined(TableJoinKind::Outer));
    restarted.slots = kept;
    restarted.offset = join.offset;
    assert_eq!(restarted.left("alice", None), result("alice", "none/100"));
}

/// J9: a record without a key is refused, naming J9.
#[test]
fn j9_a_record_without_a_key_is_refused() {
    let mut join = Replay::of(joined(TableJoinKind::Inner));
    let refused = join.deliver("balances", None, Some(1), AT).unwrap_err();
    assert!(refused.to_string().contains("J9"), "{refused}");
}

/// J9: a joiner's error refuses the record (X5).
#[test]
fn j9_a_failing_joiner_refuses_the_record() {
    let stage = Stage::named("view")
        .join(Join::table_table(&balances(), &limits()))
        .inner(|_, balance: &i64, limit: &i64| match balance > limit {
            true => Err(format!("balance {balance} over limit {limit}")),
            false => Ok((limit - balance).to_string()),
        })
        .into(&view())
        .build();
    let mut join = Replay::of(stage);
    join.right("alice", Some(5));
    let refused = join
        .deliver("balances", Some("alice"), Some(9), AT)
        .unwrap_err();
    assert!(refused.to_string().contains("over limit"), "{refused}");
}

/// J9: the build refuses a join without an output, over one topic as both
/// sides, and with sides whose key codecs differ.
#[test]
fn j9_the_build_refuses_impossible_joins() {
    let no_output = Stage::named("view")
        .join(Join::table_table(&balances(), &limits()))
        .inner(|_, a: &i64, b: &i64| a + b)
        .build();
    let same = Stage::named("same")
        .join(Join::table_table(&balances(), &balances()))
        .inner(|_, a: &i64, b: &i64| a + b)
        .into(&balances())
        .build();
    let json_keys = Topic::<String, i64>::with_codecs("json-limits", Json, I64);
    let codecs = Stage::named("codecs")
        .join(Join::table_table(&balances(), &json_keys))
        .inner(|_, a: &i64, b: &i64| a + b)
        .into(&Topic::with_codecs("sums", Utf8, I64))
        .build();
    for (stage, reason) in [
        (no_output, "no output topic"),
        (same, "one topic as both"),
        (codecs, "different codecs"),
    ] {
        let error = Parsley::named("bank").stage(stage).build().unwrap_err();
        assert!(
            matches!(&error, CompositionError::ImpossibleOperator { rules: "J9", reason: found, .. } if found.contains(reason)),
            "{error}"
        );
        assert!(error.to_string().contains("J9"), "{error}");
    }
}

/// J4: assembly refuses tables that are not co-partitioned, naming both
/// and the fix.
#[test]
fn j4_assembly_refuses_tables_not_co_partitioned() {
    let app = Parsley::named("bank")
        .stage(joined(TableJoinKind::Left))
        .build()
        .unwrap();
    let error = refused_with(&app, "limits", 2);
    assert!(
        error.contains("\"limits\"")
            && error.contains("co-partitioned with its left table balances (J4)")
            && error.contains("re-key"),
        "{error}"
    );
}

/// J8: a slot round-trips through its changelog bytes, and bytes that are
/// not a slot are refused, naming what was wrong.
#[test]
fn j8_slots_round_trip_and_bad_bytes_are_refused() {
    use super::table_logic::{Pair, PairCodec};
    use crate::codec::Codec;
    let value = |text: &str| Some(bytes::Bytes::copy_from_slice(text.as_bytes()));
    for pair in [
        Pair {
            left: value("a"),
            right: None,
        },
        Pair {
            left: None,
            right: value("bc"),
        },
        Pair {
            left: value(""),
            right: value("xyz"),
        },
    ] {
        let bytes = PairCodec.encode(&pair).unwrap();
        assert_eq!(PairCodec.decode(&bytes).unwrap(), pair);
    }
    for (bad, says) in [
        (&[][..], "empty"),
        (&[4][..], "flags byte 4"),
        (&[1, 0, 0][..], "length needs 4 bytes"),
        (&[1, 0, 0, 0, 5, 1][..], "needs 5 bytes"),
        (&[0, 9][..], "after the sides"),
    ] {
        let error = PairCodec.decode(bad).unwrap_err().to_string();
        assert!(error.contains(says), "{bad:?}: {error}");
    }
}
