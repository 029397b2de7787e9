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
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use parsley::App;
use parsley::Assembly;
use parsley::TaskId;
use parsley::TopicContract;

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
    let mut topics: Vec<(String, Option<u32>)> = TopicContract::list(app)
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
        parsley::fingerprint(&shape),
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
    // No group id of its own: one would make librdkafka look up that
    // group's coordinator, which needs an ACL the application has no other
    // use for. Describing `group` needs only `Describe` on it, which the
    // instances' `Read` grants.
    let consumer: BaseConsumer =
        live.client_config(&[])
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
    /// What librdkafka says of this context's consumer: one per consumer
    /// ([`join_group`] makes it fresh).
    watch: Arc<JoinWatch>,
}

/// What librdkafka's statistics last said of one membership consumer's
/// place in its group. librdkafka leaves and rejoins a group without any
/// rebalance callback (a JoinGroup lost or refused, a cooperative rejoin),
/// so only its own join state tells whether the consumer is in the group.
#[derive(Debug)]
struct JoinWatch {
    seen: Mutex<JoinSeen>,
    /// Set once a fresh consumer has replaced this one: the callbacks it
    /// still runs while it leaves must not touch the fresh one's tasks.
    retired: AtomicBool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct JoinSeen {
    /// When a report last said `steady` (in the group), or when the
    /// consumer was made.
    last_steady: Instant,
    /// When the group's state was last reported at all.
    last_report: Option<Instant>,
    /// The join state last reported.
    join_state: String,
}

impl JoinWatch {
    fn new(made: Instant) -> JoinWatch {
        JoinWatch {
            seen: Mutex::new(JoinSeen {
                last_steady: made,
                last_report: None,
                join_state: "init".to_owned(),
            }),
            retired: AtomicBool::new(false),
        }
    }

    /// One statistics report, received at `now`.
    fn report(&self, statistics: &rdkafka::Statistics, now: Instant) {
        let Some(group) = &statistics.cgrp else {
            return;
        };
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.last_report = Some(now);
        if group.join_state == "steady" {
            seen.last_steady = now;
        }
        seen.join_state.clone_from(&group.join_state);
    }

    /// The group assigned this consumer its partitions at `now` (our own
    /// callback): it is in the group, whenever the next report says so.
    fn assigned(&self, now: Instant) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.last_steady = now;
    }

    fn seen(&self) -> JoinSeen {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
    }

    fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }
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
        self.watch.report(&statistics, Instant::now());
        crate::stats::publish(&statistics);
    }
}

