//! The clients an instance's tasks share: one `read_committed` consumer per
//! stage, of which each of the stage's tasks here reads its own partitions'
//! queues (librdkafka's partition queues), and one pair of log-end readers.
//! Kafka Streams shares one consumer between a thread's tasks the same way.
//! What stays per task is the transactional producer: fencing is by its id
//! (X4).
//!
//! Why: every librdkafka client has threads and broker connections of its
//! own, wakes on its own, and prefetches up to `queued.max.messages.kbytes`
//! on its own. A consumer and two log-end readers per task made 60 clients beside
//! the 20 producers of a 20-task instance; now it is one consumer per stage
//! and two log-end readers. (On a quiet machine this did not change the CPU per
//! record measurably: BENCHMARKS.md, run G.)
//!
//! A stage's consumer keeps its group (X6): a task reads its committed
//! offsets through it, and a refusal of the group (no ACL lets the principal
//! describe it) reaches every task of the stage. Each task splits its
//! partitions' queues off the consumer *before* it assigns them, so no record
//! of them is ever served on the consumer's own queue: librdkafka keeps an
//! application's forwarding of a partition's queue across assignments. The
//! consumer's own queue still carries its events (errors, statistics), and
//! every task serves it on each turn. Should a record of a partition reach
//! it after all (librdkafka made the partition anew), the partition is
//! marked misrouted and its task opens its queues again and reassigns them
//! at its positions, so nothing is lost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rdkafka::consumer::base_consumer::PartitionQueue;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::TopicPartitionList;

use parsley::TaskId;
use parsley::Tp;

use super::super::client::{
    is_group_refusal, kafka_offset, kafka_partition, LiveConfig, LogContext, LogEnds, Wake,
};
use super::super::error::LiveError;
use super::RuntimeError;

/// A stage's consumer: librdkafka's log and statistics go to the runtime's.
pub(crate) type StageClient = BaseConsumer<LogContext>;

/// How many events of a stage consumer's own queue one turn serves at most.
const EVENTS_PER_TURN: usize = 32;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each critical section replaces or pushes whole values.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The clients of one instance that its tasks share, made when the first
/// task needs them and kept for the instance's life (a task that moves
/// away and back finds its stage's consumer still connected), save a
/// stage's consumer through which a task could not read its committed
/// offsets: the next task to start makes a fresh one
/// ([`SharedClients::renew_stage_consumer`]).
pub(crate) struct SharedClients {
    live: LiveConfig,
    log_ends: Mutex<Option<Arc<LogEnds>>>,
    stages: Mutex<HashMap<String, Arc<StageConsumer>>>,
}

impl SharedClients {
    pub(crate) fn new(live: &LiveConfig) -> Arc<SharedClients> {
        Arc::new(SharedClients {
            live: live.clone(),
            log_ends: Mutex::new(None),
            stages: Mutex::new(HashMap::new()),
        })
    }

    /// The instance's log-end readers (ListOffsets at both isolation levels).
    pub(crate) fn log_ends(&self) -> Result<Arc<LogEnds>, LiveError> {
        let mut log_ends = lock(&self.log_ends);
        if let Some(log_ends) = log_ends.as_ref() {
            return Ok(Arc::clone(log_ends));
        }
        let made = Arc::new(LogEnds::new(&self.live)?);
        *log_ends = Some(Arc::clone(&made));
        Ok(made)
    }

    /// The consumer of the stage whose group is `group`.
    pub(crate) fn stage_consumer(&self, group: &str) -> Result<Arc<StageConsumer>, LiveError> {
        let mut stages = lock(&self.stages);
        if let Some(stage) = stages.get(group) {
            return Ok(Arc::clone(stage));
        }
        let made = Arc::new(StageConsumer {
            client: Arc::new(consumer_for(&self.live, group)?),
            group: group.to_owned(),
            failure: Mutex::new(None),
            misrouted: Mutex::new(Vec::new()),
        });
        stages.insert(group.to_owned(), Arc::clone(&made));
        Ok(made)
    }
}

