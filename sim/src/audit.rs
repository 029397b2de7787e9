//! The log-only audit (`parsley::audit`) over the in-memory model: the
//! committed logs a `read_committed` consumer of the model reads, for the
//! checks that committed topics alone can show.

use parsley::assembly::Assembly;
pub use parsley::audit::*;
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
    for plan in app.stages() {
        for topic in plan.consumed_topics() {
            let partitions = assembly.partitions_of(topic.as_str()).unwrap_or(0);
            for partition in 0..partitions {
                let tp = Tp::new(topic.clone(), partition);
                if let Some(committed) = cluster.committed(&plan.group, &tp) {
                    logs.insert_committed(&plan.group, tp, committed);
                }
            }
        }
    }
    logs
}
