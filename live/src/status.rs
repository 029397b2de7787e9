//! Watching a live application from outside: whether its tasks have
//! delivered and committed everything visible, who runs each task and in
//! what state ([`task_owners`]), and what state and keyed outputs its
//! committed logs hold.
//!
//! Who runs a task is read from the instances' group `<app>.instances`
//! (Kafka's DescribeGroups): partition `i` of its topic stands for the
//! `i`-th of the application's tasks, and the member assigned it is the
//! owner. What state the task is in is what its owner last reported, as the
//! metadata of the group's committed offset on that partition
//! ([`TaskReport`]). Instances with a static share (`--instance i/n`) do not
//! join the group: their tasks show no owner.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::instance::TaskReport;
use crate::{membership_topic, Isolation, LiveClient, LiveConsumer, LiveError};
use bytes::Bytes;
use parsley::Assembly;
use parsley::SlotKey;
use parsley::StagePlan;
use parsley::TaskId;
use parsley::{App, Tp};

use parsley::audit::CommittedLogs;
use parsley::header::is_progress;
use parsley::ConsumedRecord;

/// The non-tick tps each stage's tasks consume, with the stage's group (X6).
fn source_tps<'a>(app: &'a App, assembly: &Assembly) -> Vec<(&'a str, Vec<Tp>)> {
    app.stages()
        .iter()
        .map(|plan| (plan.group.as_str(), stage_source_tps(plan, assembly)))
        .collect()
}

/// Every partition of a stage's declared sources.
fn stage_source_tps(plan: &StagePlan, assembly: &Assembly) -> Vec<Tp> {
    let mut tps = Vec::new();
    for source in plan.stage.sources() {
        let partitions = assembly.partitions_of(source.name.as_str()).unwrap_or(0);
        tps.extend((0..partitions).map(|partition| Tp::new(source.name.clone(), partition)));
    }
    tps
}

