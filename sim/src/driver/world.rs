//! The driver's world: the model, one [`TaskHost`] per task, the wall clock,
//! and the loop that runs everything to quiescence.

use std::collections::{BTreeSet, HashMap, HashSet};

use parsley::Assembly;
use parsley::TaskId;
use parsley::{App, TaskConfig, TaskError, Tp};

use crate::driver::error::{closest, DriverError};
use crate::driver::trace::{Trace, TraceEvent};
use crate::host::{CommitOutcome, Markers, TaskHost};
use crate::model::Cluster;

pub(crate) struct World {
    pub app: App,
    pub assembly: Assembly,
    pub cluster: Cluster,
    pub now: i64,
    pub initial_wall_clock: i64,
    pub hosts: Vec<TaskHost>,
    pub config: TaskConfig,
    pub commit_each_step: bool,
    pub rounds_max: usize,
    pub paused: BTreeSet<String>,
    /// Topics paused for one stage's tasks only, as (stage, topic).
    pub paused_for_stage: BTreeSet<(String, String)>,
    /// Tasks whose next commit the test asked to fail.
    pub failing_commits: Vec<TaskId>,
    pub trace: Trace,
    held_seen: HashSet<(TaskId, Tp, u64)>,
    /// Errors of tasks that stopped, in the order they stopped.
    pub stopped: Vec<TaskError>,
    /// How many of `stopped` a step has returned: each stop is returned once
    /// as [`DriverError::Task`], later steps say the task is stopped.
    reported: usize,
    /// The output queues, one per topic as a TopologyTestDriver keeps them:
    /// per partition, where the next consuming read of the topic starts.
    /// Every handle of a topic reads from (and consumes) the same queue.
    pub read_positions: HashMap<String, Vec<u64>>,
}

impl World {
    pub fn new(
        app: App,
        assembly: Assembly,
        cluster: Cluster,
        now: i64,
        config: TaskConfig,
        commit_each_step: bool,
    ) -> Self {
        World {
            app,
            assembly,
            cluster,
            now,
            initial_wall_clock: now,
            hosts: Vec::new(),
            config,
            commit_each_step,
            rounds_max: 10_000,
            paused: BTreeSet::new(),
            paused_for_stage: BTreeSet::new(),
            failing_commits: Vec::new(),
            trace: Trace::default(),
            held_seen: HashSet::new(),
            stopped: Vec::new(),
            reported: 0,
            read_positions: HashMap::new(),
        }
    }

    /// Refuses a stage name the application does not have, listing the ones
    /// it has and the closest of them.
    pub fn check_stage(&self, stage: &str) -> Result<(), DriverError> {
        if self.app.stage(stage).is_some() {
            return Ok(());
        }
        let known: Vec<String> = self
            .app
            .stages()
            .iter()
            .map(|plan| plan.name().to_string())
            .collect();
        Err(DriverError::UnknownStage {
            stage: stage.to_string(),
            app: self.app.id().to_string(),
            suggestion: closest(stage, known.iter().map(String::as_str)),
            known,
        })
    }

    /// Where the host of task `partition` of `stage` is.
    pub fn task_index(&self, stage: &str, partition: u32) -> Result<usize, DriverError> {
        self.check_stage(stage)?;
        self.hosts
            .iter()
            .position(|host| {
                let id = host.task.id();
                *id.stage == *stage && id.partition == partition
            })
            .ok_or_else(|| DriverError::UnknownTask {
                stage: stage.to_string(),
                partition,
                tasks: self
                    .assembly
                    .tasks
                    .iter()
                    .find(|(name, _)| name == stage)
                    .map_or(0, |(_, tasks)| *tasks),
            })
    }

    /// Starts (or restarts) every task of the application. A restart is a
    /// crash of the old instances: whatever they had not committed is lost,
    /// and the new producers fence them (X4).
    pub fn start_tasks(&mut self) -> Result<(), DriverError> {
        self.hosts.clear();
        self.stopped.clear();
        self.reported = 0;
        self.held_seen.clear();
        for (stage, tasks) in self.assembly.tasks.clone() {
            for partition in 0..tasks {
                let host = TaskHost::start(
                    &mut self.cluster,
                    &self.app,
                    &self.assembly,
                    &stage,
                    partition,
                    self.config,
                    self.now,
                )?;
                self.hosts.push(host);
            }
        }
        Ok(())
    }

