//! Tasks moved between instances by Kafka's own group membership.
//!
//! Every instance of an application joins one consumer group,
//! `<app>.instances`, subscribed to one topic of the same name with a
//! partition per task: partition `i` stands for the `i`-th of the
//! application's tasks (in stage order, then by partition), and whoever the
//! group assigns partition `i` runs that task. The topic holds no records;
//! it is only what Kafka's assignor deals out. The cooperative-sticky
//! assignor moves only the tasks that must move. A revoked task commits
//! what is pending and stops before the rebalance completes; an assigned one
//! starts on its own thread, and its producer's `init_transactions` fences
//! whatever instance ran it before (X4), so a task never runs twice
//! un-fenced. A dead instance's tasks move once the broker ends its session
//! (the session timeout); a new instance takes its share at its first
//! rebalance.
//!
//! Each instance also reports its owned tasks' states to the group: for
//! each owned task it commits offset 0 of the task's partition with a
//! [`TaskReport`](crate::instance::TaskReport) as the offset's metadata,
//! whenever a state changes and every 10 s, which is how `status` shows who
//! runs each task and how. The membership consumer's `client.id` is the
//! instance's [`group_identity`] followed by `;instance=<host>-<pid>`, so
//! Kafka's own tools tell the processes apart.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use parsley::app::App;
use parsley::assembly::Assembly;
use parsley::probe::ContractProbes;
use parsley::task::TaskId;

use super::super::client::{bounded, LiveClient, LiveConfig};
use super::super::error::LiveError;
use super::super::instance::instance_name;
use super::tasks::TaskSet;
use super::{MembershipFailure, RuntimeError};

/// How instances share tasks through group membership.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupMembership {
    /// The group's `session.timeout.ms`: how long the broker waits for a
    /// silent instance before its tasks move. The broker bounds it
    /// (`group.min.session.timeout.ms`, 6 s by default).
    pub session_timeout: Duration,
}

impl Default for GroupMembership {
    /// A 10 s session.
    fn default() -> GroupMembership {
        GroupMembership {
            session_timeout: Duration::from_secs(10),
        }
    }
}

/// The group and topic through which `app_id`'s instances share its tasks.
pub fn membership_topic(app_id: &str) -> String {
    format!("{app_id}.instances")
}

/// This instance's identity in the instances' group, carried as the
/// membership consumer's `client.id` (which every member of the group can
/// read): `parsley;app=<id>;topology=<fingerprint>;stages=<stage>x<tasks>,…`.
/// The fingerprint is a 64-bit FNV-1a hash of the assembly's shape: the
/// application's ([`App::shape`]: each stage's name, group, consumed, tick,
/// changelog and dead-letter topics), each stage's task count, and every
/// topic the application touches with its partition count. Two instances of one application and topology have the same
/// identity; another application, or another topology, under the same id
/// has another, and is refused at join ([`RuntimeError::GroupConflict`]).
pub fn group_identity(app: &App, assembly: &Assembly) -> String {
    let mut shape = app.shape();
    for plan in app.stages() {
        shape.push_str(&format!(
            "stage {} tasks {:?}\n",
            plan.name(),
            assembly.tasks_of(plan.name()),
        ));
    }
    let mut topics: Vec<(String, Option<u32>)> = ContractProbes::probe(app)
        .iter()
        .map(|contract| {
            let name = contract.name.as_str();
            (name.to_owned(), assembly.partitions_of(name))
        })
        .collect();
    topics.sort();
    for (topic, partitions) in topics {
        shape.push_str(&format!("topic {topic} partitions {partitions:?}\n"));
    }
    let stages: Vec<String> = app
        .stages()
        .iter()
        .map(|plan| {
            format!(
                "{}x{}",
                plan.name(),
                assembly.tasks_of(plan.name()).unwrap_or(0)
            )
        })
        .collect();
    let mut identity = format!(
        "parsley;app={};topology={:016x};stages={}",
        app.id(),
        parsley::app::fingerprint(&shape),
        stages.join(",")
    );
    // librdkafka and the broker take long client ids, but logs do not.
    if identity.len() > 240 {
        let mut cut = 240;
        while !identity.is_char_boundary(cut) {
            cut -= 1;
        }
        identity.truncate(cut);
        identity.push('…');
    }
    identity
}

