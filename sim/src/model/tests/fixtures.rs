//! Helpers shared by the model tests: records, tps, a two-topic cluster and
//! views of a partition's log.

use bytes::Bytes;
use parsley::{RecordData, Tp};

use crate::model::*;

pub(super) fn rec(value: &str) -> RecordData {
    RecordData {
        key: None,
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Vec::new(),
        timestamp: 0,
    }
}

pub(super) fn tp(topic: &str, partition: u32) -> Tp {
    Tp::new(topic, partition)
}

/// A cluster with `in` (1 partition) and `out` (2 partitions).
pub(super) fn cluster() -> Cluster {
    let mut cluster = Cluster::new();
    cluster.create_topic("in", 1).unwrap();
    cluster.create_topic("out", 2).unwrap();
    cluster
}

pub(super) fn fetch(cluster: &Cluster, tp: &Tp, from: u64, isolation: Isolation) -> Fetch {
    cluster.fetch(tp, from, usize::MAX, isolation).unwrap()
}

pub(super) fn committed_view(cluster: &Cluster, tp: &Tp) -> Vec<(u64, String)> {
    offsets_and_values(&fetch(cluster, tp, 0, Isolation::ReadCommitted))
}

pub(super) fn offsets_and_values(fetch: &Fetch) -> Vec<(u64, String)> {
    fetch
        .records
        .iter()
        .map(|r| {
            let value = r.data.value.as_deref().unwrap_or_default();
            (r.offset, String::from_utf8_lossy(value).into_owned())
        })
        .collect()
}

pub(super) fn kinds(cluster: &Cluster, tp: &Tp) -> Vec<&'static str> {
    cluster
        .entries(tp)
        .unwrap()
        .iter()
        .map(|entry| match entry {
            Entry::Data {
                transactional: false,
                ..
            } => "plain",
            Entry::Data { .. } => "txn",
            Entry::Control {
                kind: ControlKind::Commit,
                ..
            } => "COMMIT",
            Entry::Control {
                kind: ControlKind::Abort,
                ..
            } => "ABORT",
        })
        .collect()
}

pub(super) fn pairs(items: &[(u64, &str)]) -> Vec<(u64, String)> {
    items.iter().map(|&(o, v)| (o, v.to_owned())).collect()
}