    /// Crashes one task and starts it again from what its stage's group
    /// committed (X6): the new producer fences the old one and aborts its
    /// open transaction (X4), so everything the task did since its last
    /// commit is lost and redone. Other tasks keep their open work.
    pub fn restart_task(&mut self, stage: &str, partition: u32) -> Result<(), DriverError> {
        let index = self.task_index(stage, partition)?;
        let host = TaskHost::start(
            &mut self.cluster,
            &self.app,
            &self.assembly,
            stage,
            partition,
            self.config,
            self.now,
        )?;
        let id = host.task.id().clone();
        // A task stops once and stays stopped: at most one entry is its.
        if let Some(at) = self.stopped.iter().position(|error| *error.task() == id) {
            self.stopped.remove(at);
            if at < self.reported {
                self.reported -= 1;
            }
        }
        self.held_seen.retain(|(task, _, _)| *task != id);
        self.hosts[index] = host;
        Ok(())
    }

    fn is_stopped(&self, index: usize) -> bool {
        self.hosts[index].task.failure().is_some()
    }

    /// One step of the driver: emit due ticks, then fetch, deliver and commit
    /// until nothing moves (X2: the driver commits after each step).
    pub fn run(&mut self) -> Result<(), DriverError> {
        let mut quiet = false;
        for _ in 0..self.rounds_max {
            let mut progressed = false;
            for index in 0..self.hosts.len() {
                if self.is_stopped(index) {
                    continue;
                }
                progressed |= self.run_host(index)?;
            }
            for index in 0..self.hosts.len() {
                if !self.is_stopped(index) {
                    progressed |= self.commit_host(index)?;
                }
            }
            if !progressed {
                quiet = true;
                break;
            }
        }
        if !quiet {
            return Err(DriverError::NoQuiescence {
                rounds_max: self.rounds_max,
            });
        }
        // A stop is returned once, by the step that caused it; a stopped
        // task stays stopped, and every later step says so, so that input
        // piling up behind it is never silently ignored.
        if let Some(error) = self.stopped.get(self.reported) {
            let error = DriverError::Task(error.clone());
            self.reported = self.stopped.len();
            return Err(error);
        }
        match self.stopped.first() {
            Some(first) => Err(DriverError::TaskStopped {
                tasks: self
                    .stopped
                    .iter()
                    .map(|error| error.task().to_string())
                    .collect(),
                first: first.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Ticks, fetches and deliveries of one task. Returns whether anything
    /// happened.
    fn run_host(&mut self, index: usize) -> Result<bool, DriverError> {
        let now = self.now;
        let mut progressed = false;
        let host = &mut self.hosts[index];
        match host.poll_tick(&mut self.cluster, now) {
            Ok(Some(tick)) => {
                progressed = true;
                self.trace.push(TraceEvent::TickEmitted {
                    task: self.hosts[index].task.id().clone(),
                    at: now,
                    tp: tick.tp,
                    offset: tick.offset,
                    stamp: tick.stamp,
                });
            }
            Ok(None) => {}
            Err(error) => return Err(error.into()),
        }
        let host = &mut self.hosts[index];
        // Records still buffered when this round starts are held: the last
        // round delivered all it could. A held head is judged on log ends
        // fetched after it was held (G6), so such a task fetches every lane.
        let holding = host.task.buffered() > 0;
        for lane in 0..host.positions().len() {
            let topic = host.positions()[lane].0.topic.as_str();
            let paused = self.paused.contains(topic)
                || (!self.paused_for_stage.is_empty()
                    && self
                        .paused_for_stage
                        .contains(&(host.task.id().stage.to_string(), topic.to_string())));
            if paused {
                // A paused topic's records stay unfetched, but a task that
                // delivers in timestamp order (G9) learns that the log has
                // more, as an empty fetch tells a consumer, and waits for
                // them until the topic is resumed.
                if host.task.is_synchronised() && host.has_news(&self.cluster, lane) {
                    host.fetch(&self.cluster, lane, 0)?;
                }
                continue;
            }
            // Otherwise a fetch with no records and no new log end changes
            // nothing the gate decides on.
            if !holding && !host.has_news(&self.cluster, lane) {
                continue;
            }
            progressed |= host.fetch(&self.cluster, lane, usize::MAX)? > 0;
        }
        loop {
            let host = &mut self.hosts[index];
            let next = match host.task.next_deliverable(now) {
                Ok(next) => next,
                Err(error) => return self.stop(index, error).map(|()| true),
            };
            let Some(tp) = next else {
                if self.hosts[index].task.buffered() > 0 {
                    self.trace_holds(index);
                }
                break;
            };
            // The record next in line: its lane's head, or, on a path to a
            // consistent view, its first of the epoch delivered (V4).
            let offset = host
                .task
                .head(&tp)
                .map(|record| record.offset)
                .expect("a deliverable tp has a record next in line");
            let tick_timestamp = match host.task.tick_tp() == Some(&tp) {
                true => host
                    .task
                    .head(&tp)
                    .and_then(parsley::tick_of)
                    .map(|tick| tick.timestamp),
                false => None,
            };
            let host = &mut self.hosts[index];
            match host.deliver(&mut self.cluster, &tp, now, self.trace.sent_list()) {
                Ok(()) => {
                    progressed = true;
                    self.trace
                        .delivered(host.task.id(), now, &tp, offset, tick_timestamp);
                }
                Err(crate::host::HostError::Task(error)) => {
                    return self.stop(index, error).map(|()| true)
                }
                Err(error) => return Err(error.into()),
            }
        }
        Ok(progressed)
    }

    /// Records in the trace each head first seen held, with its claim.
    fn trace_holds(&mut self, index: usize) {
        let host = &self.hosts[index];
        let task = host.task.id();
        let tick_tp = host.task.tick_tp();
        for (_, tp, offset, claim) in host.task.held_heads() {
            let key = (task.clone(), tp.clone(), offset);
            if !self.held_seen.contains(&key) {
                self.held_seen.insert(key);
                self.trace.push(TraceEvent::Held {
                    task: task.clone(),
                    at: self.now,
                    tick: tick_tp == Some(tp),
                    tp: tp.clone(),
                    offset,
                    claim,
                });
            }
        }
    }

    /// A task hit bad input or failing logic: abort its transaction so that its
    /// committed position stays before the record, and keep it stopped.
    fn stop(&mut self, index: usize, error: TaskError) -> Result<(), DriverError> {
        let host = &mut self.hosts[index];
        host.abort(&mut self.cluster);
        self.trace.push(TraceEvent::Aborted {
            task: host.task.id().clone(),
            at: self.now,
            reason: error.to_string(),
        });
        self.stopped.push(error);
        Ok(())
    }

    fn commit_host(&mut self, index: usize) -> Result<bool, DriverError> {
        let now = self.now;
        let host = &mut self.hosts[index];
        let each_step =
            self.commit_each_step && host.task.has_open_work() && host.task.may_commit();
        if !(each_step || host.task.wants_commit(now)) {
            return Ok(false);
        }
        let task = host.task.id().clone();
        if let Some(position) = self
            .failing_commits
            .iter()
            .position(|failing| *failing == task)
        {
            self.failing_commits.remove(position);
            host.abort(&mut self.cluster);
            self.trace.push(TraceEvent::Aborted {
                task,
                at: now,
                reason: "the test failed this commit".to_string(),
            });
            return Ok(true);
        }
        let outcome =
            host.commit_with(&mut self.cluster, now, Markers::Now, self.trace.sent_list())?;
        match outcome {
            CommitOutcome::Nothing => Ok(false),
            CommitOutcome::Committed => {
                self.trace.committed(&task, now);
                Ok(true)
            }
            CommitOutcome::Aborted(error) => {
                self.trace.push(TraceEvent::Aborted {
                    task,
                    at: now,
                    reason: error.to_string(),
                });
                Ok(true)
            }
        }
    }
}
