//! A versioned table's state (J16, J17): each key's history of versions and
//! the task's observed stream time, with the two operations Kafka
//! Streams' versioned store (KIP-914) defines on them: a put that drops an
//! update older than the history retention, and an as-of lookup.
//!
//! Plain data, no codecs and no slots: the logic keeps it in the stage's
//! slots, and the unit tests read it directly.

use bytes::Bytes;

use crate::mutation::{self, Mutation};

/// One version of a key: its table record's timestamp, and its value bytes
/// (`None`: a tombstone, which is a version too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Version {
    pub timestamp: i64,
    pub value: Option<Bytes>,
}

/// A key's versions, oldest timestamp first, no two of one timestamp.
pub(crate) type History = Vec<Version>;

/// The task's clock (in its tick slot): the highest timestamp of a table
/// update the task put, Kafka Streams' `observedStreamTime` of the store.
/// `None` before the first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Clock {
    pub observed: Option<i64>,
}

impl Clock {
    /// J16: the oldest timestamp still within the history retention: an
    /// update below it is dropped, a lookup below it sees only the latest
    /// version.
    pub(crate) fn horizon(self, retention: i64) -> i64 {
        self.observed
            .map_or(i64::MIN, |observed| observed.saturating_sub(retention))
    }
}

/// What a put did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Put {
    /// The update is older than the retention: the history is unchanged
    /// (Kafka Streams' `PUT_RETURN_CODE_NOT_PUT`).
    Expired,
    /// The key's new history (`None`: nothing left worth keeping) and the
    /// clock after the put.
    Put {
        history: Option<History>,
        clock: Clock,
    },
}

/// J16: puts the version `(timestamp, value)` into `history` under `clock`
/// with `retention` (milliseconds). A version of a timestamp already
/// present replaces it; versions no lookup within the retention can reach
/// any more are dropped.
pub(crate) fn put(
    history: &[Version],
    clock: Clock,
    retention: i64,
    timestamp: i64,
    value: Option<Bytes>,
) -> Put {
    // Kafka Streams checks against the stream time before this update.
    if timestamp < clock.horizon(retention) {
        return Put::Expired;
    }
    let clock = Clock {
        observed: Some(clock.observed.map_or(timestamp, |seen| seen.max(timestamp))),
    };
    let mut history = history.to_vec();
    match history.binary_search_by_key(&timestamp, |version| version.timestamp) {
        Ok(at) => history[at].value = value,
        Err(at) => history.insert(at, Version { timestamp, value }),
    }
    let history = pruned(history, clock.horizon(retention));
    Put::Put { history, clock }
}

/// The versions a lookup can still reach once the horizon is `horizon`: the
/// one in force at the horizon and every later one. Every later put is at
/// or above the horizon, so what is dropped is never needed again; and a
/// tombstone in force at the horizon answers every lookup as no version
/// does, so it goes too.
fn pruned(mut history: History, horizon: i64) -> Option<History> {
    let in_force = history
        .iter()
        .rposition(|version| version.timestamp <= horizon);
    if let Some(in_force) = in_force {
        let end = match history[in_force].value {
            Some(_) => in_force,
            None => in_force + 1,
        };
        history.drain(..end);
    }
    (!history.is_empty()).then_some(history)
}

/// J17: the version in force for the key at `as_of`, when it is a value
/// (`None`: no row): the latest version at or below `as_of`, equal
/// timestamps included. A lookup below the horizon sees only the key's
/// latest version, when it is a value at or below `as_of` (Kafka Streams
/// keeps the latest version of a key whatever its age, and the others for
/// the retention only).
pub(crate) fn as_of(
    history: &[Version],
    clock: Clock,
    retention: i64,
    as_of: i64,
) -> Option<&Version> {
    let found = if as_of < clock.horizon(retention) {
        history.last().filter(|latest| latest.timestamp <= as_of)
    } else if mutation::active(Mutation::VersionedJoinTakesLatest) {
        // Planted bug (I13): the latest version whatever its timestamp.
        history.last()
    } else {
        // Planted bug (I13): a version of the record's own millisecond is
        // left out.
        let excludes_equal = mutation::active(Mutation::VersionedJoinExcludesEqual);
        history.iter().rev().find(|version| match excludes_equal {
            true => version.timestamp < as_of,
            false => version.timestamp <= as_of,
        })
    };
    found.filter(|version| version.value.is_some())
}