impl ConsumerContext for MembershipContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if self.watch.is_retired() {
            return;
        }
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
        if self.watch.is_retired() {
            return;
        }
        match rebalance {
            Rebalance::Assign(list) => {
                // A rebalance that held this thread (a long revoke) kept the
                // statistics from it: the assignment itself says the
                // consumer is in the group.
                self.watch.assigned(Instant::now());
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

/// The rebalance timeout's slack over a revoked task's final commit.
const REJOIN_GRACE: Duration = Duration::from_secs(10);

/// How often an instance out of its group asks whether the cluster answers.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// How many of the probing client's own events (its log, its errors) are
/// served after each question: more than it makes in a second.
const PROBE_EVENTS: usize = 32;

/// How long one such question waits for the cluster.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the membership thread does on one turn about a consumer that may
/// be out of its group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    /// In the group, or not out of it for long: nothing.
    Off,
    /// Just found out of the group: say so, and probe the cluster.
    SwitchedOn,
    /// Out of the group: probe the cluster.
    Probe,
    /// Out of the group: nothing yet.
    Wait,
    /// Out of the group while the cluster has answered long enough: make a
    /// fresh consumer.
    Rejoin,
}

/// Decides when a membership consumer out of its group should be replaced.
/// A join lost to a frozen broker can leave librdkafka waiting, or
/// retrying, while the group forms without this instance; no rebalance
/// callback need come. Pure: every time is passed in.
#[derive(Debug)]
struct RejoinDetector {
    session: Duration,
    /// How late a statistics report may be.
    slack: Duration,
    /// How long the cluster must have answered: longer than a rebalance may
    /// legitimately take.
    answering_for: Duration,
    on: bool,
    answering_since: Option<Instant>,
    last_answer: Option<Instant>,
    last_probe: Option<Instant>,
}

impl RejoinDetector {
    fn new(session: Duration, slack: Duration, answering_for: Duration) -> RejoinDetector {
        RejoinDetector {
            session,
            slack,
            answering_for,
            on: false,
            answering_since: None,
            last_answer: None,
            last_probe: None,
        }
    }

    /// Whether the consumer is out of its group. librdkafka's statistics
    /// decide while they arrive; without them (none yet, or unreadable)
    /// our own callbacks' mark does, as before them.
    fn out_of_group(
        &self,
        now: Instant,
        seen: &JoinSeen,
        rebalancing_for: Option<Duration>,
    ) -> bool {
        let bound = self.session + self.slack;
        let reporting = seen
            .last_report
            .is_some_and(|at| now.saturating_duration_since(at) <= bound);
        if reporting {
            now.saturating_duration_since(seen.last_steady) > bound
        } else {
            rebalancing_for.is_some_and(|waiting| waiting >= self.session)
        }
    }

    /// One turn at `now`: what librdkafka last said, how long our own
    /// rebalance mark has been set, and the answer to the probe asked for
    /// last (`None` when none was asked).
    fn observe(
        &mut self,
        now: Instant,
        seen: &JoinSeen,
        rebalancing_for: Option<Duration>,
        probe: Option<bool>,
    ) -> Decision {
        if !self.out_of_group(now, seen, rebalancing_for) {
            *self = RejoinDetector::new(self.session, self.slack, self.answering_for);
            return Decision::Off;
        }
        if !self.on {
            self.on = true;
            self.last_probe = Some(now);
            return Decision::SwitchedOn;
        }
        // One unanswered probe (a loaded machine) keeps the count; only a
        // silence longer than a session starts it again.
        if self
            .last_answer
            .is_some_and(|at| now.saturating_duration_since(at) > self.session)
        {
            self.answering_since = None;
        }
        if probe == Some(true) {
            self.answering_since.get_or_insert(now);
            self.last_answer = Some(now);
        }
        if self
            .answering_since
            .is_some_and(|since| now.saturating_duration_since(since) >= self.answering_for)
        {
            *self = RejoinDetector::new(self.session, self.slack, self.answering_for);
            return Decision::Rejoin;
        }
        if probe.is_none()
            && self
                .last_probe
                .is_none_or(|at| now.saturating_duration_since(at) >= PROBE_EVERY)
        {
            self.last_probe = Some(now);
            return Decision::Probe;
        }
        Decision::Wait
    }
}

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
        // The rebalance timeout: long enough for a revoked task's final
        // commit (the callback waits for it). librdkafka bounds a
        // JoinGroup request by it plus 3 s (105 s with the default call
        // timeout, not librdkafka's default five minutes); what it then
        // does can still leave this instance out of the group, which
        // `spawn`'s detector makes good.
        (
            "max.poll.interval.ms",
            (context.patience + REJOIN_GRACE).as_millis().to_string(),
        ),
        ("enable.auto.commit", "false".into()),
        ("enable.auto.offset.store", "false".into()),
        ("auto.offset.reset", "earliest".into()),
        // Back in the group within a second of the cluster's return.
        ("reconnect.backoff.max.ms", "1000".into()),
    ]);
    // After the user's properties: the identity is how the group tells
    // one application and topology from another, and the instance's name
    // one process from another.
    client_config.set(
        "client.id",
        format!("{identity};instance={}", instance_name()),
    );
    // After them too: the rejoin detector reads the join state from these
    // reports (which also feed the figures).
    client_config.set("statistics.interval.ms", crate::stats::interval_ms());
    let context = MembershipContext {
        watch: Arc::new(JoinWatch::new(Instant::now())),
        ..context
    };
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

/// Whether the cluster answers a metadata request for `topic` now, asked
/// by a small client of its own (made on first use, kept in `prober`): the
/// membership consumer's own connection may be the one stuck.
fn cluster_answers(live: &LiveConfig, topic: &str, prober: &mut Option<BaseConsumer>) -> bool {
    let client = match prober {
        Some(client) => client,
        None => {
            let mut config = live.client_config(&[]);
            // Never polled: no reports to pile up.
            config.set("statistics.interval.ms", "0");
            match config.create::<BaseConsumer>() {
                Ok(client) => prober.insert(client),
                Err(error) => {
                    tracing::debug!(error = %error, "no client to ask whether the cluster answers");
                    return false;
                }
            }
        }
    };
    let answered = client
        .fetch_metadata(Some(topic), live.timeout.min(PROBE_TIMEOUT))
        .is_ok();
    // Nobody else serves its queue: what it logged while the cluster was
    // away must not pile up. A 0-ms poll serves one event, or none.
    for _ in 0..PROBE_EVENTS {
        let _ = client.poll(Duration::ZERO);
    }
    answered
}

