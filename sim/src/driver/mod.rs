//! The test driver: Parsley's TopologyTestDriver.
//!
//! It runs the real core — the same [`parsley::Task`] the simulator and the
//! live runtime run — over the in-memory Kafka model, one step at a time:
//! every pipe and every [`TestDriver::advance_wall_clock`] is processed
//! synchronously to quiescence and committed. The wall clock moves only when
//! the test moves it, so tick timestamps are deterministic.
//!
//! ```
//! use std::time::Duration;
//! use parsley::{Json, Parsley, Stage, Step, Topic};
//! use parsley_sim::TestDriver;
//!
//! let orders: Topic<String, i64> = Topic::new("orders");
//! let audits: Topic<String, String> = Topic::new("audits");
//! let balances = Stage::named("balances")
//!     .state(Json, || 0i64)
//!     .on(&orders, |balance: i64, order| Step::of(balance - order.value()))
//!     .ticks(Duration::from_secs(60), {
//!         let audits = audits.clone();
//!         move |tick| vec![audits.send(None, format!("cut@{}", tick.timestamp))]
//!     })
//!     .into(&audits)
//!     .build();
//! let app = Parsley::named("payments").stage(balances).build()?;
//!
//! let driver = TestDriver::builder(&app).initial_wall_clock(1_700_000_000_000).build()?;
//! driver.input(&orders)?.pipe("alice", 30)?;
//! driver.advance_wall_clock(Duration::from_secs(60))?;
//! let audits = driver.output(&audits)?;
//! assert_eq!(audits.read_value()?, "cut@1700000060000"); // consumes it
//! assert!(audits.is_empty());
//! assert_eq!(audits.read_values()?, ["cut@1700000060000"]); // reads all, consumes nothing
//! assert_eq!(driver.store::<i64>("balances")?.get("alice")?, Some(-30));
//! assert_eq!(driver.key_slot::<i64, _, _>("balances", &orders, &"alice".to_string())?, Some(-30));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod keys;
mod store;
mod topics;
mod trace;
mod world;

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::{self, ThreadId};
use std::time::Duration;

use bytes::Bytes;
use parsley::{assemble, App, RawBytes, TaskConfig, Topic, Tp};
use parsley::{PartitionRule, TopicContract};
use parsley::{SlotKey, Slots};
use parsley::{TaskId, TaskMetrics};

use crate::model::{Cluster, LogId};

pub use error::DriverError;
pub use keys::{IntoKey, IntoValue, JsonKey, StoreKey};
pub use store::KeyValueStore;
pub use topics::{render_records, OutputRecord, TestInputTopic, TestOutputTopic, TestRecord};
pub use trace::{render_ticks, TraceEvent};

use world::World;

/// Runs an application over the in-memory Kafka model, one synchronous step
/// at a time. It is `Send`, so a test
/// may move it (and its topic handles) to another thread.
pub struct TestDriver {
    world: Arc<Shared>,
}

/// The world the driver and its topic handles share, and the thread, if
/// any, that holds a [`ClusterView`] of it.
pub(crate) struct Shared {
    world: Mutex<World>,
    viewer: Mutex<Option<ThreadId>>,
}

impl Shared {
    fn new(world: World) -> Shared {
        Shared {
            world: Mutex::new(world),
            viewer: Mutex::new(None),
        }
    }

    /// Locks the world, waiting while another thread uses the driver. A
    /// panic while it was locked (a failed assertion inside a user's
    /// closure, say) leaves nothing half-done that a later call could
    /// misread: every step of the world completes or returns an error. A
    /// thread that still holds a [`ClusterView`] of this driver would wait
    /// for itself forever, so it is told instead.
    pub(crate) fn lock(&self) -> MutexGuard<'_, World> {
        match self.world.try_lock() {
            Ok(world) => world,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                let viewer = *self.viewer.lock().unwrap_or_else(PoisonError::into_inner);
                assert!(
                    viewer != Some(thread::current().id()),
                    "TestDriver: this thread still holds the view returned by TestDriver::cluster(); drop it before the next call on the driver or its topics"
                );
                self.world.lock().unwrap_or_else(PoisonError::into_inner)
            }
        }
    }
}

/// Where each partition of `topic` is in `cluster`, looked up once for a
/// typed handle; `None` if it has no such topic.
fn partition_logs(cluster: &Cluster, topic: &str) -> Option<Vec<LogId>> {
    let partitions = cluster.partitions(topic)?;
    let logs = (0..partitions)
        .map(|partition| {
            cluster
                .log_id(&Tp::new(topic, partition))
                .expect("every partition the model counts has a log")
        })
        .collect();
    Some(logs)
}