/// The topology part of an identity (`topology=<fingerprint>`), or the whole
/// of it for a member that is no Parsley instance.
fn topology_of(identity: &str) -> &str {
    identity
        .split(';')
        .find(|part| part.starts_with("topology="))
        .unwrap_or(identity)
}

/// The identities of the group's live members that are not `ours`: another
/// application or topology under the same id. Reads the group from its
/// coordinator (bounded by the runtime's deadline).
pub(crate) fn foreign_members(
    live: &LiveConfig,
    group: &str,
    ours: &str,
) -> Result<Vec<String>, RuntimeError> {
    let consumer: BaseConsumer = live
        .client_config(&[("group.id", format!("{group}.check"))])
        .create()
        .map_err(|source| LiveError::Client {
            client: "group check consumer",
            source: Box::new(source),
        })?;
    let (timeout, name) = (live.timeout, group.to_owned());
    let listed = bounded(
        || format!("describing group `{group}`"),
        live.deadline(),
        move || {
            let found = consumer.fetch_group_list(Some(&name), timeout);
            found.map(|list| {
                list.groups()
                    .iter()
                    .filter(|info| info.name() == name)
                    .flat_map(|info| {
                        info.members()
                            .iter()
                            .map(|member| member.client_id().to_owned())
                    })
                    .collect::<Vec<String>>()
            })
        },
    )?
    .map_err(|source| RuntimeError::Membership {
        group: group.to_owned(),
        source: MembershipFailure::Members(source),
    })?;
    let mut theirs: Vec<String> = listed
        .into_iter()
        .filter(|member| {
            topology_of(member) != topology_of(ours) || !member.starts_with("parsley;")
        })
        .collect();
    theirs.sort();
    theirs.dedup();
    Ok(theirs)
}

