//! The log-only audit (`parsley::audit`) over the in-memory model: the
//! committed logs a `read_committed` consumer of the model reads, for the
//! checks that committed topics alone can show.

pub use parsley::audit::*;
use parsley::Assembly;
use parsley::{App, Tp};

use crate::model::{Cluster, Isolation};

/// Reads every topic of the application (sources, sinks, tick topics,
/// changelogs: every partition the assembly lists) from the model with
/// `read_committed`, and each stage group's committed offsets on the tps
/// the stage consumes.
///
/// ```
/// use parsley::{assemble, Parsley, Stage, Topic};
/// use parsley_sim::audit::{audit, committed_logs};
/// use parsley_sim::TestDriver;
///
/// let orders: Topic<String, i64> = Topic::new("orders");
/// let copies: Topic<String, i64> = Topic::new("copies");
/// let out = copies.clone();
/// let copy = Stage::named("copy")
///     .on(&orders, move |order| vec![out.send(order.key().cloned(), *order.value())])
///     .into(&copies)
///     .build();
/// let app = Parsley::named("shop").stage(copy).build()?;
/// let driver = TestDriver::new(&app)?;
/// driver.input(&orders)?.pipe("alice".to_string(), 7)?;
///
/// // Read back what was committed, as a `read_committed` consumer would ...
/// let cluster = driver.cluster();
/// let assembly = assemble(&app, &*cluster)?;
/// let logs = committed_logs(&cluster, &app, &assembly);
/// // ... and check it: no violation of I1, I3-I7, I10.
/// let report = audit(&app, &assembly, &logs);
/// assert!(report.is_clean(), "{report}");
/// assert_eq!(report.summary.outputs_matched, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn committed_logs(cluster: &Cluster, app: &App, assembly: &Assembly) -> CommittedLogs {
    let mut logs = read_logs(cluster, assembly);
    for ((group, tp), committed) in group_offsets(cluster, app, assembly) {
        logs.insert_committed(&group, tp, committed);
    }
    logs
}

/// Each stage group's committed offsets now, on the tps the stage consumes:
/// the cut of an audit of a running application, read before its logs
/// (`parsley::audit`'s module docs, *At a consistent cut*).
pub fn group_offsets(cluster: &Cluster, app: &App, assembly: &Assembly) -> GroupOffsets {
    let mut offsets = GroupOffsets::new();
    for plan in app.stages() {
        for topic in plan.consumed_topics() {
            let partitions = assembly.partitions_of(topic.as_str()).unwrap_or(0);
            for partition in 0..partitions {
                let tp = Tp::new(topic.clone(), partition);
                if let Some(committed) = cluster.committed(&plan.group, &tp) {
                    offsets.insert((plan.group.clone(), tp), committed);
                }
            }
        }
    }
    offsets
}

/// What an audit of a running application reads, as the live runtime's
/// `read_committed` does: the logs now, judged at `cut`, the offsets read
/// earlier with [`group_offsets`] (the application may have run on since),
/// and the offsets now, read after the logs, to tell which tasks moved.
///
/// ```
/// use parsley::{assemble, Parsley, Stage, Topic};
/// use parsley_sim::audit::{audit, committed_logs_at_cut, group_offsets};
/// use parsley_sim::TestDriver;
///
/// let orders: Topic<String, i64> = Topic::new("orders");
/// let copies: Topic<String, i64> = Topic::new("copies");
/// let out = copies.clone();
/// let copy = Stage::named("copy")
///     .on(&orders, move |order| vec![out.send(order.key().cloned(), *order.value())])
///     .into(&copies)
///     .build();
/// let app = Parsley::named("shop").stage(copy).build()?;
/// let driver = TestDriver::new(&app)?;
/// let input = driver.input(&orders)?;
/// input.pipe("alice".to_string(), 7)?;
/// let assembly = assemble(&app, &*driver.cluster())?;
/// // The cut: the offsets, read first ...
/// let cut = group_offsets(&driver.cluster(), &app, &assembly);
/// // ... the application runs on ...
/// input.pipe("bob".to_string(), 8)?;
/// // ... and the logs, read after: bob's copy lies beyond the cut.
/// let logs = committed_logs_at_cut(&driver.cluster(), &app, &assembly, cut);
/// let report = audit(&app, &assembly, &logs);
/// assert!(report.is_clean(), "{report}");
/// assert_eq!(report.summary.outputs_matched, 1);
/// assert_eq!(report.summary.cut.tasks_moved, 1);
/// assert!(report.summary.cut.beyond >= 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn committed_logs_at_cut(
    cluster: &Cluster,
    app: &App,
    assembly: &Assembly,
    cut: GroupOffsets,
) -> CommittedLogs {
    let mut logs = read_logs(cluster, assembly);
    for ((group, tp), committed) in cut {
        logs.insert_committed(&group, tp, committed);
    }
    logs.insert_committed_after(group_offsets(cluster, app, assembly));
    logs
}

fn read_logs(cluster: &Cluster, assembly: &Assembly) -> CommittedLogs {
    let mut logs = CommittedLogs::new();
    for (topic, partitions) in &assembly.partitions {
        for partition in 0..*partitions {
            let tp = Tp::new(topic.clone(), partition);
            let Ok(fetch) = cluster.fetch(&tp, 0, usize::MAX, Isolation::ReadCommitted) else {
                continue;
            };
            logs.insert_bounds(
                tp.clone(),
                LogBounds {
                    start: 0,
                    read_until: fetch.next_offset,
                    end: fetch.high_watermark,
                },
            );
            logs.insert_records(tp.clone(), fetch.records);
            if let Ok(log) = cluster.log(&tp) {
                logs.insert_commit_order(tp, log.commit_order());
            }
        }
    }
    logs
}