/// Joins the group and runs the membership thread until `stop` is set;
/// then releases every task (each commits) and leaves the group, so the
/// other instances take the tasks at once instead of after the session.
///
/// A join can be lost to a cluster that froze mid-request: librdkafka then
/// waits for an answer that never comes, or retries, while the group forms
/// without this instance, and need call no rebalance callback. So when
/// librdkafka's statistics have not reported the consumer in its group
/// (join state `steady`) for longer than a session, and the cluster has
/// since answered for longer than a rebalance may take (the rebalance
/// timeout plus a session timeout), it rejoins with a fresh consumer
/// ([`RejoinDetector`]).
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
        watch: Arc::new(JoinWatch::new(Instant::now())),
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
            let mut logged: Vec<(String, Instant)> = Vec::new();
            let figures = Arc::clone(tasks.figures());
            let (mut reported, mut last_report) = (0u64, Instant::now());
            let mut detector = RejoinDetector::new(session, crate::stats::INTERVAL, stuck_after);
            let mut prober: Option<BaseConsumer> = None;
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
                        logged.push((text, Instant::now()));
                    }
                }
                // Tasks the group assigns this instance whose earlier run
                // returned (released while the cluster was away, then
                // assigned again) start again here.
                tasks.reconcile();
                let force = last_report.elapsed() >= REPORT_EVERY;
                if let Some(reports) = figures.reports(&mut reported, force) {
                    report_states(&consumer, &topic, &task_of_partition, &reports);
                    last_report = Instant::now();
                }
                let seen = consumer.context().watch.seen();
                let waiting = figures.rebalancing_for();
                let mut decision = detector.observe(Instant::now(), &seen, waiting, None);
                match decision {
                    Decision::Off => {
                        prober = None;
                        continue;
                    }
                    Decision::Wait => continue,
                    Decision::SwitchedOn => {
                        tracing::info!(
                            app = %app,
                            group = %topic,
                            join_state = %seen.join_state,
                            since_steady_s = seen.last_steady.elapsed().as_secs(),
                            answering_for_s = stuck_after.as_secs(),
                            "the membership consumer is out of its group: it rejoins with a fresh consumer once the cluster has answered for answering_for_s"
                        );
                    }
                    Decision::Probe | Decision::Rejoin => {}
                }
                if matches!(decision, Decision::SwitchedOn | Decision::Probe) {
                    let answered = cluster_answers(&live, &topic, &mut prober);
                    decision = detector.observe(Instant::now(), &seen, waiting, Some(answered));
                }
                if decision != Decision::Rejoin {
                    continue;
                }
                tracing::warn!(
                    app = %app,
                    group = %topic,
                    join_state = %seen.join_state,
                    since_steady_s = seen.last_steady.elapsed().as_secs(),
                    "the cluster answers but the membership consumer is still out of its group: rejoining with a fresh consumer"
                );
                match join_group(&live, membership, &topic, &identity, context.clone()) {
                    Ok(fresh) => {
                        // Not polled yet: no assignment reaches the fresh
                        // consumer before the old tasks are let go.
                        tasks.lose_all();
                        let stale = std::mem::replace(&mut consumer, fresh);
                        stale.context().watch.retire();
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

    use parsley::assemble;
    use parsley::TopicContract;
    use parsley::{Json, Parsley, Stage, Step, Topic};

    use super::super::figures::Figures;
    use super::super::RuntimeConfig;
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
        let known: BTreeMap<String, u32> = TopicContract::list(app)
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

    const SESSION: Duration = Duration::from_secs(10);
    const SLACK: Duration = Duration::from_secs(5);
    /// `spawn`'s bound with the default call timeout: 92 s + 10 s + 10 s.
    const ANSWERING: Duration = Duration::from_secs(112);

    fn stats_in(join_state: &str) -> rdkafka::Statistics {
        rdkafka::Statistics {
            cgrp: Some(rdkafka::statistics::ConsumerGroup {
                join_state: join_state.to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// One instance's world, in milliseconds from the consumer's making.
    struct World<'a> {
        /// librdkafka's join state, reported every 5 s; `None`: no report
        /// reaches the membership thread.
        join_state: Option<&'a dyn Fn(u64) -> &'static str>,
        /// Since when our own callbacks' rebalance mark is set.
        rebalancing_since: Option<u64>,
        /// Whether the cluster answers a probe.
        answers: &'a dyn Fn(u64) -> bool,
    }

    /// Runs the membership loop's detector every 500 ms for `secs`, as
    /// `spawn` does; when (ms in) it first decides to rejoin.
    fn first_rejoin(world: &World<'_>, secs: u64) -> Option<u64> {
        let made = Instant::now();
        let at = |ms: u64| made + Duration::from_millis(ms);
        let watch = JoinWatch::new(made);
        let mut detector = RejoinDetector::new(SESSION, SLACK, ANSWERING);
        for ms in (0..=secs * 1000).step_by(500) {
            if let Some(join_state) = world.join_state {
                if ms > 0 && ms % 5000 == 0 {
                    watch.report(&stats_in(join_state(ms)), at(ms));
                }
            }
            let seen = watch.seen();
            let waiting = world
                .rebalancing_since
                .and_then(|since| ms.checked_sub(since))
                .map(Duration::from_millis);
            let mut decision = detector.observe(at(ms), &seen, waiting, None);
            if matches!(decision, Decision::SwitchedOn | Decision::Probe) {
                let answer = Some((world.answers)(ms));
                decision = detector.observe(at(ms), &seen, waiting, answer);
            }
            if decision == Decision::Rejoin {
                return Some(ms);
            }
        }
        None
    }

    #[test]
    fn a_join_lost_without_a_callback_is_retried_once_the_cluster_answers_long_enough() {
        // In the group until the broker freezes at 30 s; the join lost to
        // it is never answered; the broker is back at 105 s. The last
        // callback was an assignment, so our own mark stays unset.
        let (frozen, back) = (30_000, 105_000);
        let join_state = |ms: u64| if ms <= frozen { "steady" } else { "wait-join" };
        let answers = |ms: u64| ms < frozen || ms >= back;
        let lost = World {
            join_state: Some(&join_state),
            rebalancing_since: None,
            answers: &answers,
        };
        let fired = first_rejoin(&lost, 600).expect("rejoins");
        let (earliest, latest) = (back + 112_000, back + 122_000);
        assert!(
            (earliest..=latest).contains(&fired),
            "rejoined {fired} ms in, not within a session and {ANSWERING:?} of the broker's return"
        );
        // What the old trigger saw: only our callbacks' mark, never set.
        let old = World {
            join_state: None,
            ..lost
        };
        assert_eq!(first_rejoin(&old, 600), None);
    }

    #[test]
    fn without_statistics_our_own_rebalance_mark_still_triggers() {
        let answers = |_| true;
        let world = World {
            join_state: None,
            rebalancing_since: Some(0),
            answers: &answers,
        };
        // Switched on a session in; the cluster has answered since.
        assert_eq!(first_rejoin(&world, 600), Some(10_000 + 112_000));
    }

    #[test]
    fn one_unanswered_probe_keeps_the_count_a_silence_longer_than_a_session_resets_it() {
        let join_state = |_| "wait-join";
        // Never in the group: switched on at 15.5 s, answered since.
        let run = |answers: &dyn Fn(u64) -> bool| {
            first_rejoin(
                &World {
                    join_state: Some(&join_state),
                    rebalancing_since: None,
                    answers,
                },
                600,
            )
        };
        let on_time = Some(15_500 + 112_000);
        assert_eq!(run(&|_| true), on_time);
        // Probes go out every second from 15.5 s.
        let unanswered = std::cell::Cell::new(0);
        let once = |ms: u64| {
            let answered = ms != 60_500;
            unanswered.set(unanswered.get() + u32::from(!answered));
            answered
        };
        assert_eq!(run(&once), on_time, "one probe unanswered");
        assert_eq!(unanswered.get(), 1);
        // Last answer 59.5 s, next 69.5 s: not more than a session.
        let short = |ms: u64| !(60_000..69_500).contains(&ms);
        assert_eq!(run(&short), on_time, "10 s between answers");
        // Last answer 59.5 s, more than a session old by 70 s: the count
        // starts again at the next answer, 71.5 s.
        let long = |ms: u64| !(60_000..71_500).contains(&ms);
        assert_eq!(run(&long), Some(71_500 + 112_000), "12 s between answers");
        // Gone again a session before the count would end: no rejoin.
        let gone = |ms: u64| ms < 110_000;
        assert_eq!(run(&gone), None, "silent from 110 s on");
    }

    #[test]
    fn a_steady_report_turns_the_detector_off() {
        let answers = |_| true;
        // Our own mark stuck set: librdkafka's word that it is in the
        // group wins.
        let steady = |_| "steady";
        let in_group = World {
            join_state: Some(&steady),
            rebalancing_since: Some(0),
            answers: &answers,
        };
        assert_eq!(first_rejoin(&in_group, 600), None);
        // Out from the start; in the group for 100–110 s: the count started
        // at 15.5 s is dropped, and starts again once out for longer than a
        // session and a report's slack (the last steady report at 105 s).
        let back_a_while = |ms: u64| {
            if (100_000..110_000).contains(&ms) {
                "steady"
            } else {
                "wait-join"
            }
        };
        let world = World {
            join_state: Some(&back_a_while),
            rebalancing_since: None,
            answers: &answers,
        };
        assert_eq!(first_rejoin(&world, 600), Some(120_500 + 112_000));
    }

    fn context() -> MembershipContext {
        let app = app("shop", "sum", "orders");
        let known: BTreeMap<String, u32> = TopicContract::list(&app)
            .iter()
            .map(|contract| (contract.name.as_str().to_owned(), 2))
            .collect();
        let assembly = assemble(&app, &known).expect("assembles");
        let live = LiveConfig::new("127.0.0.1:1");
        let tasks = TaskSet::new(
            Arc::new(app),
            Arc::new(assembly),
            RuntimeConfig::new(live.clone()),
            Arc::new(AtomicBool::new(false)),
            Arc::new(Mutex::new(Vec::new())),
            Figures::new("shop", Duration::from_secs(30)),
        );
        MembershipContext {
            app: "shop".into(),
            tasks: Arc::new(tasks),
            task_of_partition: Vec::new(),
            patience: Duration::from_secs(1),
            live,
            group: "shop.instances".into(),
            identity: "parsley;app=shop".into(),
            watch: Arc::new(JoinWatch::new(Instant::now())),
        }
    }

    #[test]
    fn the_stats_callback_moves_the_steady_mark_only_for_steady() {
        let made = Instant::now()
            .checked_sub(Duration::from_secs(60))
            .expect("a minute of uptime");
        let context = MembershipContext {
            watch: Arc::new(JoinWatch::new(made)),
            ..context()
        };
        let seen = || context.watch.seen();
        context.stats(stats_in("wait-join"));
        assert_eq!(seen().last_steady, made);
        assert_eq!(seen().join_state, "wait-join");
        let reported = seen().last_report.expect("a report");
        context.stats(rdkafka::Statistics::default());
        assert_eq!(seen().last_report, Some(reported), "no group, no report");
        context.stats(stats_in("steady"));
        let steady = seen().last_steady;
        assert!(steady > made + Duration::from_secs(30));
        context.stats(stats_in("wait-sync"));
        assert_eq!(seen().last_steady, steady);
        assert_eq!(seen().join_state, "wait-sync");
    }

    #[test]
    fn a_replaced_consumers_callbacks_leave_the_tasks_alone() {
        let context = context();
        let figures = Arc::clone(context.tasks.figures());
        let consumer: BaseConsumer<MembershipContext> = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .create_with_context(context)
            .expect("a consumer");
        let revoke = TopicPartitionList::new();
        consumer.context().watch.retire();
        consumer
            .context()
            .pre_rebalance(&consumer, &Rebalance::Revoke(&revoke));
        assert_eq!(figures.rebalancing_for(), None);
        consumer
            .context()
            .watch
            .retired
            .store(false, Ordering::Relaxed);
        consumer
            .context()
            .pre_rebalance(&consumer, &Rebalance::Revoke(&revoke));
        assert!(figures.rebalancing_for().is_some());
    }
}