impl SharedClients {
    /// Forgets the stage's consumer `stale` if it is still the stage's
    /// here, so that the next task of the stage to start makes a fresh
    /// one; returns it (tasks running on it keep it until they restart).
    pub(crate) fn renew_stage_consumer(
        &self,
        stale: &Arc<StageConsumer>,
    ) -> Option<Arc<StageConsumer>> {
        let mut stages = lock(&self.stages);
        let current = stages.get(&stale.group)?;
        match Arc::ptr_eq(current, stale) {
            true => stages.remove(&stale.group),
            false => None,
        }
    }
}

/// A `read_committed` consumer of a stage's group, assigned by hand: the
/// task seeks to its committed positions, and a position out of range is a
/// loud error, never a silent jump (§8).
pub(crate) fn consumer_for(config: &LiveConfig, group: &str) -> Result<StageClient, LiveError> {
    config
        .client_config(&[
            ("group.id", group.to_owned()),
            ("isolation.level", "read_committed".into()),
            ("enable.auto.commit", "false".into()),
            ("enable.auto.offset.store", "false".into()),
            ("auto.offset.reset", "error".into()),
            ("fetch.wait.max.ms", "10".into()),
            ("statistics.interval.ms", crate::stats::interval_ms()),
        ])
        .create_with_context::<_, StageClient>(LogContext)
        .map_err(|source| LiveError::Client {
            client: "stage consumer",
            source: Box::new(source),
        })
}

/// One stage's consumer on this instance, shared by the stage's tasks here.
pub(crate) struct StageConsumer {
    client: Arc<StageClient>,
    group: String,
    /// An error on the consumer's own queue that stops every task of the
    /// stage: the broker's refusal of the group, or one no retry cures.
    failure: Mutex<Option<KafkaError>>,
    /// Partitions a record of which reached the consumer's own queue.
    misrouted: Mutex<Vec<Tp>>,
}

impl StageConsumer {
    /// The librdkafka client, for the committed offsets of the group.
    pub(crate) fn client(&self) -> &Arc<StageClient> {
        &self.client
    }

    /// The stage's group.
    pub(crate) fn group(&self) -> &str {
        &self.group
    }

    /// Where the error that stops every task of the stage is kept: a task
    /// that finds the group refused while reading its committed offsets
    /// records it here for the stage's other tasks, which librdkafka does
    /// not tell (it reports the refusal once per consumer).
    pub(crate) fn failure(&self) -> &super::super::client::SharedRefusal {
        &self.failure
    }

    /// Serves the consumer's own queue (errors, statistics; librdkafka
    /// needs it polled) and returns the error that stops the stage's tasks,
    /// if one was seen, by this turn or another task's.
    pub(crate) fn serve(&self) -> Option<KafkaError> {
        for _ in 0..EVENTS_PER_TURN {
            let Some(polled) = self.client.poll(Duration::ZERO) else {
                break;
            };
            match polled {
                Ok(message) => {
                    let Ok(partition) = u32::try_from(message.partition()) else {
                        continue;
                    };
                    let tp = Tp::new(message.topic(), partition);
                    let mut misrouted = lock(&self.misrouted);
                    if !misrouted.contains(&tp) {
                        tracing::warn!(group = %self.group, %tp, "a record reached the stage consumer's own queue, not its partition's: the task opens that partition's queue again and refetches from its position");
                        misrouted.push(tp);
                    }
                }
                Err(KafkaError::PartitionEOF(_)) => {}
                Err(error) if is_group_refusal(&error) || self.is_fatal(&error) => {
                    lock(&self.failure).get_or_insert(error);
                }
                // Broker down, a leader moving: librdkafka retries by
                // itself, and the tasks wait.
                Err(error) => {
                    tracing::debug!(group = %self.group, %error, "stage consumer: retried by librdkafka")
                }
            }
        }
        lock(&self.failure).clone()
    }

