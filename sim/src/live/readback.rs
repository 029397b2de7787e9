//! Reading an application's committed topics back from a cluster, with
//! `read_committed`, for the log-only checks of [`crate::audit`].

use std::collections::BTreeMap;

use parsley::assembly::Assembly;
use parsley::live::{Isolation, LiveClient, LiveError};
use parsley::probe::ContractProbes;
use parsley::task::CommittedOffset;
use parsley::{App, ConsumedRecord, Tp};

use crate::audit::{CommittedLogs, LogBounds};

/// Everything committed on the application's topics, and its group's
/// committed offsets.
#[derive(Clone, Debug, Default)]
pub struct ReadBack {
    pub records: BTreeMap<Tp, Vec<ConsumedRecord>>,
    pub bounds: BTreeMap<Tp, LogBounds>,
    pub committed: BTreeMap<Tp, CommittedOffset>,
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

    pub fn to_logs(&self) -> CommittedLogs {
        let mut logs = CommittedLogs::new();
        for (tp, records) in &self.records {
            logs.insert_records(tp.clone(), records.clone());
        }
        for (tp, bounds) in &self.bounds {
            logs.insert_bounds(tp.clone(), *bounds);
        }
        for (tp, committed) in &self.committed {
            logs.insert_committed(tp.clone(), committed.clone());
        }
        logs
    }
}

/// Reads every partition of every topic the application touches up to its
/// last stable offset, and the group's committed offsets on the tps its
/// tasks consume. Run it once the application has stopped, or it reads a
/// moment of a moving target.
pub async fn read_committed(
    client: &LiveClient,
    app: &App,
    assembly: &Assembly,
) -> Result<ReadBack, LiveError> {
    let mut read = ReadBack::default();
    let mut consumer = client.consumer(app.group_id(), Isolation::ReadCommitted)?;
    let mut consumed: Vec<Tp> = Vec::new();
    for contract in ContractProbes::probe(app) {
        let partitions = assembly.partitions_of(contract.name.as_str()).unwrap_or(0);
        let consumed_here = contract.roles.iter().any(|role| {
            matches!(
                role,
                parsley::probe::Role::Source { .. } | parsley::probe::Role::Ticks { .. }
            )
        });
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
            read.records.insert(tp.clone(), fetched.records);
            if consumed_here {
                consumed.push(tp);
            }
        }
    }
    let committed = consumer.committed(&consumed).await?;
    for (tp, committed) in consumed.into_iter().zip(committed) {
        if let Some(committed) = committed {
            read.committed.insert(tp, committed);
        }
    }
    Ok(read)
}