/// Makes sure the membership topic exists with one partition per task.
pub(crate) async fn ensure_topic(
    client: &LiveClient,
    topic: &str,
    tasks: usize,
) -> Result<(), RuntimeError> {
    let wanted = u32::try_from(tasks).unwrap_or(u32::MAX);
    match client.partitions(topic).await? {
        Some(found) if found == wanted => Ok(()),
        Some(found) => Err(RuntimeError::MembershipTopic {
            topic: topic.to_owned(),
            found,
            tasks: wanted,
        }),
        None => match client.create_topic(topic, wanted).await {
            Ok(()) | Err(LiveError::TopicExists { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        },
    }
}

#[derive(Clone)]
struct MembershipContext {
    app: String,
    tasks: Arc<TaskSet>,
    /// The task of each partition of the membership topic.
    task_of_partition: Vec<TaskId>,
    /// How long a revoked task may take to commit and stop.
    patience: Duration,
    /// For the check after each assignment: the cluster, the group and
    /// this instance's identity.
    live: LiveConfig,
    group: String,
    identity: String,
}

impl MembershipContext {
    /// The check at join reads the group before joining it, so two
    /// different topologies started at the same instant can both pass it.
    /// After every assignment the group is read again, on a thread of its
    /// own, and a foreign member is logged as an error naming both.
    fn check_members_later(&self) {
        let (live, group, ours, app) = (
            self.live.clone(),
            self.group.clone(),
            self.identity.clone(),
            self.app.clone(),
        );
        let checked = std::thread::Builder::new()
            .name("parsley group check".into())
            .spawn(move || match foreign_members(&live, &group, &ours) {
                Ok(theirs) if !theirs.is_empty() => {
                    let conflict = RuntimeError::GroupConflict { group, ours, theirs };
                    tracing::error!(app = %app, error = %conflict, "another application or topology shares this instance's group: part of each one's tasks runs in the other; stop one of them");
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(app = %app, error = %error, "the group's members could not be read after an assignment");
                }
            });
        if let Err(error) = checked {
            tracing::debug!(error = %error, "no thread for the group check");
        }
    }
}

impl MembershipContext {
    /// The reports the group holds for the partitions of `list`: who owned
    /// each task before. Bounded by a few seconds inside the rebalance; an
    /// unanswered read leaves the previous owners unknown.
    fn reports_in_group(
        &self,
        consumer: &BaseConsumer<Self>,
        list: &TopicPartitionList,
    ) -> Vec<(TaskId, crate::instance::TaskReport)> {
        let bound = self.live.timeout.min(Duration::from_secs(5));
        let committed = match consumer.committed_offsets(list.clone(), bound) {
            Ok(committed) => committed,
            Err(error) => {
                tracing::debug!(app = %self.app, error = %error, "the tasks' previous owners could not be read from the group");
                return Vec::new();
            }
        };
        committed
            .elements()
            .iter()
            .filter_map(|element| {
                let task = usize::try_from(element.partition())
                    .ok()
                    .and_then(|partition| self.task_of_partition.get(partition))?;
                let report = crate::instance::TaskReport::from_json(element.metadata()).ok()?;
                Some((task.clone(), report))
            })
            .collect()
    }

    fn tasks_of(&self, list: &TopicPartitionList) -> Vec<TaskId> {
        list.elements()
            .iter()
            .filter_map(|element| usize::try_from(element.partition()).ok())
            .filter_map(|partition| self.task_of_partition.get(partition).cloned())
            .collect()
    }
}

impl ClientContext for MembershipContext {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        crate::client::log_librdkafka(level, fac, log_message);
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        crate::client::error_librdkafka(&error, reason);
    }

    fn stats(&self, statistics: rdkafka::Statistics) {
        crate::stats::publish(&statistics);
    }
}

impl ConsumerContext for MembershipContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if !matches!(rebalance, Rebalance::Error(_)) {
            self.tasks.figures().rebalancing(true);
        }
        if let Rebalance::Revoke(list) = rebalance {
            let released = self.tasks_of(list);
            if released.is_empty() {
                return;
            }
            if consumer.assignment_lost() {
                // The session expired (the cluster away, or this instance
                // silent): the group may have dealt the tasks out already,
                // and the cluster may not answer a commit. Stop them all at
                // once, without waiting and without a final commit; rejoin;
                // whatever the group assigns again starts once its earlier
                // run has returned.
                tracing::warn!(app = %self.app, tasks = ?released.iter().map(ToString::to_string).collect::<Vec<_>>(), "group assignment lost (the session expired): stopping the tasks without their final commit, rejoining the group");
                self.tasks.lose_all();
                return;
            }
            tracing::info!(app = %self.app, tasks = ?released.iter().map(ToString::to_string).collect::<Vec<_>>(), "group rebalance: releasing tasks (each commits what is pending)");
            self.tasks.release(&released, self.patience);
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(list) => {
                // Every rebalance ends with an assignment, empty or not;
                // an instance given nothing (more instances than tasks) is
                // assigned too, and RUNNING.
                let taken = self.tasks_of(list);
                // Read before this instance's own reports replace them.
                self.tasks
                    .figures()
                    .taken_from(self.reports_in_group(consumer, list));
                self.tasks.figures().own(&taken);
                self.tasks.figures().rebalancing(false);
                self.check_members_later();
                if taken.is_empty() {
                    return;
                }
                tracing::info!(app = %self.app, tasks = ?taken.iter().map(ToString::to_string).collect::<Vec<_>>(), "group rebalance: taking tasks");
                self.tasks.assign(&taken);
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(error) => {
                self.tasks.figures().rebalancing(false);
                tracing::warn!(app = %self.app, error = %error, "group rebalance failed; librdkafka retries");
            }
        }
    }
}

