//! Reading an application's committed topics back from a cluster, with
//! `read_committed`, for the log-only checks of [`parsley::audit`].

use std::collections::BTreeMap;

use crate::{Isolation, LiveClient, LiveError};
use parsley::Assembly;
use parsley::CommittedOffset;
use parsley::TopicContract;
use parsley::{App, ConsumedRecord, Tp};

use parsley::audit::{CommittedLogs, LogBounds};

/// Everything committed on the application's topics, and each stage group's
/// committed offsets (X6), keyed by (group, tp).
#[derive(Clone, Debug, Default)]
pub struct ReadBack {
    /// The committed records of every tp, in offset order.
    pub records: BTreeMap<Tp, Vec<ConsumedRecord>>,
    /// Per tp, the log start, where the read stopped and the log end.
    pub bounds: BTreeMap<Tp, LogBounds>,
    /// Each stage group's (`<app>-<stage>`) committed offset and checkpoint
    /// on each tp its tasks consume, where it has one, read before the logs:
    /// the cut of the audit (`parsley::audit`, *At a consistent cut*).
    pub committed: BTreeMap<(String, Tp), CommittedOffset>,
    /// The same offsets read again once every log was read: where they
    /// differ from [`ReadBack::committed`], the task committed while the
    /// logs were read.
    pub committed_after: BTreeMap<(String, Tp), CommittedOffset>,
}

impl ReadBack {
    /// The committed records of every partition of `topic`, in partition
    /// then offset order.
    pub fn topic(&self, topic: &str) -> Vec<(&Tp, &ConsumedRecord)> {
        self.records
            .iter()
            .filter(|(tp, _)| tp.topic.as_str() == topic)
            .flat_map(|(tp, records)| records.iter().map(move |record| (tp, record)))
            .collect()
    }

    /// The same, as the [`CommittedLogs`] the audit checks.
    pub fn to_logs(&self) -> CommittedLogs {
        let mut logs = CommittedLogs::new();
        for (tp, records) in &self.records {
            logs.insert_records(tp.clone(), records.clone());
        }
        for (tp, bounds) in &self.bounds {
            logs.insert_bounds(tp.clone(), *bounds);
        }
        for ((group, tp), committed) in &self.committed {
            logs.insert_committed(group, tp.clone(), committed.clone());
        }
        logs.insert_committed_after(self.committed_after.clone());
        logs
    }
}

/// Reads an application at a consistent cut: each stage group's committed
/// offsets on the tps the stage's tasks consume first, then every partition
/// of every topic the application touches up to its last stable offset, then
/// the offsets again. A committed offset read first never lies beyond a log
/// read after it, and everything committed with it is read; what the
/// application committed after it is beyond the cut, which
/// `parsley::audit` does not judge (its module docs, *At a consistent
/// cut*). The application may be running or stopped (the cut is then
/// everything).
pub async fn read_committed(
    client: &LiveClient,
    app: &App,
    assembly: &Assembly,
) -> Result<ReadBack, LiveError> {
    let mut read = ReadBack {
        committed: group_offsets(client, app, assembly).await?,
        ..ReadBack::default()
    };
    // librdkafka assigns partitions only to a consumer with a group id,
    // and looks its coordinator up: the first stage's, which the
    // application may describe (`acls`), so the audit needs no ACL of its
    // own. It is never joined and nothing is committed under it.
    let group = app
        .stages()
        .first()
        .map_or_else(|| format!("{}-audit", app.id()), |plan| plan.group.clone());
    let mut consumer = client.consumer(&group, Isolation::ReadCommitted)?;
    for contract in TopicContract::list(app) {
        let partitions = assembly.partitions_of(contract.name.as_str()).unwrap_or(0);
        for partition in 0..partitions {
            let tp = Tp::new(contract.name.clone(), partition);
            let start = client.watermarks(&tp).await?.low;
            let fetched = consumer.fetch(&tp, start).await?;
            read.bounds.insert(
                tp.clone(),
                LogBounds {
                    start,
                    read_until: fetched.next_offset,
                    end: fetched.high_watermark,
                },
            );
            read.records.insert(tp, fetched.records);
        }
    }
    // A transaction's commit reaches its partitions one marker at a time,
    // and a group's offsets may show it committed before every data
    // partition does: a log whose read stopped at an open transaction is
    // read on once every other was, so that what committed with the cut's
    // offsets is in (what committed since lies beyond the cut).
    for (tp, bounds) in read.bounds.iter_mut() {
        if bounds.read_until >= bounds.end {
            continue;
        }
        let fetched = consumer.fetch(tp, bounds.read_until).await?;
        bounds.read_until = bounds.read_until.max(fetched.next_offset);
        bounds.end = bounds.end.max(fetched.high_watermark);
        if let Some(records) = read.records.get_mut(tp) {
            records.extend(fetched.records);
        }
    }
    read.committed_after = group_offsets(client, app, assembly).await?;
    Ok(read)
}

/// Each stage group's committed offsets on the tps the stage's tasks
/// consume, where it has one.
async fn group_offsets(
    client: &LiveClient,
    app: &App,
    assembly: &Assembly,
) -> Result<BTreeMap<(String, Tp), CommittedOffset>, LiveError> {
    let mut offsets = BTreeMap::new();
    for plan in app.stages() {
        let consumed: Vec<Tp> = plan
            .consumed_topics()
            .into_iter()
            .flat_map(|topic| {
                let partitions = assembly.partitions_of(topic.as_str()).unwrap_or(0);
                (0..partitions).map(move |partition| Tp::new(topic.clone(), partition))
            })
            .collect();
        let group = client.consumer(&plan.group, Isolation::ReadCommitted)?;
        let committed = group.committed(&consumed).await?;
        for (tp, committed) in consumed.into_iter().zip(committed) {
            if let Some(committed) = committed {
                offsets.insert((plan.group.clone(), tp), committed);
            }
        }
    }
    Ok(offsets)
}