/// True when every record committed on a source tp when the check began has
/// been delivered and committed by the time it ends. Records written during
/// the check (a stage's ticks keep coming) do not count.
pub async fn caught_up(
    client: &LiveClient,
    app: &App,
    assembly: &Assembly,
) -> Result<bool, LiveError> {
    let stages = source_tps(app, assembly);
    let mut stable = Vec::new();
    for tp in stages.iter().flat_map(|(_, tps)| tps) {
        stable.push(client.watermarks(tp).await?.last_stable_offset);
    }
    let mut stable = stable.into_iter();
    for (group, tps) in &stages {
        // A read_committed lookup of committed offsets waits while any
        // transaction holding the group's offsets is open (KIP-447), which a
        // running application nearly always has; a read_uncommitted one
        // answers the last committed offsets at once.
        let offsets = client.consumer(group, Isolation::ReadUncommitted)?;
        let committed = offsets.committed(tps).await?;
        let mut consumer = client.consumer(group, Isolation::ReadCommitted)?;
        for (tp, committed) in tps.iter().zip(committed) {
            let stable = stable.next().expect("one stable offset per tp");
            let from = committed.map_or(0, |committed| committed.offset);
            if from >= stable {
                continue;
            }
            let fetched = consumer.fetch(tp, from).await?;
            if fetched.records.iter().any(|record| record.offset < stable) {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Waits until [`caught_up`] holds twice in a row (so records written from
/// inputs delivered during the first check are delivered too), polling;
/// `false` if `timeout` passes first. A failed check counts as "not yet"
/// (a broker that just restarted answers "not coordinator" for a while)
/// until the timeout, which then returns the last error.
pub async fn wait_caught_up(
    client: &LiveClient,
    app: &App,
    assembly: &Assembly,
    timeout: Duration,
) -> Result<bool, LiveError> {
    let deadline = Instant::now() + timeout;
    let mut in_a_row = 0;
    loop {
        match caught_up(client, app, assembly).await {
            Ok(true) => {
                in_a_row += 1;
                if in_a_row == 2 {
                    return Ok(true);
                }
                continue;
            }
            Ok(false) => {}
            Err(error) if Instant::now() >= deadline => return Err(error),
            Err(_) => {}
        }
        in_a_row = 0;
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The committed state of every key slot: the last changelog value per
/// (changelog topic, key), deletions removed. Tick slots are left out: they
/// follow the wall clock.
pub fn final_state(logs: &CommittedLogs, app: &App) -> BTreeMap<(String, Bytes), Bytes> {
    let mut state = BTreeMap::new();
    for plan in app.stages() {
        let Some(changelog) = &plan.changelog else {
            continue;
        };
        for tp in logs.tps().filter(|tp| tp.topic == *changelog) {
            for record in logs.records(tp) {
                let Some(key) = &record.data.key else {
                    continue;
                };
                if matches!(SlotKey::from_changelog_key(key), Ok(SlotKey::Tick)) {
                    continue;
                }
                let slot = (changelog.to_string(), key.clone());
                match &record.data.value {
                    Some(value) => state.insert(slot, value.clone()),
                    None => state.remove(&slot),
                };
            }
        }
    }
    state
}

/// The committed keyed outputs of every sink, per (topic, key), in order.
/// Keyless records are left out: the examples emit their ticks without a
/// key, and the wall clock decides how many there are.
pub fn keyed_outputs(logs: &CommittedLogs, app: &App) -> BTreeMap<(String, Bytes), Vec<Bytes>> {
    let mut outputs: BTreeMap<(String, Bytes), Vec<Bytes>> = BTreeMap::new();
    for plan in app.stages() {
        for sink in plan.stage.sinks() {
            for tp in logs.tps().filter(|tp| tp.topic == sink.name) {
                for record in logs.records(tp) {
                    let Some(key) = &record.data.key else {
                        continue;
                    };
                    outputs
                        .entry((sink.name.to_string(), key.clone()))
                        .or_default()
                        .push(record.data.value.clone().unwrap_or_default());
                }
            }
        }
    }
    outputs
}

/// Beyond this many offsets between a committed position and the log end,
/// [`task_status`] reports the gap (markers included) instead of counting
/// the records one by one.
pub const COUNTED_LAG_MAX: u64 = 10_000;

/// One consumed tp of a task, as the cluster shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TpStatus {
    /// The tp.
    pub tp: Tp,
    /// The stage's committed position on it, `None` before its first commit.
    pub committed: Option<u64>,
    /// Its last stable offset: what a `read_committed` consumer can reach.
    pub stable_end: u64,
    /// Committed records between the position and the stable end: exact
    /// when the gap is at most `COUNTED_LAG_MAX` offsets, else the gap.
    pub lag: u64,
    /// Whether `lag` was counted record by record.
    pub exact: bool,
}

/// A task's position, lag and state, read from the cluster alone (group
/// offsets and log ends), whether or not any instance runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskStatus {
    /// The stage.
    pub stage: String,
    /// The task's partition.
    pub partition: u32,
    /// Each source tp it consumes.
    pub tps: Vec<TpStatus>,
}

impl TaskStatus {
    /// The task's lag over its tps.
    pub fn lag(&self) -> u64 {
        self.tps.iter().map(|tp| tp.lag).sum()
    }

    /// "caught up" or "behind".
    pub fn state(&self) -> &'static str {
        if self.lag() == 0 {
            "caught up"
        } else {
            "behind"
        }
    }
}

/// One tp's last stable offset and the committed records between
/// `committed` (the group's position, `None` before its first commit) and
/// it: counted with `reader` (a `read_committed` consumer) when the gap is
/// at most [`COUNTED_LAG_MAX`] offsets, so markers do not count (`exact`);
/// the gap beyond. Shared by `status` and the runtime's lag figure.
pub(crate) async fn tp_lag(
    client: &LiveClient,
    reader: &mut LiveConsumer,
    tp: &Tp,
    committed: Option<u64>,
) -> Result<(u64, u64, bool), LiveError> {
    let stable_end = client.watermarks(tp).await?.last_stable_offset;
    let from = committed.unwrap_or(0);
    let gap = stable_end.saturating_sub(from);
    if gap == 0 || gap > COUNTED_LAG_MAX {
        return Ok((stable_end, gap, gap == 0));
    }
    let fetched = reader.fetch(tp, from).await?;
    Ok((
        stable_end,
        records_behind(&fetched.records, stable_end),
        true,
    ))
}

/// The records below `stable_end` a task has yet to deliver. Progress
/// records (V4) are left out: no Parsley reader delivers one, like a
/// transaction marker, and a task upstream may write one at its final commit,
/// so a task stopped cleanly beside it would otherwise read "behind" with
/// nothing left to deliver. A view whose only pending record is one has
/// released every epoch it committed (V5): the record raises its frontier
/// and nothing else.
fn records_behind(records: &[ConsumedRecord], stable_end: u64) -> u64 {
    records
        .iter()
        .filter(|record| record.offset < stable_end && !is_progress(&record.data))
        .count() as u64
}

/// Every task's status: for task `p` of each stage, partition `p` of each
/// source, the stage group's committed offset (read uncommitted, so an open
/// transaction does not hold the answer back), the last stable offset, and
/// the committed records in between.
pub async fn task_status(
    client: &LiveClient,
    app: &App,
    assembly: &Assembly,
) -> Result<Vec<TaskStatus>, LiveError> {
    let mut statuses = Vec::new();
    for plan in app.stages() {
        let tps = stage_source_tps(plan, assembly);
        let offsets = client.consumer(&plan.group, Isolation::ReadUncommitted)?;
        let committed = offsets.committed(&tps).await?;
        let mut reader = client.consumer(&plan.group, Isolation::ReadCommitted)?;
        let tasks = assembly.tasks_of(plan.name()).unwrap_or(0);
        for partition in 0..tasks {
            let mut task = TaskStatus {
                stage: plan.name().to_string(),
                partition,
                tps: Vec::new(),
            };
            for (tp, committed) in tps.iter().zip(&committed) {
                if tp.partition != partition {
                    continue;
                }
                let from = committed.as_ref().map(|committed| committed.offset);
                let (stable_end, lag, exact) = tp_lag(client, &mut reader, tp, from).await?;
                task.tps.push(TpStatus {
                    tp: tp.clone(),
                    committed: committed.as_ref().map(|committed| committed.offset),
                    stable_end,
                    lag,
                    exact,
                });
            }
            statuses.push(task);
        }
    }
    Ok(statuses)
}

/// A live member of the instances' group, as `status` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The instance's name (`<host>-<pid>`), from its client id's
    /// `instance=` part, or the whole client id of a member that is no
    /// Parsley instance.
    pub instance: String,
    /// Its `client.id`.
    pub client_id: String,
    /// The host it connects from, as the broker sees it.
    pub client_host: String,
}

/// Who runs a task and what it last said of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskOwner {
    /// The task.
    pub task: TaskId,
    /// The member of `<app>.instances` the group assigns it to; `None`
    /// when no member holds it (no instance runs with group membership, the
    /// group is rebalancing, or the instances have static shares).
    pub owner: Option<Owner>,
    /// The last report of the task's state, by whichever instance ran it
    /// last with group membership; `None` if none ever did.
    pub report: Option<TaskReport>,
}

impl TaskOwner {
    /// The owner's instance name, or `-`.
    pub fn owner_name(&self) -> &str {
        self.owner
            .as_ref()
            .map_or("-", |owner| owner.instance.as_str())
    }

    /// The reported state (`running`, `restoring`, …); without a report,
    /// `assigned` when a member holds the task and `unowned` when none does.
    pub fn state(&self) -> &str {
        match (&self.report, &self.owner) {
            (Some(report), _) => report.state.as_str(),
            (None, Some(_)) => "assigned",
            (None, None) => "unowned",
        }
    }
}

/// The instance name in a Parsley member's client id
/// (`parsley;app=…;instance=<host>-<pid>`), or the client id itself.
fn instance_of(client_id: &str) -> &str {
    client_id
        .split(';')
        .find_map(|part| part.strip_prefix("instance="))
        .unwrap_or(client_id)
}

/// Each of `assembly`'s tasks, in [`Assembly::task_ids`] order, with its
/// owner in the group `<app>.instances` and its last reported state. An
/// application that never ran with group membership has neither.
pub async fn task_owners(
    client: &LiveClient,
    app: &App,
    assembly: &Assembly,
) -> Result<Vec<TaskOwner>, LiveError> {
    let tasks = assembly.task_ids();
    let topic = membership_topic(app.id());
    let mut owners: Vec<TaskOwner> = tasks
        .iter()
        .map(|task| TaskOwner {
            task: task.clone(),
            owner: None,
            report: None,
        })
        .collect();
    let Some(partitions) = client.partitions(&topic).await? else {
        return Ok(owners);
    };
    // A topic sized for another set of tasks says nothing of these.
    if usize::try_from(partitions).ok() != Some(tasks.len()) {
        return Ok(owners);
    }
    for member in client.group_members(&topic).await? {
        let Some(Ok(assignment)) = &member.assignment else {
            continue;
        };
        for (assigned, partitions) in assignment {
            if *assigned != topic {
                continue;
            }
            for partition in partitions {
                if let Some(task) = usize::try_from(*partition)
                    .ok()
                    .and_then(|index| owners.get_mut(index))
                {
                    task.owner = Some(Owner {
                        instance: instance_of(&member.client_id).to_owned(),
                        client_id: member.client_id.clone(),
                        client_host: member.client_host.clone(),
                    });
                }
            }
        }
    }
    let tps: Vec<Tp> = (0..partitions)
        .map(|partition| Tp::new(topic.clone(), partition))
        .collect();
    let reports = client
        .consumer(&topic, Isolation::ReadUncommitted)?
        .committed(&tps)
        .await?;
    for (task, committed) in owners.iter_mut().zip(reports) {
        task.report =
            committed.and_then(|committed| TaskReport::from_json(&committed.metadata).ok());
    }
    Ok(owners)
}

#[cfg(test)]
mod tests {
    use super::*;
    use parsley::header::PROGRESS_HEADER;
    use parsley::{Header, RecordData};

    /// A keyless record at `offset`: a progress record (V4's header, no
    /// value) or one with a value.
    fn record(offset: u64, progress: bool) -> ConsumedRecord {
        let (value, headers) = match progress {
            true => (
                None,
                vec![Header {
                    name: PROGRESS_HEADER.into(),
                    value: Bytes::from_static(b"7 0 upstream"),
                }],
            ),
            false => (Some(Bytes::from_static(b"v")), Vec::new()),
        };
        let data = RecordData {
            key: None,
            value,
            headers,
            timestamp: 0,
        };
        ConsumedRecord { offset, data }
    }

    /// V4: a progress record left behind a cleanly stopped task (its
    /// upstream's final commit wrote it) is not lag; a data record is, and
    /// nothing at or past the stable end counts.
    #[test]
    fn v4_a_pending_progress_record_is_not_lag() {
        assert_eq!(records_behind(&[record(10, true)], 11), 0);
        assert_eq!(records_behind(&[record(10, false)], 11), 1);
        let mixed = [record(10, false), record(11, true), record(12, false)];
        assert_eq!(records_behind(&mixed, 13), 2);
        assert_eq!(records_behind(&mixed, 12), 1);
        let task = |lag| TaskStatus {
            stage: "view".into(),
            partition: 0,
            tps: vec![TpStatus {
                tp: Tp::new("upstream-out", 0),
                committed: Some(10),
                stable_end: 11,
                lag,
                exact: true,
            }],
        };
        assert_eq!(
            task(records_behind(&[record(10, true)], 11)).state(),
            "caught up"
        );
        assert_eq!(
            task(records_behind(&[record(10, false)], 11)).state(),
            "behind"
        );
    }

    #[test]
    fn an_owner_is_named_by_its_instance() {
        assert_eq!(
            instance_of("parsley;app=shop;topology=00ff;stages=a x4;instance=host-1-42"),
            "host-1-42"
        );
        assert_eq!(instance_of("rdkafka"), "rdkafka");
        let unowned = TaskOwner {
            task: TaskId {
                stage: "a".into(),
                partition: 0,
            },
            owner: None,
            report: None,
        };
        assert_eq!((unowned.owner_name(), unowned.state()), ("-", "unowned"));
    }
}