/// How often the owned tasks' states are reported again, unchanged: the
/// group forgets nothing, but a report lost while the cluster was away is
/// made good.
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// Commits, for each reported task the group assigns this instance now,
/// offset 0 of its partition with its report as metadata. Asynchronous: a
/// commit lost while the cluster is away is made good by the next report.
fn report_states<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    task_of_partition: &[TaskId],
    reports: &[(TaskId, crate::instance::TaskReport)],
) {
    let Ok(assigned) = consumer.assignment() else {
        return;
    };
    let mut list = TopicPartitionList::new();
    for (id, report) in reports {
        let Some(partition) = task_of_partition.iter().position(|task| task == id) else {
            continue;
        };
        let Ok(partition) = i32::try_from(partition) else {
            continue;
        };
        if assigned.find_partition(topic, partition).is_none() {
            continue;
        }
        if list
            .add_partition_offset(topic, partition, Offset::Offset(0))
            .is_err()
        {
            continue;
        }
        if let Some(mut element) = list.find_partition(topic, partition) {
            element.set_metadata(report.to_json());
        }
    }
    if list.count() == 0 {
        return;
    }
    if let Err(error) = consumer.commit(&list, CommitMode::Async) {
        tracing::debug!(error = %error, "the tasks' states could not be reported to the group; reported again later");
    }
}

/// The rebalance timeout's slack over a revoked task's final commit; and
/// how much longer than a rebalance may take (that timeout plus a session)
/// the cluster must have answered, while the group has assigned this
/// instance nothing, before it rejoins with a fresh consumer.
const REJOIN_GRACE: Duration = Duration::from_secs(10);

/// Makes the membership consumer and subscribes it to the group's topic.
fn join_group(
    live: &LiveConfig,
    membership: GroupMembership,
    topic: &str,
    identity: &str,
    context: MembershipContext,
) -> Result<BaseConsumer<MembershipContext>, RuntimeError> {
    let session = membership.session_timeout;
    let mut client_config = live.client_config(&[
        ("group.id", topic.to_owned()),
        ("partition.assignment.strategy", "cooperative-sticky".into()),
        ("session.timeout.ms", session.as_millis().to_string()),
        (
            "heartbeat.interval.ms",
            (session.as_millis() / 4).max(1).to_string(),
        ),
        // The rebalance timeout, and librdkafka's bound on a JoinGroup
        // request: long enough for a revoked task's final commit (the
        // callback waits for it), short enough that a join lost to a
        // frozen broker is retried within a minute, not five.
        (
            "max.poll.interval.ms",
            (context.patience + REJOIN_GRACE).as_millis().to_string(),
        ),
        ("enable.auto.commit", "false".into()),
        ("enable.auto.offset.store", "false".into()),
        ("auto.offset.reset", "earliest".into()),
        // Back in the group within a second of the cluster's return.
        ("reconnect.backoff.max.ms", "1000".into()),
        ("statistics.interval.ms", crate::stats::INTERVAL_MS.into()),
    ]);
    // After the user's properties: the identity is how the group tells
    // one application and topology from another, and the instance's name
    // one process from another.
    client_config.set(
        "client.id",
        format!("{identity};instance={}", instance_name()),
    );
    let consumer: BaseConsumer<MembershipContext> = client_config
        .create_with_context(context)
        .map_err(|source| LiveError::Client {
            client: "group membership consumer",
            source: Box::new(source),
        })?;
    consumer
        .subscribe(&[topic])
        .map_err(|source| RuntimeError::Membership {
            group: topic.to_owned(),
            source: MembershipFailure::Subscribe(source),
        })?;
    Ok(consumer)
}

/// Drops a membership consumer, leaving the group, on a thread of its own
/// bounded by `deadline`: with the cluster away its destructor may block.
fn leave(consumer: BaseConsumer<MembershipContext>, app: &str, topic: &str, deadline: Duration) {
    let left = bounded(
        || format!("leaving group `{topic}`"),
        deadline,
        move || {
            consumer.unsubscribe();
            drop(consumer);
        },
    );
    match left {
        Ok(()) => tracing::info!(app = %app, group = %topic, "left the instances' group"),
        Err(error) => {
            tracing::warn!(app = %app, error = %error, "the group is left when the session ends")
        }
    }
}