    /// Consumer errors that no retry will cure: an offset out of range (the
    /// log was truncated under the task), a topic that vanished, or a fatal
    /// client error. Everything else — a broker restarting, a leader moving —
    /// is retried by librdkafka, and the tasks wait.
    pub(crate) fn is_fatal(&self, error: &KafkaError) -> bool {
        if self.client.client().fatal_error().is_some() {
            return true;
        }
        matches!(
            error.rdkafka_error_code(),
            Some(
                RDKafkaErrorCode::AutoOffsetReset
                    | RDKafkaErrorCode::OffsetOutOfRange
                    | RDKafkaErrorCode::UnknownTopic
                    | RDKafkaErrorCode::UnknownPartition
            )
        )
    }

    /// True, once, if a record of one of `tps` was misrouted.
    fn take_misrouted(&self, tps: &[Tp]) -> bool {
        let mut misrouted = lock(&self.misrouted);
        let before = misrouted.len();
        misrouted.retain(|tp| !tps.contains(tp));
        misrouted.len() != before
    }
}

/// One task's partitions of its stage's consumer: a queue per consumed tp,
/// in the order of the task's lanes. Dropping it unassigns them.
pub(crate) struct TaskQueues {
    task: TaskId,
    stage: Arc<StageConsumer>,
    tps: Vec<Tp>,
    lanes: Vec<PartitionQueue<LogContext>>,
    wake: Arc<Wake>,
    assigned: bool,
}

impl TaskQueues {
    /// Task `task`'s queues on `stage`, for `tps` (its lanes, in order),
    /// not assigned yet: [`TaskQueues::assign`] starts the fetching.
    /// `wake` is what the queues notify when one turns non-empty (and
    /// whatever else should end the task's wait for records, a stop).
    pub(crate) fn new(
        task: TaskId,
        stage: Arc<StageConsumer>,
        tps: Vec<Tp>,
        wake: Arc<Wake>,
    ) -> TaskQueues {
        TaskQueues {
            task,
            stage,
            tps,
            lanes: Vec::new(),
            wake,
            assigned: false,
        }
    }

    /// The stage's consumer.
    pub(crate) fn stage(&self) -> &Arc<StageConsumer> {
        &self.stage
    }

    /// (Re)assigns every lane at `positions` (the task's, in lane order):
    /// at start and after every abort (Kafka's consumer does not rewind by
    /// itself, KAFKA-17582). Unassigning first drops whatever was fetched
    /// beyond the positions; each lane's queue is split off before the
    /// partition is assigned, so its records never reach the consumer's own
    /// queue. A failure names the tp it concerns, if one.
    pub(crate) fn assign(&mut self, positions: &[(Tp, u64)]) -> Result<(), RuntimeError> {
        debug_assert!(
            positions.iter().map(|(tp, _)| tp).eq(self.tps.iter()),
            "a task's queues are assigned at its own lanes' positions"
        );
        self.unassign();
        // Dropping a queue turns its wake-up off on the partition's queue
        // itself: the old ones go before the new ones are armed.
        self.lanes.clear();
        let failed = |tp: Option<&Tp>, source: KafkaError| RuntimeError::Consume {
            task: self.task.clone(),
            tp: tp.cloned(),
            source: Box::new(source),
        };
        let mut lanes = Vec::with_capacity(positions.len());
        let mut list = TopicPartitionList::with_capacity(positions.len());
        for (tp, offset) in positions {
            let partition = kafka_partition(tp);
            let offset = kafka_offset(tp, *offset)?;
            let mut queue = self
                .stage
                .client
                .split_partition_queue(tp.topic.as_str(), partition)
                .ok_or_else(|| {
                    failed(
                        Some(tp),
                        KafkaError::Subscription(format!("librdkafka has no queue for {tp}")),
                    )
                })?;
            let wake = Arc::clone(&self.wake);
            queue.set_nonempty_callback(move || wake.notify());
            lanes.push(queue);
            list.add_partition_offset(tp.topic.as_str(), partition, offset)
                .map_err(|source| failed(Some(tp), source))?;
        }
        self.lanes = lanes;
        self.stage
            .client
            .incremental_assign(&list)
            .map_err(|source| failed(None, source))?;
        self.assigned = true;
        // Anything queued already is served by the next pass.
        self.wake.notify();
        Ok(())
    }