/// A read-only view of the driver's in-memory Kafka model. Other threads
/// wait while one is alive; the thread holding it must drop it before its
/// next call on the driver or its topics (that call panics, saying so,
/// rather than wait for itself).
pub struct ClusterView<'a> {
    shared: &'a Shared,
    world: MutexGuard<'a, World>,
}

impl Drop for ClusterView<'_> {
    fn drop(&mut self) {
        *self
            .shared
            .viewer
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }
}

impl Deref for ClusterView<'_> {
    type Target = Cluster;

    fn deref(&self) -> &Cluster {
        &self.world.cluster
    }
}

/// Configures a [`TestDriver`].
pub struct TestDriverBuilder {
    app: App,
    initial_wall_clock: i64,
    partitions: BTreeMap<String, u32>,
    default_partitions: u32,
    create_topics: bool,
    existing: Vec<(String, u32)>,
    commit_each_step: bool,
    commit_interval: Duration,
}

impl TestDriverBuilder {
    /// The wall clock at start, in milliseconds since the Unix epoch. Fixed,
    /// so that tick timestamps are deterministic. Default: 0.
    pub fn initial_wall_clock(mut self, millis: i64) -> Self {
        self.initial_wall_clock = millis;
        self
    }

    /// The partition count of a source or sink topic the driver creates.
    pub fn partitions(mut self, topic: impl AsRef<str>, partitions: u32) -> Self {
        self.partitions
            .insert(topic.as_ref().to_string(), partitions);
        self
    }

    /// The partition count of every other source and sink. Default: 1.
    pub fn default_partitions(mut self, partitions: u32) -> Self {
        self.default_partitions = partitions;
        self
    }

    /// Whether the driver creates every topic its topic contracts list (the default).
    /// Turn it off to see assembly (C3) fail loudly on missing topics.
    pub fn create_topics(mut self, create: bool) -> Self {
        self.create_topics = create;
        self
    }

    /// A topic that exists in the model before the driver creates the rest,
    /// with any partition count, such as a wrongly sized tick topic.
    pub fn existing_topic(mut self, topic: impl AsRef<str>, partitions: u32) -> Self {
        self.existing.push((topic.as_ref().to_string(), partitions));
        self
    }

    /// By default the driver commits after each step (X2), and a task on a
    /// path to a consistent view at each epoch's end (V5). With
    /// `commit_each_step(false)` tasks commit only when their commit interval
    /// has passed on the driver's wall clock.
    pub fn commit_each_step(mut self, each_step: bool) -> Self {
        self.commit_each_step = each_step;
        self
    }

    /// The tasks' commit interval (X2), used with `commit_each_step(false)`. Default: 100 ms.
    pub fn commit_interval(mut self, interval: Duration) -> Self {
        self.commit_interval = interval;
        self
    }

    fn partitions_for(&self, contract: &TopicContract, cluster: &Cluster) -> u32 {
        match &contract.partitions {
            PartitionRule::Any => self
                .partitions
                .get(contract.name.as_str())
                .copied()
                .unwrap_or(self.default_partitions),
            PartitionRule::MatchWidestOf(sources) => sources
                .iter()
                .filter_map(|source| cluster.partitions(source.as_str()))
                .max()
                .unwrap_or(self.default_partitions),
        }
    }

    /// Creates the topics, checks assembly (C3) and starts every task.
    pub fn build(self) -> Result<TestDriver, DriverError> {
        let mut cluster = Cluster::new();
        for (topic, partitions) in &self.existing {
            cluster.create_topic(topic, *partitions)?;
        }
        if self.create_topics {
            let contracts = TopicContract::list(&self.app);
            // Sources and sinks first: derived topics follow their counts.
            let (free, derived): (Vec<_>, Vec<_>) = contracts
                .iter()
                .partition(|contract| contract.partitions == PartitionRule::Any);
            // A derived topic is sized once the topics it follows exist: a
            // repartition topic (R1) is derived, and sizes its consumers'
            // own derived topics.
            let mut pending: Vec<&TopicContract> = free.into_iter().chain(derived).collect();
            while !pending.is_empty() {
                let ready = |contract: &TopicContract| match &contract.partitions {
                    PartitionRule::Any => true,
                    PartitionRule::MatchWidestOf(sources) => sources
                        .iter()
                        .all(|source| cluster.partitions(source.as_str()).is_some()),
                };
                // None ready (sizes that follow each other in a ring): the
                // rest take what is there, as before.
                let index = pending
                    .iter()
                    .position(|contract| ready(contract))
                    .unwrap_or(0);
                let contract = pending.remove(index);
                if cluster.partitions(contract.name.as_str()).is_some() {
                    continue;
                }
                let partitions = self.partitions_for(contract, &cluster);
                // Under the app's own name: the tasks' tps share its
                // allocation, so the model finds their logs by pointer.
                cluster.create_topic_named(contract.name.clone(), partitions)?;
            }
        }
        let assembly = assemble(&self.app, &cluster)?;
        // Each step commits: a commit is due as soon as there is work, and
        // a task on a path to a consistent view stops at each epoch's end
        // for it (V5).
        let config = TaskConfig {
            commit_interval: match self.commit_each_step {
                true => Duration::ZERO,
                false => self.commit_interval,
            },
        };
        let mut world = World::new(
            self.app,
            assembly,
            cluster,
            self.initial_wall_clock,
            config,
            self.commit_each_step,
        );
        world.start_tasks()?;
        Ok(TestDriver {
            world: Arc::new(Shared::new(world)),
        })
    }
}

