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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::{ClientContext, TopicPartitionList};

use parsley::task::TaskId;

use super::super::client::{bounded, LiveClient, LiveConfig};
use super::super::error::LiveError;
use super::tasks::TaskSet;
use super::RuntimeError;

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

struct MembershipContext {
    app: String,
    tasks: Arc<TaskSet>,
    /// The task of each partition of the membership topic.
    task_of_partition: Vec<TaskId>,
    /// How long a revoked task may take to commit and stop.
    patience: Duration,
}

impl MembershipContext {
    fn tasks_of(&self, list: &TopicPartitionList) -> Vec<TaskId> {
        list.elements()
            .iter()
            .filter_map(|element| usize::try_from(element.partition()).ok())
            .filter_map(|partition| self.task_of_partition.get(partition).cloned())
            .collect()
    }
}

impl ClientContext for MembershipContext {}

impl ConsumerContext for MembershipContext {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(list) = rebalance {
            let released = self.tasks_of(list);
            if released.is_empty() {
                return;
            }
            tracing::info!(app = %self.app, tasks = ?released.iter().map(ToString::to_string).collect::<Vec<_>>(), "group rebalance: releasing tasks (each commits what is pending)");
            self.tasks.release(&released, self.patience);
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(list) => {
                let taken = self.tasks_of(list);
                if taken.is_empty() {
                    return;
                }
                tracing::info!(app = %self.app, tasks = ?taken.iter().map(ToString::to_string).collect::<Vec<_>>(), "group rebalance: taking tasks");
                for task in taken {
                    if let Err(error) = self.tasks.start(task) {
                        tracing::error!(app = %self.app, error = %error, "a task assigned to this instance could not start");
                    }
                }
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(error) => {
                tracing::warn!(app = %self.app, error = %error, "group rebalance failed; librdkafka retries");
            }
        }
    }
}

/// Joins the group and runs the membership thread until `stop` is set;
/// then releases every task (each commits) and leaves the group, so the
/// other instances take the tasks at once instead of after the session.
pub(crate) fn spawn(
    live: &LiveConfig,
    membership: GroupMembership,
    app: &str,
    task_of_partition: Vec<TaskId>,
    tasks: Arc<TaskSet>,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>, RuntimeError> {
    let topic = membership_topic(app);
    let session = membership.session_timeout;
    let context = MembershipContext {
        app: app.to_owned(),
        tasks: Arc::clone(&tasks),
        task_of_partition: task_of_partition.clone(),
        patience: live.deadline() * 2,
    };
    let consumer: BaseConsumer<MembershipContext> = live
        .client_config(&[
            ("group.id", topic.clone()),
            ("partition.assignment.strategy", "cooperative-sticky".into()),
            ("session.timeout.ms", session.as_millis().to_string()),
            (
                "heartbeat.interval.ms",
                (session.as_millis() / 4).max(1).to_string(),
            ),
            ("enable.auto.commit", "false".into()),
            ("enable.auto.offset.store", "false".into()),
            ("auto.offset.reset", "earliest".into()),
        ])
        .create_with_context(context)
        .map_err(|source| LiveError::Client {
            client: "group membership consumer",
            source: Box::new(source),
        })?;
    consumer
        .subscribe(&[topic.as_str()])
        .map_err(|source| RuntimeError::Membership {
            group: topic.clone(),
            reason: source.to_string(),
        })?;
    let app = app.to_owned();
    let group = topic.clone();
    let deadline = live.deadline();
    std::thread::Builder::new()
        .name("parsley membership".into())
        .spawn(move || {
            tracing::info!(app = %app, group = %topic, "joining the instances' group");
            let mut last_error = String::new();
            while !stop.load(Ordering::Relaxed) {
                // Rebalances run inside poll, on this thread.
                if let Some(Err(error)) = consumer.poll(Duration::from_millis(100)) {
                    let text = error.to_string();
                    if text != last_error {
                        tracing::warn!(app = %app, group = %topic, error = %text, "group membership: librdkafka retries");
                        last_error = text;
                    }
                }
            }
            // Commit and stop every task before leaving, as a revocation
            // would; then leave, bounded, on a thread of its own.
            tasks.release(&task_of_partition, deadline * 2);
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
                Err(error) => tracing::warn!(app = %app, error = %error, "the group is left when the session ends"),
            }
        })
        .map_err(|error| RuntimeError::Membership {
            group,
            reason: format!("the membership thread could not start: {error}"),
        })
}