    fn unassign(&mut self) {
        if !self.assigned {
            return;
        }
        let mut list = TopicPartitionList::with_capacity(self.tps.len());
        for tp in &self.tps {
            list.add_partition(tp.topic.as_str(), kafka_partition(tp));
        }
        if let Err(error) = self.stage.client.incremental_unassign(&list) {
            tracing::debug!(group = %self.stage.group, %error, "unassigning a task's partitions failed");
        }
        self.assigned = false;
    }

    /// The queue of lane `lane`.
    pub(crate) fn lane(&self, lane: usize) -> &PartitionQueue<LogContext> {
        &self.lanes[lane]
    }

    /// How many lanes there are.
    pub(crate) fn lanes(&self) -> usize {
        self.lanes.len()
    }

    /// Forgets earlier wake-ups: called before a pass over the lanes, so a
    /// record queued during the pass wakes the wait after it.
    pub(crate) fn arm(&self) {
        self.wake.arm();
    }

    /// Waits up to `timeout` for a lane to turn non-empty since
    /// [`TaskQueues::arm`].
    pub(crate) fn wait(&self, timeout: Duration) {
        self.wake.wait(timeout);
    }

    /// True, once, if a record of one of the task's partitions reached the
    /// stage consumer's own queue: the task reassigns at its positions.
    pub(crate) fn misrouted(&self) -> bool {
        self.stage.take_misrouted(&self.tps)
    }
}

impl Drop for TaskQueues {
    fn drop(&mut self) {
        self.lanes.clear();
        self.unassign();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tasks of one stage on an instance share one consumer, of the
    /// stage's group (X6); another stage gets its own. Making a client
    /// connects to nothing yet, so no broker is needed.
    #[test]
    fn x6_a_stage_s_tasks_share_one_consumer_of_the_stage_s_group() {
        let clients = SharedClients::new(&LiveConfig::new("127.0.0.1:9"));
        let first = clients.stage_consumer("app-balances").expect("a consumer");
        let again = clients.stage_consumer("app-balances").expect("a consumer");
        let other = clients.stage_consumer("app-totals").expect("a consumer");
        assert!(Arc::ptr_eq(&first, &again), "one consumer per stage");
        assert!(!Arc::ptr_eq(&first, &other), "each stage its own");
        assert_eq!(first.group(), "app-balances");
        assert_eq!(other.group(), "app-totals");
        let log_ends = clients.log_ends().expect("log_ends");
        assert!(Arc::ptr_eq(
            &log_ends,
            &clients.log_ends().expect("log_ends")
        ));
    }

    /// A stage's consumer that failed a task's start is renewed: the next
    /// task to start gets a fresh one, and a task that started on an older
    /// one renews nothing (the fresh one stays).
    #[test]
    fn a_stage_consumer_renewed_after_a_failed_start_is_made_afresh() {
        let clients = SharedClients::new(&LiveConfig::new("127.0.0.1:9"));
        let stale = clients.stage_consumer("app-balances").expect("a consumer");
        let renewed = clients
            .renew_stage_consumer(&stale)
            .expect("it was the stage's");
        assert!(Arc::ptr_eq(&renewed, &stale));
        let fresh = clients.stage_consumer("app-balances").expect("a consumer");
        assert!(!Arc::ptr_eq(&fresh, &stale), "a fresh consumer");
        assert!(clients.renew_stage_consumer(&stale).is_none());
        let again = clients.stage_consumer("app-balances").expect("a consumer");
        assert!(Arc::ptr_eq(&fresh, &again), "the fresh one stays");
    }

    /// A misrouted record of one task's partition is that task's to
    /// reassign, once; another task of the stage is not told.
    #[test]
    fn a_misrouted_partition_is_reported_once_to_its_own_task() {
        let clients = SharedClients::new(&LiveConfig::new("127.0.0.1:9"));
        let stage = clients.stage_consumer("app-balances").expect("a consumer");
        lock(&stage.misrouted).push(Tp::new("balances", 1));
        let mine = [Tp::new("balances", 1)];
        let theirs = [Tp::new("balances", 0)];
        assert!(!stage.take_misrouted(&theirs));
        assert!(stage.take_misrouted(&mine));
        assert!(!stage.take_misrouted(&mine), "reported once");
    }
}