impl TestDriver {
    /// A builder for a driver of `app`: initial wall clock, partition counts, commit behaviour.
    ///
    /// ```
    /// use std::time::Duration;
    /// use parsley::{Parsley, Stage, Topic};
    /// use parsley_sim::{TestDriver, TestRecord};
    ///
    /// let clicks: Topic<String, i64> = Topic::new("clicks");
    /// let beats: Topic<String, i64> = Topic::new("beats");
    /// let out = beats.clone();
    /// let stage = Stage::named("beat")
    ///     .on(&clicks, |_click| Vec::<parsley::Emission>::new())
    ///     .ticks(Duration::from_secs(10), move |tick| vec![out.send(None, tick.timestamp)])
    ///     .into(&beats)
    ///     .build();
    /// let app = Parsley::named("site").stage(stage).build()?;
    ///
    /// let driver = TestDriver::builder(&app)
    ///     .initial_wall_clock(1_000_000)
    ///     .partitions("clicks", 3) // three tasks, so three ticks per interval
    ///     .build()?;
    /// driver.input(&clicks)?.pipe_record(TestRecord::new(None, 1).partition(2).at(999_000))?;
    /// driver.advance_wall_clock(Duration::from_secs(10))?;
    /// assert_eq!(driver.output(&beats)?.read_values()?, [1_010_000; 3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(app: &App) -> TestDriverBuilder {
        TestDriverBuilder {
            app: app.clone(),
            initial_wall_clock: 0,
            partitions: BTreeMap::new(),
            default_partitions: 1,
            create_topics: true,
            existing: Vec::new(),
            commit_each_step: true,
            commit_interval: TaskConfig::default().commit_interval,
        }
    }

    /// A driver with the defaults: wall clock at 0, one partition per topic.
    pub fn new(app: &App) -> Result<TestDriver, DriverError> {
        TestDriver::builder(app).build()
    }

    /// A typed handle to pipe records into a source topic. Refused when no
    /// stage consumes the topic, or when the handle's codecs differ from the
    /// ones the application declares for it.
    pub fn input<K: 'static, V: 'static>(
        &self,
        topic: &Topic<K, V>,
    ) -> Result<TestInputTopic<K, V>, DriverError> {
        let world = self.world();
        check_source(&world.app, topic.name().as_str())?;
        check_codecs("input", &world.app, topic)?;
        Ok(TestInputTopic {
            topic: topic.clone(),
            world: Arc::clone(&self.world),
            logs: partition_logs(&world.cluster, topic.name().as_str()),
        })
    }

    /// A handle that pipes raw bytes into a source topic, whatever its
    /// declared codecs: for records read elsewhere (a real cluster, a file)
    /// and replayed byte for byte, and for bad input. Refused when no stage
    /// consumes the topic.
    pub fn input_raw(
        &self,
        topic: impl AsRef<str>,
    ) -> Result<TestInputTopic<Bytes, Bytes>, DriverError> {
        let world = self.world();
        check_source(&world.app, topic.as_ref())?;
        Ok(TestInputTopic {
            topic: Topic::with_codecs(topic.as_ref(), RawBytes, RawBytes),
            world: Arc::clone(&self.world),
            logs: partition_logs(&world.cluster, topic.as_ref()),
        })
    }

    /// A typed handle to read what was committed to a topic of the
    /// application: a sink, a source, a tick topic or a changelog. Refused for
    /// any other topic, and when the handle's codecs differ from the ones the
    /// application declares for it.
    pub fn output<K: 'static, V: 'static>(
        &self,
        topic: &Topic<K, V>,
    ) -> Result<TestOutputTopic<K, V>, DriverError> {
        let world = self.world();
        let name = topic.name().as_str();
        let known = TopicContract::list(&world.app)
            .iter()
            .any(|contract| contract.name.as_str() == name);
        let logs = match partition_logs(&world.cluster, name) {
            Some(logs) if known => logs,
            _ => {
                return Err(DriverError::NotATopicOfTheApp {
                    topic: name.to_string(),
                    app: world.app.id().to_string(),
                    sinks: world
                        .app
                        .sinks()
                        .iter()
                        .map(|sink| sink.to_string())
                        .collect(),
                })
            }
        };
        check_codecs("output", &world.app, topic)?;
        Ok(TestOutputTopic {
            topic: topic.clone(),
            world: Arc::clone(&self.world),
            logs,
        })
    }

    /// The wall clock, in milliseconds since the Unix epoch.
    pub fn wall_clock(&self) -> i64 {
        self.world().now
    }

    /// Moves the wall clock, emits every tick that is due (one per task at
    /// most, T3), commits, feeds the tick topics back and processes everything
    /// to quiescence.
    pub fn advance_wall_clock(&self, by: Duration) -> Result<(), DriverError> {
        let mut world = self.world();
        world.now = world
            .now
            .saturating_add(i64::try_from(by.as_millis()).unwrap_or(i64::MAX));
        world.run()
    }

    /// Stops fetching from `topic` (like `KafkaConsumer::pause`), so that
    /// records stay unconsumed — to make a claim wait, for example.
    pub fn pause(&self, topic: impl AsRef<str>) {
        self.world().paused.insert(topic.as_ref().to_string());
    }

    /// Stops the tasks of `stage` alone fetching from `topic`, while other
    /// stages that consume it go on: to hold one stage behind another on a
    /// topic both read (a foreign-key join's resolve stage behind its
    /// subscribe stage on the left table, J14). Undone by
    /// [`TestDriver::resume_stage`].
    pub fn pause_stage(&self, stage: &str, topic: impl AsRef<str>) {
        self.world()
            .paused_for_stage
            .insert((stage.to_string(), topic.as_ref().to_string()));
    }

    /// Resumes the tasks of `stage` fetching from `topic` and processes to
    /// quiescence.
    pub fn resume_stage(&self, stage: &str, topic: impl AsRef<str>) -> Result<(), DriverError> {
        let mut world = self.world();
        world
            .paused_for_stage
            .remove(&(stage.to_string(), topic.as_ref().to_string()));
        world.run()
    }

    /// Resumes fetching from `topic` and processes to quiescence.
    pub fn resume(&self, topic: impl AsRef<str>) -> Result<(), DriverError> {
        let mut world = self.world();
        world.paused.remove(topic.as_ref());
        world.run()
    }

    /// Makes the next commit of task `partition` of `stage` fail: its
    /// transaction aborts and the task retries from its last commit (X3).
    /// Refused for a stage or task the application does not have.
    pub fn fail_next_commit(&self, stage: &str, partition: u32) -> Result<(), DriverError> {
        let mut world = self.world();
        world.task_index(stage, partition)?;
        world.failing_commits.push(TaskId {
            stage: stage.into(),
            partition,
        });
        Ok(())
    }

    /// Crashes every task and starts it again from what was committed: the
    /// new producers fence the old ones (X4), slots come back from the
    /// changelogs (S5), positions, history and tick times from the committed
    /// offsets (G7, T3). Then processes to quiescence.
    pub fn restart(&self) -> Result<(), DriverError> {
        let mut world = self.world();
        world.start_tasks()?;
        world.run()
    }

    /// Crashes task `partition` of `stage` alone and starts it again from
    /// what its stage committed (X6: its own group's positions and
    /// checkpoint), then processes to quiescence. The new producer fences the
    /// old one (X4): whatever the task did since its last commit is aborted
    /// and redone, while every other task keeps its open work. With
    /// [`TestDriverBuilder::commit_each_step`]`(false)` this reproduces a
    /// single task failing between commits.
    pub fn restart_task(&self, stage: &str, partition: u32) -> Result<(), DriverError> {
        let mut world = self.world();
        world.restart_task(stage, partition)?;
        world.run()
    }

    /// Everything the driver saw happen, in order.
    pub fn trace(&self) -> Vec<TraceEvent> {
        self.world().trace.events()
    }

    /// The ticks so far, rendered for snapshots (see [`render_ticks`]).
    /// Keys and values of topics the application declares with the `I64`
    /// codec print as numbers; others as text when they are printable
    /// UTF-8 (`Utf8` and `Json`), as hex otherwise.
    pub fn tick_report(&self) -> String {
        let world = self.world();
        trace::render_ticks_decoded(
            &world.trace.events(),
            world.initial_wall_clock,
            &world.cluster,
            &world.app,
        )
    }

    /// The in-memory Kafka model, to inspect logs and offsets. Drop the view
    /// before the next call that steps the driver.
    pub fn cluster(&self) -> ClusterView<'_> {
        let world = self.world();
        *self
            .world
            .viewer
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(thread::current().id());
        ClusterView {
            shared: &self.world,
            world,
        }
    }

    /// C4: the topics the application needs.
    pub fn topic_contracts(&self) -> Vec<TopicContract> {
        TopicContract::list(&self.world().app)
    }

    /// Topics that hold records written by the application's tasks.
    pub fn produced_topics(&self) -> Vec<String> {
        let world = self.world();
        let mut topics: Vec<String> = world
            .trace
            .written_tps()
            .map(|tp| tp.topic.to_string())
            .collect();
        topics.sort();
        topics.dedup();
        topics
    }

    /// T8: the metrics of one task.
    pub fn metrics(&self, stage: &str, partition: u32) -> Result<TaskMetrics, DriverError> {
        self.with_task(stage, partition, |task| task.metrics())
    }

    /// T8: one metric summed over a stage's tasks, by its published name.
    /// Refused for an unknown stage or metric name.
    pub fn metric(&self, stage: &str, name: &str) -> Result<u64, DriverError> {
        let world = self.world();
        world.check_stage(stage)?;
        let mut known = Vec::new();
        let mut total = None;
        for host in world
            .hosts
            .iter()
            .filter(|host| *host.task.id().stage == *stage)
        {
            for (metric, value) in host.task.metrics().named() {
                if metric == name {
                    *total.get_or_insert(0) += value;
                }
                if !known.contains(&metric) {
                    known.push(metric);
                }
            }
        }
        match total {
            Some(total) => Ok(total),
            None if known.is_empty() => Ok(0),
            None => Err(DriverError::UnknownMetric {
                name: name.to_string(),
                known,
            }),
        }
    }

    /// X5's opt-in: what `stage` dead-lettered and committed, read back from
    /// its dead-letter topic `<application.id>-<stage>-dlq`, partition by
    /// partition, in offset order. Refused for a stage without the opt-in.
    pub fn dead_letters(&self, stage: &str) -> Result<Vec<parsley::DeadLetter>, DriverError> {
        let world = self.world();
        world.check_stage(stage)?;
        let plan = world.app.stage(stage).expect("checked above");
        let topic = plan
            .dead_letter
            .clone()
            .ok_or_else(|| DriverError::NoDeadLetterTopic {
                stage: stage.to_string(),
            })?;
        let partitions = world.assembly.partitions_of(topic.as_str()).unwrap_or(0);
        let mut letters = Vec::new();
        for partition in 0..partitions {
            let tp = Tp::new(topic.clone(), partition);
            for (offset, data) in world.cluster.log(&tp)?.read_committed() {
                let letter = parsley::DeadLetter::from_record(data).map_err(|error| {
                    DriverError::NotADeadLetter {
                        tp: tp.clone(),
                        offset,
                        error,
                    }
                })?;
                letters.push(letter);
            }
        }
        Ok(letters)
    }

    /// X5: the operator's skip, as the live runtime's `skip` command does it.
    /// If task `partition` of `stage` stopped, it is restarted from what its
    /// stage committed (its position stays before the record it stopped on);
    /// then [`parsley::Task::skip`] names `offset` of `tp`, and the driver
    /// processes to quiescence: the task dead-letters that record (as
    /// `skipped`) when it reaches it. Refused, with nothing skipped, as
    /// [`parsley::Task::skip`] refuses.
    pub fn skip(
        &self,
        stage: &str,
        partition: u32,
        tp: &Tp,
        offset: u64,
    ) -> Result<(), DriverError> {
        let mut world = self.world();
        let index = world.task_index(stage, partition)?;
        if world.hosts[index].task.failure().is_some() {
            world.restart_task(stage, partition)?;
        }
        world.hosts[index].task.skip(tp, offset)?;
        world.run()
    }

    /// The tasks that stopped on bad input or failing logic, with why.
    pub fn stopped_tasks(&self) -> Vec<parsley::TaskError> {
        self.world().stopped.clone()
    }

    fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock()
    }

    fn with_task<T>(
        &self,
        stage: &str,
        partition: u32,
        read: impl FnOnce(&parsley::Task) -> T,
    ) -> Result<T, DriverError> {
        let world = self.world();
        let index = world.task_index(stage, partition)?;
        Ok(read(&world.hosts[index].task))
    }

    fn committed_slot<S: Clone + 'static>(
        &self,
        stage: &str,
        partition: u32,
        slot: &SlotKey,
    ) -> Result<Option<S>, DriverError> {
        self.with_task(stage, partition, |task| {
            task.slots::<S>()
                .map(|slots: &Slots<S>| slots.committed(slot).cloned())
                .ok_or(DriverError::WrongStateType {
                    stage: stage.to_string(),
                    type_name: std::any::type_name::<S>(),
                })
        })?
    }

    /// The committed state of `key`'s slot in `stage`, found on the task that
    /// consumes the partition `key` goes to in `topic`. `None` when unseen or
    /// deleted (it then reads as the initial value).
    pub fn key_slot<S: Clone + 'static, K: 'static, V: 'static>(
        &self,
        stage: &str,
        topic: &Topic<K, V>,
        key: &K,
    ) -> Result<Option<S>, DriverError> {
        let bytes = topic
            .key_codec()
            .encode(key)
            .map_err(|error| DriverError::InputCodec {
                topic: topic.name().to_string(),
                part: "key",
                error,
            })?;
        let partitions = self
            .world()
            .cluster
            .partitions(topic.name().as_str())
            .ok_or_else(|| DriverError::UnknownTopic {
                topic: topic.name().to_string(),
            })?;
        let partition = parsley::partition_for(Some(&bytes), partitions, 0);
        self.committed_slot(stage, partition, &SlotKey::Key(bytes))
    }

    /// A view of the committed state of a stateful stage by key, with no
    /// source topic named (Kafka Streams' `getKeyValueStore(name)`): the
    /// driver encodes a key as the stage's sources encode theirs and finds
    /// its task itself. `driver.store::<i64>("report")?.get("home")?` reads
    /// as `driver.key_slot::<i64, _, _>("report", &views, &"home".to_string())?`.
    /// Refused for an unknown stage, and when `S` is not the stage's state
    /// type (a stateless stage has none).
    #[doc(alias = "getKeyValueStore")]
    pub fn store<S: Clone + 'static>(&self, stage: &str) -> Result<KeyValueStore<S>, DriverError> {
        let world = self.world();
        world.check_stage(stage)?;
        let typed = world
            .hosts
            .iter()
            .filter(|host| *host.task.id().stage == *stage)
            .all(|host| host.task.slots::<S>().is_some());
        if !typed
            || world
                .app
                .stage(stage)
                .is_some_and(|plan| !plan.stage.is_stateful())
        {
            return Err(DriverError::WrongStateType {
                stage: stage.to_string(),
                type_name: std::any::type_name::<S>(),
            });
        }
        Ok(KeyValueStore {
            world: Arc::clone(&self.world),
            stage: stage.to_string(),
            state: std::marker::PhantomData,
        })
    }

    /// The committed state of the null key's slot of one task.
    pub fn null_key_slot<S: Clone + 'static>(
        &self,
        stage: &str,
        partition: u32,
    ) -> Result<Option<S>, DriverError> {
        self.committed_slot(stage, partition, &SlotKey::Null)
    }

    /// The pending timers of a timer service (K2,
    /// `parsley::TimerService`): every timer its tasks hold that has
    /// not fired, as the times they are due, earliest first. After a pipe or
    /// [`TestDriver::advance_wall_clock`] everything is committed, so these
    /// are the committed pending timers; `advance_wall_clock` past a time
    /// fires its timers (at the service's next tick: at most one resolution
    /// late).
    pub fn pending_timers(&self, stage: &str) -> Result<Vec<i64>, DriverError> {
        let world = self.world();
        world.check_stage(stage)?;
        let mut due = Vec::new();
        for host in world
            .hosts
            .iter()
            .filter(|host| *host.task.id().stage == *stage)
        {
            let pending = parsley::pending_of(host.task.slots_view()).ok_or_else(|| {
                DriverError::NotATimerService {
                    stage: stage.to_string(),
                }
            })?;
            due.extend(pending.into_iter().map(|(_, at)| at));
        }
        due.sort_unstable();
        Ok(due)
    }

    /// The open windows of a windowed aggregation (W1,
    /// `parsley::Windows`; Kafka Streams' `getWindowStore`) with
    /// their aggregates, keys decoded with `source`'s key codec, across its
    /// tasks in the order they will close (end, then key, then start). A
    /// closed window is no longer listed. Refused for an unknown stage, a
    /// stage that is not a windowed aggregation, and when `A` is not its
    /// aggregate type.
    #[doc(alias = "getWindowStore")]
    pub fn open_windows<A: Clone + Send + Sync + 'static, K: 'static, V: 'static>(
        &self,
        stage: &str,
        source: &Topic<K, V>,
    ) -> Result<Vec<(parsley::Windowed<K>, A)>, DriverError> {
        let world = self.world();
        world.check_stage(stage)?;
        if world.app.stage(stage).is_some_and(|plan| {
            plan.stage
                .hooks()
                .operator::<parsley::WindowDecl>()
                .is_none()
        }) {
            return Err(DriverError::NotAWindowedAggregation {
                stage: stage.to_string(),
            });
        }
        let mut open = Vec::new();
        for host in world
            .hosts
            .iter()
            .filter(|host| *host.task.id().stage == *stage)
        {
            let windows =
                parsley::open_windows_of::<A>(host.task.slots_view()).ok_or_else(|| {
                    DriverError::WrongStateType {
                        stage: stage.to_string(),
                        type_name: std::any::type_name::<A>(),
                    }
                })?;
            open.extend(windows);
        }
        open.sort_by(|a, b| (a.end, a.start, &a.key).cmp(&(b.end, b.start, &b.key)));
        open.into_iter()
            .map(|window| {
                let key = source.key_codec().decode(&window.key).map_err(|error| {
                    DriverError::InputCodec {
                        topic: source.name().to_string(),
                        part: "key",
                        error,
                    }
                })?;
                let windowed = parsley::Windowed {
                    key,
                    start: window.start,
                    end: window.end,
                };
                Ok((windowed, window.aggregate))
            })
            .collect()
    }

    /// The table of a stream–table join (J1, `parsley::Join`; Kafka
    /// Streams' `getKeyValueStore` of the `KTable`): each key's row, as its
    /// task holds it now, keys decoded with `table`'s key codec, in key-byte
    /// order across the stage's tasks. A deleted row is no longer listed.
    /// Refused for an unknown stage, a stage that is not a join, and when
    /// `T` is not its table's value type.
    #[doc(alias = "getKeyValueStore")]
    pub fn table<K: 'static, T: Clone + Send + Sync + 'static>(
        &self,
        stage: &str,
        table: &Topic<K, T>,
    ) -> Result<Vec<(K, T)>, DriverError> {
        let world = self.world();
        world.check_stage(stage)?;
        if world
            .app
            .stage(stage)
            .is_some_and(|plan| plan.stage.hooks().operator::<parsley::JoinDecl>().is_none())
        {
            return Err(DriverError::NotAJoin {
                stage: stage.to_string(),
            });
        }
        let mut rows = Vec::new();
        for host in world
            .hosts
            .iter()
            .filter(|host| *host.task.id().stage == *stage)
        {
            rows.extend(
                parsley::rows_of::<T>(host.task.slots_view()).ok_or_else(|| {
                    DriverError::WrongStateType {
                        stage: stage.to_string(),
                        type_name: std::any::type_name::<T>(),
                    }
                })?,
            );
        }
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        rows.into_iter()
            .map(|(key, row)| {
                let key =
                    table
                        .key_codec()
                        .decode(&key)
                        .map_err(|error| DriverError::InputCodec {
                            topic: table.name().to_string(),
                            part: "key",
                            error,
                        })?;
                Ok((key, row))
            })
            .collect()
    }

    /// The two tables of a table–table join (J8,
    /// `parsley::Join::table_table`; Kafka Streams' `getKeyValueStore`
    /// of each source `KTable`): each key with its left and right values as
    /// its task holds them now (`None` for a side without one), keys and
    /// values decoded with `left`'s and `right`'s codecs, in key-byte order
    /// across the stage's tasks. A key that lost both sides is no longer
    /// listed. Refused for an unknown stage and a stage that is not a
    /// table–table join.
    #[allow(clippy::type_complexity)]
    pub fn table_sides<K: 'static, L: 'static, R: 'static>(
        &self,
        stage: &str,
        left: &Topic<K, L>,
        right: &Topic<K, R>,
    ) -> Result<Vec<(K, Option<L>, Option<R>)>, DriverError> {
        let world = self.world();
        world.check_stage(stage)?;
        let not_a_join = || DriverError::NotATableJoin {
            stage: stage.to_string(),
        };
        if world.app.stage(stage).is_some_and(|plan| {
            plan.stage
                .hooks()
                .operator::<parsley::TableJoinDecl>()
                .is_none()
        }) {
            return Err(not_a_join());
        }
        let mut sides = Vec::new();
        for host in world
            .hosts
            .iter()
            .filter(|host| *host.task.id().stage == *stage)
        {
            sides.extend(parsley::sides_of(host.task.slots_view()).ok_or_else(not_a_join)?);
        }
        sides.sort_by(|a, b| a.key.cmp(&b.key));
        let refused = |topic: &str, part: &'static str| {
            let topic = topic.to_string();
            move |error| DriverError::InputCodec { topic, part, error }
        };
        sides
            .into_iter()
            .map(|sides| {
                let key = left
                    .key_codec()
                    .decode(&sides.key)
                    .map_err(refused(left.name().as_str(), "key"))?;
                let left_value = sides
                    .left
                    .map(|bytes| left.value_codec().decode(&bytes))
                    .transpose()
                    .map_err(refused(left.name().as_str(), "value"))?;
                let right_value = sides
                    .right
                    .map(|bytes| right.value_codec().decode(&bytes))
                    .transpose()
                    .map_err(refused(right.name().as_str(), "value"))?;
                Ok((key, left_value, right_value))
            })
            .collect()
    }

    /// The live state of an expiring fold (E1, `parsley::Expiring`):
    /// each live key with its state and the time it expires (milliseconds
    /// since the epoch), keys decoded with `source`'s key codec, in
    /// key-byte order across the stage's tasks. An expired key is no longer
    /// listed. Refused for an unknown stage, a stage that is not an expiring
    /// fold, and when `S` is not its state type.
    pub fn live_state<S: Clone + Send + Sync + 'static, K: 'static, V: 'static>(
        &self,
        stage: &str,
        source: &Topic<K, V>,
    ) -> Result<Vec<(K, S, i64)>, DriverError> {
        let world = self.world();
        world.check_stage(stage)?;
        if world.app.stage(stage).is_some_and(|plan| {
            plan.stage
                .hooks()
                .operator::<parsley::ExpiryDecl>()
                .is_none()
        }) {
            return Err(DriverError::NotExpiring {
                stage: stage.to_string(),
            });
        }
        let mut live = Vec::new();
        for host in world
            .hosts
            .iter()
            .filter(|host| *host.task.id().stage == *stage)
        {
            live.extend(
                parsley::live_state_of::<S>(host.task.slots_view()).ok_or_else(|| {
                    DriverError::WrongStateType {
                        stage: stage.to_string(),
                        type_name: std::any::type_name::<S>(),
                    }
                })?,
            );
        }
        live.sort_by(|a, b| a.0.cmp(&b.0));
        live.into_iter()
            .map(|(key, state, expires_at)| {
                let key =
                    source
                        .key_codec()
                        .decode(&key)
                        .map_err(|error| DriverError::InputCodec {
                            topic: source.name().to_string(),
                            part: "key",
                            error,
                        })?;
                Ok((key, state, expires_at))
            })
            .collect()
    }

    /// The committed state of one task's tick slot (T7).
    pub fn tick_slot<S: Clone + 'static>(
        &self,
        stage: &str,
        partition: u32,
    ) -> Result<Option<S>, DriverError> {
        self.committed_slot(stage, partition, &SlotKey::Tick)
    }
}

/// Refuses a topic no stage consumes.
fn check_source(app: &App, topic: &str) -> Result<(), DriverError> {
    let consumed = app.stages().iter().any(|plan| {
        plan.stage
            .sources()
            .iter()
            .any(|source| source.name.as_str() == topic)
    });
    match consumed {
        true => Ok(()),
        false => Err(DriverError::NotASource {
            topic: topic.to_string(),
            app: app.id().to_string(),
        }),
    }
}

/// Refuses a typed handle whose codecs differ from the application's
/// declaration of its topic; Parsley's own topics (ticks, changelogs) have no
/// declaration to differ from.
fn check_codecs<K: 'static, V: 'static>(
    call: &'static str,
    app: &App,
    topic: &Topic<K, V>,
) -> Result<(), DriverError> {
    let given = topic.declaration();
    match app.declaration(topic.name().as_str()) {
        Some(declared) if !declared.same_codecs(&given) => Err(DriverError::CodecMismatch {
            call,
            topic: topic.name().to_string(),
            app: app.id().to_string(),
            declared: declared.codecs().unwrap_or_default(),
            given: given.codecs().unwrap_or_default(),
        }),
        _ => Ok(()),
    }
}