/// Whether the cluster answers a metadata request for `topic` now.
fn cluster_answers(consumer: &BaseConsumer<MembershipContext>, topic: &str) -> bool {
    consumer
        .fetch_metadata(Some(topic), Duration::from_secs(5))
        .is_ok()
}

/// Joins the group and runs the membership thread until `stop` is set;
/// then releases every task (each commits) and leaves the group, so the
/// other instances take the tasks at once instead of after the session.
///
/// A join can be lost to a cluster that froze mid-request: librdkafka then
/// waits for an answer that never comes while the group forms without this
/// instance. So when the cluster has answered for longer than a rebalance
/// may take (the rebalance timeout plus a session timeout) and the group
/// has still assigned this instance nothing since its last rebalance
/// began, it rejoins with a fresh consumer.
pub(crate) fn spawn(
    live: &LiveConfig,
    membership: GroupMembership,
    app: &str,
    identity: &str,
    task_of_partition: Vec<TaskId>,
    tasks: Arc<TaskSet>,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<Option<LiveError>>, RuntimeError> {
    let topic = membership_topic(app);
    let session = membership.session_timeout;
    let context = MembershipContext {
        app: app.to_owned(),
        tasks: Arc::clone(&tasks),
        task_of_partition: task_of_partition.clone(),
        patience: live.deadline() * 2,
        live: live.clone(),
        group: topic.clone(),
        identity: identity.to_owned(),
    };
    let mut consumer = join_group(live, membership, &topic, identity, context.clone())?;
    let app = app.to_owned();
    let group = topic.clone();
    let deadline = live.deadline();
    let (live, identity) = (live.clone(), identity.to_owned());
    // A rebalance may take the rebalance timeout (max.poll.interval.ms)
    // while another member finishes its callbacks, plus a session for the
    // coordinator to notice a silent member.
    let stuck_after = context.patience + REJOIN_GRACE + session;
    std::thread::Builder::new()
        .name("parsley membership".into())
        .spawn(move || {
            tracing::info!(app = %app, group = %topic, "joining the instances' group");
            // Each distinct error at most every 30 s: with the cluster
            // away librdkafka reports a few in turn, many times a second.
            let mut logged: Vec<(String, std::time::Instant)> = Vec::new();
            let figures = Arc::clone(tasks.figures());
            let (mut reported, mut last_report) = (0u64, std::time::Instant::now());
            let mut answering_since: Option<std::time::Instant> = None;
            let mut last_probe = std::time::Instant::now();
            let mut denied = None;
            while !stop.load(Ordering::Relaxed) {
                // Rebalances run inside poll, on this thread.
                if let Some(Err(error)) = consumer.poll(Duration::from_millis(100)) {
                    // A missing ACL on the instances' group or topic stays
                    // missing: the instance stops, naming it.
                    if matches!(
                        error.rdkafka_error_code(),
                        Some(
                            rdkafka::types::RDKafkaErrorCode::GroupAuthorizationFailed
                                | rdkafka::types::RDKafkaErrorCode::TopicAuthorizationFailed
                        )
                    ) {
                        let error = LiveError::GroupMembership {
                            group: topic.clone(),
                            source: Box::new(error),
                        };
                        tracing::error!(app = %app, error = %error, "group membership: not authorized; stopping the instance");
                        stop.store(true, Ordering::Relaxed);
                        denied = Some(error);
                        break;
                    }
                    let text = error.to_string();
                    logged.retain(|(_, at)| at.elapsed() < Duration::from_secs(30));
                    if !logged.iter().any(|(seen, _)| *seen == text) {
                        tracing::warn!(app = %app, group = %topic, error = %text, "group membership: librdkafka retries (the same error is not logged again for 30 s)");
                        logged.push((text, std::time::Instant::now()));
                    }
                }
                // Tasks the group assigns this instance whose earlier run
                // returned (released while the cluster was away, then
                // assigned again) start again here.
                tasks.reconcile();
                let force = last_report.elapsed() >= REPORT_EVERY;
                if let Some(reports) = figures.reports(&mut reported, force) {
                    report_states(&consumer, &topic, &task_of_partition, &reports);
                    last_report = std::time::Instant::now();
                }
                let waiting = figures.rebalancing_for();
                if waiting.is_none_or(|waiting| waiting < session) {
                    answering_since = None;
                    continue;
                }
                if last_probe.elapsed() < Duration::from_secs(1) {
                    continue;
                }
                last_probe = std::time::Instant::now();
                if !cluster_answers(&consumer, &topic) {
                    answering_since = None;
                    continue;
                }
                let answering = *answering_since.get_or_insert_with(std::time::Instant::now);
                if answering.elapsed() < stuck_after {
                    continue;
                }
                tracing::warn!(
                    app = %app,
                    group = %topic,
                    waited_s = waiting.map_or(0, |waited| waited.as_secs()),
                    "the cluster answers but the group has assigned this instance nothing since its last rebalance began: rejoining with a fresh consumer"
                );
                tasks.lose_all();
                let fresh = join_group(&live, membership, &topic, &identity, context.clone());
                match fresh {
                    Ok(fresh) => {
                        let stale = std::mem::replace(&mut consumer, fresh);
                        let (app, topic) = (app.clone(), topic.clone());
                        let _ = std::thread::Builder::new()
                            .name("parsley leave".into())
                            .spawn(move || leave(stale, &app, &topic, deadline));
                        figures.rejoined();
                    }
                    Err(error) => {
                        tracing::warn!(app = %app, error = %error, "a fresh membership consumer could not be made; trying again later");
                    }
                }
                answering_since = None;
            }
            figures.shutting_down();
            // Commit and stop every task before leaving, as a revocation
            // would; report them stopped (the commit goes out as the
            // consumer closes); then leave, bounded, on a thread of its own.
            let owned = figures.owned();
            tasks.release(&task_of_partition, deadline * 2);
            report_states(&consumer, &topic, &task_of_partition, &figures.reports_of(&owned));
            leave(consumer, &app, &topic, deadline);
            denied
        })
        .map_err(|error| RuntimeError::Membership {
            group,
            source: MembershipFailure::Thread(error),
        })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use parsley::assembly::assemble;
    use parsley::probe::ContractProbes;
    use parsley::{Json, Parsley, Stage, Step, Topic};

    use super::*;

    fn app(id: &str, stage: &str, input: &str) -> App {
        let (input, output): (Topic<String, i64>, Topic<String, i64>) =
            (Topic::new(input), Topic::new("totals"));
        let emit = output.clone();
        let stage = Stage::named(stage)
            .state(Json, || 0i64)
            .on(&input, move |sum: i64, record| {
                let total = sum + record.value();
                Ok::<_, String>(Step::of(total).emit(emit.send(record.key().cloned(), total)))
            })
            .into(&output)
            .build();
        Parsley::named(id).stage(stage).build().expect("composes")
    }

    fn identity(app: &App, partitions: u32) -> String {
        let known: BTreeMap<String, u32> = ContractProbes::probe(app)
            .iter()
            .map(|contract| (contract.name.as_str().to_owned(), partitions))
            .collect();
        group_identity(app, &assemble(app, &known).expect("assembles"))
    }

    #[test]
    fn the_identity_is_the_same_for_one_topology_and_differs_for_another() {
        let ours = identity(&app("shop", "sum", "orders"), 2);
        assert_eq!(ours, identity(&app("shop", "sum", "orders"), 2));
        assert!(ours.starts_with("parsley;app=shop;topology="), "{ours}");
        assert!(ours.ends_with(";stages=sumx2"), "{ours}");
        for other in [
            identity(&app("shop", "count", "orders"), 2),
            identity(&app("shop", "sum", "payments"), 2),
            identity(&app("shop", "sum", "orders"), 3),
        ] {
            assert_ne!(topology_of(&ours), topology_of(&other), "{ours} vs {other}");
        }
    }
}
