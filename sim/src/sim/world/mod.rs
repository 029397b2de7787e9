//! The simulated world: the Kafka model, application instances owning task
//! hosts, input producers and the wall clock.
//!
//! The world runs the *same* core `Task` (through the same [`TaskHost`]) as
//! the test driver and the live runtime; it only decides, from its
//! [`Choices`], what happens next: which action, on which task, which
//! deliverable head, how far the clock moves, whether a fault fires. Every
//! decision is recorded on the choice tape and every effect in the trace.
//!
//! The bottom wing of the simulator: the world is built from a plain
//! [`Plan`] (the app, the inputs with their types erased in [`input`], the
//! knobs in [`settings`]), draws from [`choice`] (its tapes as text in
//! [`tape`]), and writes [`trace`] and [`stats`]. Nothing here imports the
//! checker, the reports or the running wing above.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use parsley::partition_for;
use parsley::Assembly;
use parsley::RecordData;
use parsley::{assemble, App, Claim, Stamp, TaskConfig, Tp};
use parsley::{HeadStatus, TaskId};

use crate::host::{CommitOutcome, HostError, Markers, Sent, TaskHost};
use crate::model::{Cluster, ModelError};
use rustc_hash::{FxHashMap, FxHashSet};

use choice::Choices;
use input::{Draw, Encoded, PlainInput};
use plan::Plan;
use settings::{FaultRates, Settings};
use stats::Stats;
use trace::{AbortCause, Entry, Event, InputOutcome, TaskAt, TxnRef};

mod boundary;
pub(crate) mod choice;
pub(crate) mod disk;
mod explore;
pub(crate) mod input;
mod order;
pub(crate) mod plan;
mod query;
pub(crate) mod settings;
pub(crate) mod stats;
pub(crate) mod tape;
pub(crate) mod trace;

struct Instance {
    alive: bool,
    hosts: Vec<Hosted>,
}

/// A host with where it runs, kept beside it so that recording an event
/// copies no task name.
struct Hosted {
    at: TaskAt,
    /// The task's index among the world's tasks, for cheap keys.
    index: u32,
    host: TaskHost,
}

/// What kind of step the world took, for the shrinker's passes that drop
/// whole inputs and whole faults first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum StepKind {
    /// Produced input records.
    Input,
    /// A fault (an abort, a failed commit, a crash, a move, a hanging
    /// transaction, a record the logic rejects) or a restart.
    Fault,
    /// Anything else: a delivery, a fetch, a commit, a tick, a clock step.
    #[default]
    Other,
}

/// Every action and fault the world can take in one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Deliver,
    Fetch,
    Produce,
    Commit,
    Tick,
    AdvanceClock,
    Recover,
    FaultAbort,
    FaultCommitFailure,
    FaultCrash,
    FaultMove,
    FaultHanging,
    FaultLogicError,
}

/// The whole hour (2023-11-14T22:00:00Z) every world's wall clock starts
/// at or after: each world starts at a whole minute of that hour, drawn
/// from its choices (the zero word: the hour itself). Logic that keys on a
/// minute, an hour or a window of its own so meets its boundaries within a
/// run, as a clock starting on a whole second alone would not.
pub(crate) const WORLD_BASE_MS: i64 = 1_699_999_200_000;
/// The whole minutes after [`WORLD_BASE_MS`] a world may start at.
const WORLD_START_MINUTES: u32 = 60;

/// The simulated world: the model, the application instances and their tasks, inputs and the wall clock. Every choice comes from the run's choice source.
pub(crate) struct World {
    /// Each external source's generators (the plan's).
    inputs: Arc<[PlainInput]>,
    /// The application this run simulates (the plan's).
    pub(crate) app: App,
    /// The records the logic-error fault produced (X5): stops on them, or
    /// on what they caused, are expected.
    pub(crate) rejected: Vec<(Tp, u64)>,
    /// Task starts the model refused, with the step and why: each also
    /// stops its task (see [`Event::TaskStopped`]).
    pub(crate) refused: Vec<(u64, TaskAt, String)>,
    /// The instances' local disks, when the settings model them (S6).
    disks: Option<disk::Disks>,
    /// Every restore through a local store, for I19.
    pub(crate) restores: Vec<disk::Restore>,
    /// The stages an interactive query may ask (Q1).
    queryable: Vec<Arc<str>>,
    /// Its assembly on the model.
    pub(crate) assembly: Assembly,
    /// The in-memory Kafka model.
    pub(crate) cluster: Cluster,
    /// The wall clock, milliseconds since the epoch.
    pub(crate) now: i64,
    /// Everything that happened so far.
    pub(crate) trace: Vec<Entry>,
    /// The counters so far.
    pub(crate) stats: Stats,
    settings: Settings,
    faults: FaultRates,
    /// Each fault's share of the action draw's range, in draws per million
    /// (see [`World::draw_action`]); fixed for the run.
    fault_ppm: [(Action, u32); 6],
    instances: Vec<Instance>,
    owners: BTreeMap<TaskId, u32>,
    /// Tasks whose owner has yet to start them (after a move or a crash).
    pending_starts: BTreeSet<TaskId>,
    /// The producer epoch of each task's newest incarnation.
    newest: BTreeMap<TaskId, u32>,
    inputs_left: u64,
    /// When the run produced its first input, for `Stats::inputs_span_ms`.
    first_input_at: Option<i64>,
    poison_left: u32,
    input_transactions: u64,
    /// The latest committed record of each claimed input, by (input,
    /// partition): what a claiming input's records may claim.
    latest: FxHashMap<(usize, u32), u64>,
    /// Heads already recorded as held: (instance, task index, lane, offset).
    held_seen: FxHashSet<(u32, u32, usize, u64)>,
    /// Every task, shared by the events that name it, with its index.
    task_ids: BTreeMap<TaskId, (Arc<TaskId>, u32)>,
    /// The buffer `deliver_one` collects deliverable tps in.
    ready: Vec<Tp>,
    step: u64,
    live: bool,
    /// Transaction ends whose markers are not written yet: when (wall
    /// clock) and whose (producer id), in the order they ended.
    unwritten_markers: Vec<(i64, u64)>,
    /// Steps left of the moment after a boundary landing, when ticks,
    /// commits, restarts and faults are drawn more often.
    moment_steps: u32,
    /// The buffer boundary-seeking time collects deadlines in.
    deadline_buffer: Vec<i64>,
    /// PCT's priorities and change points, under [`settings::OrderStrategy::Pct`].
    pct: Option<order::Pct>,
    /// When this world's wall clock started.
    start: i64,
    /// The edges of the application's declared logic (boundary.rs).
    edges: boundary::Edges,
    /// The latest input records' keys and timestamps, oldest first, at
    /// most [`boundary::RECENT`]: what the edges after a key's latest
    /// record are measured from.
    recent: std::collections::VecDeque<(Option<bytes::Bytes>, i64)>,
}

const INPUT_TRANSACTIONAL_ID: &str = "sim-input";

/// The action draw's range: one word in `[0, ACTION_RANGE)` picks the action.
const ACTION_RANGE: u32 = 1_000_000;

impl World {
    /// A world built from `plan`, drawing its setup from `choices`.
    pub(crate) fn new(plan: Plan, choices: &mut Choices) -> World {
        let Plan {
            app,
            inputs,
            settings,
        } = plan;
        let settings = &settings;
        let mut cluster =
            Cluster::with_transaction_timeout(settings.clock.transaction_timeout_ms as i64);
        for contract in parsley::TopicContract::list(&app) {
            cluster
                .create_topic_named(contract.name.clone(), settings.partitions)
                .expect("each topic is created once");
        }
        let assembly = assemble(&app, &cluster)
            .expect("the world creates every topic its topic contracts list");
        let faults = settings.faults.swarm(choices);
        let fault_ppm = World::fault_ppm(&faults, settings.instances);
        let pct = order::Pct::draw(settings.order, settings.budget.safety_steps, choices);
        let start = WORLD_BASE_MS + i64::from(choices.below(WORLD_START_MINUTES)) * 60_000;
        let edges = boundary::Edges::of(&app, &settings.clock);
        // Without a generator of rejected records, the logic-error fault
        // has nothing to produce.
        let poison_left = u32::from(inputs.iter().any(|input| input.rejected.is_some()));
        let disks = settings
            .local_disk
            .map(|disk| disk::Disks::new(app.id(), disk.checkpoint_every));
        let queryable = World::queryable_stages(&app);
        let mut world = World {
            inputs,
            app,
            rejected: Vec::new(),
            refused: Vec::new(),
            disks,
            restores: Vec::new(),
            queryable,
            assembly,
            cluster,
            now: start,
            // About one entry per step: growing a trace of large entries by
            // doubling copied a few percent of a run.
            trace: Vec::with_capacity(settings.budget.safety_steps.min(1 << 20) as usize + 1024),
            stats: Stats::default(),
            settings: *settings,
            faults,
            fault_ppm,
            instances: (0..settings.instances)
                .map(|_| Instance {
                    alive: true,
                    hosts: Vec::new(),
                })
                .collect(),
            owners: BTreeMap::new(),
            pending_starts: BTreeSet::new(),
            newest: BTreeMap::new(),
            inputs_left: settings.workload.inputs,
            first_input_at: None,
            poison_left,
            input_transactions: 0,
            latest: FxHashMap::default(),
            held_seen: FxHashSet::default(),
            task_ids: BTreeMap::new(),
            ready: Vec::new(),
            step: 0,
            live: false,
            unwritten_markers: Vec::new(),
            moment_steps: 0,
            deadline_buffer: Vec::new(),
            pct,
            start,
            edges,
            recent: std::collections::VecDeque::with_capacity(boundary::RECENT),
        };
        // Tasks are spread over the instances round-robin, as a static
        // assignment would.
        let mut index = 0u32;
        for (stage, tasks) in world.assembly.tasks.clone() {
            for partition in 0..tasks {
                let task = TaskId {
                    stage: stage.as_str().into(),
                    partition,
                };
                world
                    .owners
                    .insert(task.clone(), index % settings.instances);
                world.pending_starts.insert(task.clone());
                world.task_ids.insert(task.clone(), (Arc::new(task), index));
                index += 1;
            }
        }
        world.start_pending();
        world
    }

    fn record(&mut self, event: Event) {
        self.trace.push(Entry {
            step: self.step,
            now: self.now,
            event,
        });
    }

    fn config(&self) -> TaskConfig {
        TaskConfig {
            commit_interval: Duration::from_millis(self.settings.clock.commit_interval_ms),
        }
    }

    /// Starts every task whose owner is alive and has not started it.
    fn start_pending(&mut self) {
        for task in self.pending_starts.clone() {
            let owner = self.owners[&task];
            if self.instances[owner as usize].alive {
                self.start_task(&task, owner);
            }
        }
    }

    fn start_task(&mut self, task: &TaskId, instance: u32) {
        let config = self.config();
        let (id, index) = self.task_ids[task].clone();
        let mut restored = None;
        let host = match &mut self.disks {
            None => TaskHost::start(
                &mut self.cluster,
                &self.app,
                &self.assembly,
                &task.stage,
                task.partition,
                config,
                self.now,
            ),
            Some(disks) => {
                let step = self.step;
                let restore = |task: &mut parsley::Task, cluster: &Cluster| {
                    let Some(changelog) = task.changelog_tp().cloned() else {
                        return Ok(());
                    };
                    let log = cluster.log(&changelog)?;
                    let records: Vec<(u64, &RecordData)> = log.read_committed().collect();
                    let restore = disks.restore(
                        step,
                        instance,
                        &id,
                        &changelog,
                        &records,
                        log.last_stable_offset(),
                        log.high_watermark(),
                        |offset, record| task.restore_state(offset, record),
                    )?;
                    restored = Some(restore);
                    Ok(())
                };
                TaskHost::start_with(
                    &mut self.cluster,
                    &self.app,
                    &self.assembly,
                    &task.stage,
                    task.partition,
                    config,
                    self.now,
                    restore,
                )
            }
        };
        if let Some(restore) = restored {
            self.record(Event::StoreRestored {
                at: TaskAt {
                    task: Arc::clone(&id),
                    instance,
                },
                from: restore.from,
                loaded: restore.loads.len(),
                rebuilt: restore.rebuilt.clone(),
            });
            self.stats.store_restores += 1;
            self.stats.store_rebuilds += u64::from(restore.rebuilt.is_some());
            self.restores.push(restore);
        }
        let at = TaskAt { task: id, instance };
        match host {
            Ok(host) => {
                // An instance runs one copy of a task: a stale copy left from
                // before (a zombie of an earlier assignment) is closed; the new
                // producer has fenced it anyway.
                let hosts = &mut self.instances[instance as usize].hosts;
                hosts.retain(|old| old.host.task.id() != task);
                self.newest.insert(task.clone(), host.producer().epoch);
                hosts.push(Hosted {
                    at: at.clone(),
                    index,
                    host,
                });
                self.record(Event::TaskStarted { at });
            }
            // A task that cannot even start (a bad checkpoint, a bad
            // changelog record) is a stopped task.
            Err(HostError::Task(error)) => self.record_stopped(at, &error),
            // The model refusing a start (offsets of the group still pending,
            // as when two stages share a group) is the app's or the
            // harness's fault, not the run's end: the task stays stopped and
            // the run's checks name the refusal.
            Err(HostError::Model(error)) => {
                let error = format!("the model refused to start the task: {error}");
                self.refused.push((self.step, at.clone(), error.clone()));
                self.record(Event::TaskStopped {
                    at,
                    tp: Tp::new("-", 0),
                    offset: 0,
                    error,
                });
            }
        }
        self.pending_starts.remove(task);
    }

    fn at(&self, instance: usize, host: usize) -> TaskAt {
        self.instances[instance].hosts[host].at.clone()
    }

    fn host(&self, instance: usize, host: usize) -> &TaskHost {
        &self.instances[instance].hosts[host].host
    }

    fn host_mut(&mut self, instance: usize, host: usize) -> &mut TaskHost {
        &mut self.instances[instance].hosts[host].host
    }

    fn txn(&self, instance: usize, host: usize) -> TxnRef {
        let host = self.host(instance, host);
        TxnRef {
            producer: host.producer().id,
            epoch: host.producer().epoch,
            number: host.transaction_number(),
        }
    }

    /// Every (instance, host) that can act: alive, not stopped.
    fn active_hosts(&self) -> impl Iterator<Item = (usize, usize, &TaskHost)> + '_ {
        self.instances
            .iter()
            .enumerate()
            .filter(|(_, state)| state.alive)
            .flat_map(|(instance, state)| {
                state
                    .hosts
                    .iter()
                    .enumerate()
                    .filter(|(_, hosted)| hosted.host.task.failure().is_none())
                    .map(move |(index, hosted)| (instance, index, &hosted.host))
            })
    }

    /// The host that delivers next: under PCT the enabled one of the
    /// highest priority (no draw), otherwise [`World::pick_host`]'s draw.
    /// Only deliveries follow PCT: a host that could always fetch, commit
    /// or tick would otherwise starve every other one, where PCT means the
    /// order of the work each host was handed.
    fn pick_delivering_host(
        &self,
        choices: &mut Choices,
        keep: impl Fn(&TaskHost) -> bool,
    ) -> Option<(usize, usize)> {
        if let Some(pct) = &self.pct {
            let key = |instance: usize, host: usize| {
                let hosted = &self.instances[instance].hosts[host];
                (instance as u32, hosted.index, hosted.host.producer().epoch)
            };
            // A host whose every head is held cannot run: PCT's next host
            // is the highest one that can, as a blocked thread yields.
            let can_run = |host: &TaskHost| {
                host.task
                    .heads()
                    .iter()
                    .any(|(_, _, status)| !matches!(status, HeadStatus::Held(_)))
            };
            let highest = |runnable: bool| {
                self.active_hosts()
                    .filter(|(_, _, host)| keep(host) && (!runnable || can_run(host)))
                    .max_by_key(|(instance, host, _)| pct.host_priority(key(*instance, *host)))
                    .map(|(instance, host, _)| (instance, host))
            };
            let chosen = highest(true).or_else(|| highest(false))?;
            pct.acted(key(chosen.0, chosen.1));
            return Some(chosen);
        }
        self.pick_host(choices, keep)
    }

    /// One of the active hosts that `keep` accepts, drawn from `choices`
    /// (`below(how many)`, in host order); `None`, drawing nothing, when
    /// there is none.
    fn pick_host(
        &self,
        choices: &mut Choices,
        keep: impl Fn(&TaskHost) -> bool,
    ) -> Option<(usize, usize)> {
        let count = self
            .active_hosts()
            .filter(|(_, _, host)| keep(host))
            .count();
        if count == 0 {
            return None;
        }
        let chosen = choices.below(count as u32) as usize;
        self.active_hosts()
            .filter(|(_, _, host)| keep(host))
            .nth(chosen)
            .map(|(instance, host, _)| (instance, host))
    }

    /// The running tasks by instance and id, stable while hosts come and go.
    fn active_tasks(&self) -> Vec<(usize, Arc<TaskId>)> {
        self.active_hosts()
            .map(|(instance, host, _)| {
                (
                    instance,
                    Arc::clone(&self.instances[instance].hosts[host].at.task),
                )
            })
            .collect()
    }

    fn host_index(&self, instance: usize, task: &TaskId) -> Option<usize> {
        self.instances[instance]
            .hosts
            .iter()
            .position(|hosted| *hosted.at.task == *task)
    }

    // ----- the safety phase -----

    /// Takes one step: one action or fault, drawn from `choices`. Returns
    /// what kind of step it was.
    pub(crate) fn step(&mut self, choices: &mut Choices) -> StepKind {
        self.step += 1;
        self.stats.steps += 1;
        let action = self.draw_action(choices);
        self.moment_steps = self.moment_steps.saturating_sub(1);
        if let Some(pct) = &mut self.pct {
            pct.at_step(self.step);
        }
        match action {
            Action::Deliver => self.deliver_one(choices),
            Action::Fetch => self.fetch_one(choices),
            Action::Produce => self.produce(choices, false),
            Action::Commit => self.commit_one(choices),
            Action::Tick => self.tick_one(choices),
            Action::AdvanceClock => self.advance_clock_drawn(choices),
            Action::Recover => self.recover(choices),
            Action::FaultAbort => self.fault_abort(choices, AbortCause::Fault),
            Action::FaultCommitFailure => self.fault_abort(choices, AbortCause::CommitFailed),
            Action::FaultCrash => self.crash(choices),
            Action::FaultMove => self.move_task(choices),
            Action::FaultHanging => self.hanging_transaction(choices),
            Action::FaultLogicError => self.produce(choices, true),
        }
        self.maybe_query(choices);
        match action {
            Action::Produce => StepKind::Input,
            Action::Recover
            | Action::FaultAbort
            | Action::FaultCommitFailure
            | Action::FaultCrash
            | Action::FaultMove
            | Action::FaultHanging
            | Action::FaultLogicError => StepKind::Fault,
            Action::Deliver
            | Action::Fetch
            | Action::Commit
            | Action::Tick
            | Action::AdvanceClock => StepKind::Other,
        }
    }

    /// The faults' shares of the action draw: a rate `r` takes `r / 4` of the
    /// range. Moves need two instances; the logic error's share is dropped
    /// once it has fired (see [`World::draw_action`]).
    fn fault_ppm(faults: &FaultRates, instances: u32) -> [(Action, u32); 6] {
        let ppm = |rate: f64| (rate.clamp(0.0, 1.0) * f64::from(ACTION_RANGE) / 4.0) as u32;
        [
            (Action::FaultAbort, ppm(faults.abort)),
            (Action::FaultCommitFailure, ppm(faults.commit_failure)),
            (Action::FaultCrash, ppm(faults.crash)),
            (
                Action::FaultMove,
                if instances > 1 {
                    ppm(faults.move_task)
                } else {
                    0
                },
            ),
            (Action::FaultHanging, ppm(faults.hanging_transaction)),
            (Action::FaultLogicError, ppm(faults.logic_error)),
        ]
    }

    /// One draw picks the action. Faults sit at the top of the range so that
    /// a zero word (an exhausted or zeroed tape) means the first, benign
    /// action: shrinking toward zeros removes faults.
    fn draw_action(&self, choices: &mut Choices) -> Action {
        let mut fault_ppm = self.fault_ppm;
        if self.poison_left == 0 {
            for (action, ppm) in &mut fault_ppm {
                if *action == Action::FaultLogicError {
                    *ppm = 0;
                }
            }
        }
        // At a moment (just after a boundary landing) the moment's actions
        // and faults are drawn more often.
        let (action_factor, fault_factor) = match self.moment_steps {
            0 => (1, 1),
            _ => (
                boundary::MOMENT_ACTION_FACTOR,
                boundary::MOMENT_FAULT_FACTOR,
            ),
        };
        if fault_factor > 1 {
            for (action, ppm) in &mut fault_ppm {
                if matches!(
                    action,
                    Action::FaultAbort
                        | Action::FaultCommitFailure
                        | Action::FaultCrash
                        | Action::FaultMove
                ) {
                    *ppm = (*ppm * fault_factor).min(ACTION_RANGE / 16);
                }
            }
        }
        let mut actions = [(Action::Deliver, 0); 8];
        actions[..5].copy_from_slice(&[
            (Action::Deliver, 40),
            (Action::Fetch, 25),
            (Action::Commit, 10 * action_factor),
            (Action::Tick, 6 * action_factor),
            (Action::AdvanceClock, 8),
        ]);
        let mut count = 5;
        let mut push = |action: Action, weight: u32| {
            actions[count] = (action, weight);
            count += 1;
        };
        if self.inputs_left > 0 {
            push(Action::Produce, 12);
        }
        if !self.pending_starts.is_empty() || self.instances.iter().any(|instance| !instance.alive)
        {
            push(Action::Recover, 4 * action_factor);
        }
        let actions = &actions[..count];
        let fault_total: u32 = fault_ppm.iter().map(|(_, ppm)| ppm).sum();
        let action_range = ACTION_RANGE - fault_total;
        let word = match choices.is_guided() {
            // An explorer is offered one word per action that can do
            // something now (explore.rs).
            true => {
                let alternatives = self.action_words(actions, &fault_ppm, action_range);
                choices.below_among(ACTION_RANGE, &alternatives)
            }
            false => choices.below(ACTION_RANGE),
        };
        if word >= action_range {
            let mut at = word - action_range;
            for &(action, ppm) in &fault_ppm {
                if at < ppm {
                    return action;
                }
                at -= ppm;
            }
        }
        let weight_total: u32 = actions.iter().map(|(_, weight)| weight).sum();
        let mut at =
            (u64::from(word) * u64::from(weight_total) / u64::from(action_range.max(1))) as u32;
        for &(action, weight) in actions {
            if at < weight {
                return action;
            }
            at -= weight;
        }
        Action::Deliver
    }

    fn deliver_one(&mut self, choices: &mut Choices) {
        let Some((instance, host)) =
            self.pick_delivering_host(choices, |host| host.task.buffered() > 0)
        else {
            return;
        };
        let mut ready = std::mem::take(&mut self.ready);
        let found = self.instances[instance].hosts[host]
            .host
            .task
            .deliverable(self.now, &mut ready);
        if let Err(error) = found {
            self.ready = ready;
            return self.task_failed(instance, host, error);
        }
        if ready.is_empty() && self.host(instance, host).task.is_synchronised() {
            let at = self.at(instance, host);
            self.record(Event::Withheld { at });
        }
        if !ready.is_empty() {
            let tp = match &self.pct {
                Some(pct) => ready
                    .iter()
                    .max_by_key(|tp| pct.lane_priority(tp))
                    .expect("ready is not empty")
                    .clone(),
                None => ready[choices.below(ready.len() as u32) as usize].clone(),
            };
            self.deliver(instance, host, &tp);
        }
        self.ready = ready;
    }

    fn deliver(&mut self, instance: usize, host: usize, tp: &Tp) {
        let at = self.at(instance, host);
        let txn = self.txn(instance, host);
        // The record next in line: its lane's head, or, on a path to a
        // consistent view, its first of the epoch delivered (V4).
        let offset = self
            .host(instance, host)
            .task
            .head(tp)
            .map(|record| record.offset)
            .expect("a deliverable tp has a record next in line");
        let redelivered_before = self.host(instance, host).task.records_redelivered_total();
        let now = self.now;
        let mut sent = Vec::new();
        let result = self.instances[instance].hosts[host]
            .host
            .deliver(&mut self.cluster, tp, now, &mut sent)
            .map(|()| sent);
        match result {
            Ok(sent) => {
                self.stats.deliveries += 1;
                if self.host(instance, host).task.records_redelivered_total() > redelivered_before {
                    self.stats.marks.redelivered_after_abort += 1;
                }
                let sent = sent
                    .into_iter()
                    .map(|Sent { tp, offset, .. }| (tp, offset))
                    .collect();
                self.record(Event::Delivered {
                    at,
                    txn,
                    tp: tp.clone(),
                    offset,
                    sent,
                });
                self.note_held(instance, host, false);
            }
            Err(error) => self.host_error(instance, host, error),
        }
    }

    fn host_error(&mut self, instance: usize, host: usize, error: HostError) {
        match error {
            HostError::Task(error) => self.task_failed(instance, host, error),
            HostError::Model(ModelError::Fenced { .. }) => self.fenced(instance, host),
            HostError::Model(error) => panic!("the model refused a host's request: {error}"),
        }
    }

    /// X5 and bad input: the task stops, its transaction aborts, and it stays
    /// stopped with its committed position before the record.
    fn task_failed(&mut self, instance: usize, host: usize, error: parsley::TaskError) {
        let at = self.at(instance, host);
        let txn = self.txn(instance, host);
        self.instances[instance].hosts[host]
            .host
            .abort(&mut self.cluster);
        self.stats.aborts += 1;
        if let Some(disks) = &mut self.disks {
            disks.stopped(at.instance, &at.task);
        }
        self.record(Event::Aborted {
            at: at.clone(),
            txn,
            cause: AbortCause::Stopped,
        });
        self.record_stopped(at, &error);
    }

    fn record_stopped(&mut self, at: TaskAt, error: &parsley::TaskError) {
        // Errors that name no record (a checkpoint too large) stop the task
        // where it stands.
        let (tp, offset) = error
            .record()
            .map(|(tp, offset)| (tp.clone(), offset))
            .unwrap_or_else(|| (Tp::new("-", 0), 0));
        self.record(Event::TaskStopped {
            at,
            tp,
            offset,
            error: error.to_string(),
        });
    }

    /// X4: a zombie found out it was fenced; it drops the task.
    fn fenced(&mut self, instance: usize, host: usize) {
        let at = self.at(instance, host);
        let txn = self.txn(instance, host);
        self.instances[instance].hosts[host]
            .host
            .abort(&mut self.cluster);
        self.instances[instance].hosts.remove(host);
        if let Some(disks) = &mut self.disks {
            disks.stopped(at.instance, &at.task);
        }
        self.stats.fences += 1;
        self.stats.aborts += 1;
        self.stats.marks.zombie_fenced += 1;
        self.record(Event::Aborted {
            at: at.clone(),
            txn,
            cause: AbortCause::Fenced,
        });
        self.lost_task(at, txn.epoch);
    }

    /// A host learned it was fenced. A zombie simply drops the task; an owner
    /// fenced by the broker's transaction timeout starts it again, as Kafka
    /// Streams re-creates a task after `ProducerFencedException`.
    fn lost_task(&mut self, at: TaskAt, epoch: u32) {
        let newest = self.newest.get(&*at.task) == Some(&epoch);
        if newest && self.owners.get(&*at.task) == Some(&at.instance) {
            self.pending_starts.insert((*at.task).clone());
        }
        self.record(Event::Fenced { at });
    }

    fn fetch_one(&mut self, choices: &mut Choices) {
        let Some((instance, host)) = self.pick_host(choices, |_| true) else {
            return;
        };
        let lanes = self.host(instance, host).positions().len();
        let lane = choices.below(lanes as u32) as usize;
        let max_records = if choices.chance(self.faults.empty_fetch) {
            return;
        } else if choices.chance(self.faults.partial_fetch) {
            1 + choices.below(3) as usize
        } else {
            usize::MAX
        };
        self.fetch(instance, host, lane, max_records);
    }

    fn fetch(&mut self, instance: usize, host: usize, lane: usize, max_records: usize) {
        let (tp, from) = self.host(instance, host).positions()[lane].clone();
        let fetched =
            self.instances[instance].hosts[host]
                .host
                .fetch(&self.cluster, lane, max_records);
        let records = match fetched {
            Ok(records) => records,
            Err(error) => return self.host_error(instance, host, error),
        };
        let next = self.host(instance, host).positions()[lane].1;
        let mut lso = None;
        if let Ok(log) = self.cluster.log(&tp) {
            lso = Some(log.last_stable_offset());
            if log.last_stable_offset() < log.high_watermark() && next == log.last_stable_offset() {
                self.stats.marks.lso_stalled += 1;
            }
        }
        // A synchronised task's every fetch is traced: its waits (G9)
        // depend on the log ends even an empty one tells it.
        let synchronised = self.host(instance, host).task.is_synchronised();
        if records > 0 || next != from || synchronised {
            let at = self.at(instance, host);
            let log_end = self.host(instance, host).log_end(lane);
            self.record(Event::Fetched {
                at,
                tp,
                from,
                next,
                records,
                log_end,
                visible_end: lso.filter(|_| synchronised),
            });
            self.note_held(instance, host, true);
        }
    }

    /// Records each head of one host first seen held, and the largest number
    /// of records one task held. Holds change only when that host fetches or
    /// delivers, so only then is it looked at. Only a fetch can add held
    /// records (`fetched`): a delivery resolves claims and never adds any.
    fn note_held(&mut self, instance: usize, host: usize, fetched: bool) {
        let World {
            instances,
            stats,
            held_seen,
            trace,
            step,
            now,
            ..
        } = self;
        let Some(hosted) = instances[instance].hosts.get(host) else {
            return;
        };
        let task = &hosted.host.task;
        // A task holds at most what it buffered: only a larger buffer can
        // raise the maximum.
        if fetched && task.buffered() as u64 > stats.held_max {
            stats.held_max = stats.held_max.max(task.records_held());
        }
        debug_assert!(
            fetched || task.records_held() <= stats.held_max,
            "a delivery never adds held records"
        );
        for (lane, tp, offset, claim) in task.held_heads() {
            if !held_seen.insert((instance as u32, hosted.index, lane, offset)) {
                continue;
            }
            let tick = task.tick_tp() == Some(tp);
            if tick {
                stats.marks.tick_held += 1;
            } else if claim.tp.topic != tp.topic {
                stats.marks.held_behind_other_topic += 1;
            }
            trace.push(Entry {
                step: *step,
                now: *now,
                event: Event::Held {
                    at: hosted.at.clone(),
                    tp: tp.clone(),
                    offset,
                    claim,
                    tick,
                },
            });
        }
    }

    fn commit_one(&mut self, choices: &mut Choices) {
        let now = self.now;
        if let Some((instance, host)) = self.pick_host(choices, |host| host.task.wants_commit(now))
        {
            let lag = self.draw_marker_lag(choices);
            self.commit(instance, host, lag);
        }
    }

    /// Whether this transaction end writes its markers late, and how late:
    /// the broker answers `EndTxn` before it writes them.
    fn draw_marker_lag(&mut self, choices: &mut Choices) -> Option<i64> {
        if self.faults.marker_lag == 0.0 || !choices.chance(self.faults.marker_lag) {
            return None;
        }
        let range = self.faults.marker_lag_ms;
        Some(choices.range_inclusive(range.min, range.max) as i64)
    }

    /// The markers to ask for, given a drawn lag; a lagging end's producer
    /// is remembered, so that its markers are written when the lag is over.
    fn markers(&mut self, instance: usize, host: usize, lag: Option<i64>) -> Markers {
        match lag {
            None => Markers::Now,
            Some(lag) => {
                let producer = self.instances[instance].hosts[host].host.producer().id;
                self.unwritten_markers.push((self.now + lag, producer));
                Markers::Later
            }
        }
    }

    /// Writes the markers whose lag is over at `now`.
    fn write_due_markers(&mut self) {
        let now = self.now;
        let cluster = &mut self.cluster;
        self.unwritten_markers.retain(|&(at, producer)| {
            if at > now {
                return true;
            }
            cluster.write_markers(producer);
            false
        });
    }

    fn commit(&mut self, instance: usize, host: usize, lag: Option<i64>) {
        let at = self.at(instance, host);
        let txn = self.txn(instance, host);
        let now = self.now;
        let markers = self.markers(instance, host, lag);
        let mut sent = Vec::new();
        let outcome = self.instances[instance].hosts[host].host.commit_with(
            &mut self.cluster,
            now,
            markers,
            &mut sent,
        );
        match outcome {
            Ok(CommitOutcome::Nothing) => {}
            Ok(CommitOutcome::Committed) => {
                self.stats.commits += 1;
                if lag.is_some() {
                    self.stats.marks.markers_lagged += 1;
                }
                let sent: Vec<(Tp, u64)> = sent
                    .into_iter()
                    .map(|Sent { tp, offset, .. }| (tp, offset))
                    .collect();
                self.store_committed(&at, &sent);
                self.record(Event::Committed { at, txn, sent });
            }
            Ok(CommitOutcome::Aborted(ModelError::Fenced { .. })) => {
                // The host already aborted; the zombie drops the task.
                self.stats.fences += 1;
                self.stats.aborts += 1;
                self.stats.marks.zombie_fenced += 1;
                self.record(Event::Aborted {
                    at: at.clone(),
                    txn,
                    cause: AbortCause::Fenced,
                });
                self.instances[instance].hosts.remove(host);
                if let Some(disks) = &mut self.disks {
                    disks.stopped(at.instance, &at.task);
                }
                self.lost_task(at, txn.epoch);
            }
            Ok(CommitOutcome::Aborted(error)) => panic!("the model refused a commit: {error}"),
            Err(error) => self.host_error(instance, host, error),
        }
    }

    /// The local store applies a committed transaction's changelog
    /// records, as the live runtime does once the commit returns (S6).
    fn store_committed(&mut self, at: &TaskAt, sent: &[(Tp, u64)]) {
        let Some(disks) = &mut self.disks else {
            return;
        };
        let Some(changelog) = disks.changelog_of(at.instance, &at.task).cloned() else {
            return;
        };
        let records: Vec<(u64, bytes::Bytes, Option<bytes::Bytes>)> = sent
            .iter()
            .filter(|(tp, _)| *tp == changelog)
            .filter_map(|(tp, offset)| {
                let record = self.cluster.log(tp).ok()?.record(*offset)?;
                Some((*offset, record.key.clone()?, record.value.clone()))
            })
            .collect();
        disks.committed(at.instance, &at.task, &records);
    }

    fn tick_one(&mut self, choices: &mut Choices) {
        let Some((instance, host)) = self.pick_host(choices, |host| host.task.tick_tp().is_some())
        else {
            return;
        };
        self.tick_check(instance, host);
    }

    /// One tick check of a host at the current time (T3), recorded for the
    /// checker's I4 whether or not it emits.
    fn tick_check(&mut self, instance: usize, host: usize) {
        let at = self.at(instance, host);
        let txn = self.txn(instance, host);
        let now = self.now;
        let polled = self.instances[instance].hosts[host]
            .host
            .poll_tick(&mut self.cluster, now);
        match polled {
            Ok(tick) => {
                let emitted = tick.map(|tick| (tick.tp, tick.offset));
                self.record(Event::TickChecked {
                    at,
                    txn,
                    now,
                    emitted,
                });
            }
            Err(error) => self.host_error(instance, host, error),
        }
    }

    fn advance_clock(&mut self, by: i64) {
        self.now += by;
        self.stats.simulated_ms = (self.now - self.start).max(0) as u64;
        self.record(Event::ClockAdvanced { now: self.now });
        self.write_due_markers();
        let expired = self.cluster.expire_transactions(self.now);
        if !expired.is_empty() {
            self.record(Event::TransactionsExpired { ids: expired });
        }
    }

    // ----- inputs -----

    fn produce(&mut self, choices: &mut Choices, poison: bool) {
        if poison {
            self.poison_left -= 1;
        } else if self.inputs_left == 0 {
            return;
        }
        let batch = if poison {
            1
        } else {
            (1 + choices.below(4) as u64).min(self.inputs_left)
        };
        let transactional = !poison && choices.chance(self.settings.workload.transactional);
        let mut records = Vec::new();
        for _ in 0..batch {
            let (input, tp, data) = if poison {
                self.rejected_record(choices)
            } else {
                let input = choices.below(self.inputs.len() as u32) as usize;
                self.input_record(choices, input)
            };
            records.push((input, tp, data));
        }
        if !poison {
            self.inputs_left -= batch;
        }
        self.stats.inputs += batch;
        let first = *self.first_input_at.get_or_insert(self.now);
        self.stats.inputs_span_ms = (self.now - first).max(0) as u64;
        if self.live {
            self.stats.inputs_after_faults += batch;
        }
        if transactional {
            let producer = self.cluster.init_producer(INPUT_TRANSACTIONAL_ID, self.now);
            self.cluster
                .begin(producer, self.now)
                .expect("the input producer is current");
            let mut sent = Vec::new();
            for (input, tp, data) in records {
                let offset = self
                    .cluster
                    .send(producer, &tp, data)
                    .expect("input topics exist");
                sent.push((input, tp.clone(), offset));
                self.record(Event::InputProduced {
                    tp,
                    offset,
                    transactional: true,
                });
            }
            self.cluster
                .commit(producer)
                .expect("the input producer is current");
            self.record(Event::InputTransaction {
                id: INPUT_TRANSACTIONAL_ID.to_string(),
                outcome: InputOutcome::Committed,
            });
            for (input, tp, offset) in sent {
                self.note_committed(input, &tp, offset);
            }
        } else {
            for (input, tp, data) in records {
                let offset = self.cluster.append(&tp, data).expect("input topics exist");
                if poison {
                    self.rejected.push((tp.clone(), offset));
                }
                self.note_committed(input, &tp, offset);
                self.record(Event::InputProduced {
                    tp,
                    offset,
                    transactional: false,
                });
            }
        }
    }

    /// A record of `input` from its generator: its tp, and its claim on the
    /// latest committed record of each upstream input it may claim.
    fn input_record(&mut self, choices: &mut Choices, input: usize) -> (usize, Tp, RecordData) {
        let generate = Arc::clone(&self.inputs[input].generate);
        let encoded = generate(&mut Draw::new(
            choices,
            self.settings.workload.keys,
            self.now,
        ));
        self.place(choices, input, encoded)
    }

    /// A record the logic rejects (X5), from one of the inputs that can make
    /// one.
    fn rejected_record(&mut self, choices: &mut Choices) -> (usize, Tp, RecordData) {
        let able: Vec<usize> = (0..self.inputs.len())
            .filter(|&input| self.inputs[input].rejected.is_some())
            .collect();
        let input = *choices.pick(&able);
        let generate = Arc::clone(
            self.inputs[input]
                .rejected
                .as_ref()
                .expect("only inputs with a rejected generator are picked"),
        );
        let encoded = generate(&mut Draw::new(
            choices,
            self.settings.workload.keys,
            self.now,
        ));
        self.place(choices, input, encoded)
    }

    /// The tp and record of a generated key and value: a key goes where
    /// Kafka's default partitioner sends it, a null key to a drawn partition.
    fn place(
        &mut self,
        choices: &mut Choices,
        input: usize,
        encoded: Encoded,
    ) -> (usize, Tp, RecordData) {
        let topic = self.inputs[input].topic.clone();
        let (key, value) = encoded.unwrap_or_else(|error| {
            panic!("the input generator of topic {topic:?} made a record its own codecs refuse: {error}")
        });
        let partition = match &key {
            Some(key) => partition_for(Some(key), self.settings.partitions, 0),
            None => choices.below(self.settings.partitions),
        };
        // Each declared cause is drawn in declaration order; the stamp
        // claims the latest committed record of each one drawn.
        let mut claims = Vec::new();
        for &(upstream, probability) in &self.inputs[input].claims {
            if choices.chance(probability) {
                if let Some(&offset) = self.latest.get(&(upstream, partition)) {
                    let upstream = self.inputs[upstream].topic.clone();
                    claims.push(Claim::new(Tp::new(upstream, partition), offset));
                }
            }
        }
        let mut headers = Vec::new();
        if !claims.is_empty() {
            headers.push(parsley::header::stamp_header(&Stamp::from_claims(claims)));
        }
        // Out-of-order event time, when the input asks for it; never
        // before the epoch.
        let lag = match self.inputs[input].event_time_lag_ms {
            0 => 0,
            max => self.event_time_lag(choices, partition, key.as_ref(), max),
        };
        // A tombstone only when the input asks for them: no choice is drawn
        // otherwise, so other inputs' runs stay as they were.
        let tombstones = self.inputs[input].tombstones;
        let value = match tombstones > 0.0 && key.is_some() && choices.chance(tombstones) {
            true => None,
            false => Some(value),
        };
        let timestamp = self.now - lag;
        if self.recent.len() == boundary::RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back((key.clone(), timestamp));
        let data = RecordData {
            key,
            value,
            headers,
            timestamp,
        };
        (input, Tp::new(topic, partition), data)
    }

    /// Remembers a committed input record that other inputs may claim.
    fn note_committed(&mut self, input: usize, tp: &Tp, offset: u64) {
        if self.inputs[input].claimed {
            self.latest.insert((input, tp.partition), offset);
        }
    }

    /// A producer transaction left open: the LSO of what it wrote stalls until
    /// the broker's timeout aborts it.
    fn hanging_transaction(&mut self, choices: &mut Choices) {
        self.input_transactions += 1;
        let id = format!("sim-hanging-{}", self.input_transactions);
        let producer = self.cluster.init_producer(&id, self.now);
        self.cluster
            .begin(producer, self.now)
            .expect("a fresh producer begins");
        let input = choices.below(self.inputs.len() as u32) as usize;
        let (_, tp, data) = self.input_record(choices, input);
        let offset = self
            .cluster
            .send(producer, &tp, data)
            .expect("input topics exist");
        self.record(Event::InputProduced {
            tp,
            offset,
            transactional: true,
        });
        self.record(Event::InputTransaction {
            id,
            outcome: InputOutcome::Hanging,
        });
    }

    /// K2 in the liveness phase: a timer service's task with pending timers
    /// and nothing else to do gets its next tick once the earliest timer
    /// is due, the clock jumping there if it must (as a simulated clock
    /// jumps to its next timer), so every committed request fires before
    /// the run ends.
    fn tick_pending_timers(&mut self) {
        for (instance, task) in self.active_tasks() {
            let Some(host) = self.host_index(instance, &task) else {
                continue;
            };
            let Some(due) = parsley::next_due(self.host(instance, host).task.slots_view()) else {
                continue;
            };
            let next_tick = self.host(instance, host).task.next_tick_at().unwrap_or(due);
            let ready = due.max(next_tick);
            if ready > self.now {
                self.advance_clock(ready - self.now);
            }
            if let Some(host) = self.host_index(instance, &task) {
                self.tick_check(instance, host);
            }
        }
    }

    // ----- faults -----

    fn fault_abort(&mut self, choices: &mut Choices, cause: AbortCause) {
        let Some((instance, host)) = self.pick_host(choices, |host| host.task.has_open_work())
        else {
            return;
        };
        let at = self.at(instance, host);
        let txn = self.txn(instance, host);
        let lag = self.draw_marker_lag(choices);
        let markers = self.markers(instance, host, lag);
        self.instances[instance].hosts[host]
            .host
            .abort_with(&mut self.cluster, markers);
        self.stats.aborts += 1;
        self.record(Event::Aborted { at, txn, cause });
    }

    /// An instance dies: its hosts vanish with whatever they had not
    /// committed; their open transactions hang until fenced or timed out.
    fn crash(&mut self, choices: &mut Choices) {
        let alive: Vec<usize> = (0..self.instances.len())
            .filter(|&index| self.instances[index].alive)
            .collect();
        if alive.is_empty() {
            return;
        }
        let instance = alive[choices.below(alive.len() as u32) as usize];
        self.instances[instance].alive = false;
        self.instances[instance].hosts.clear();
        for (task, owner) in &self.owners {
            if *owner as usize == instance {
                self.pending_starts.insert(task.clone());
            }
        }
        self.stats.crashes += 1;
        self.record(Event::Crashed {
            instance: instance as u32,
        });
        self.disk_faults(choices, instance as u32);
    }

    /// A crash of `instance` ends its tasks' runs without a checkpoint and
    /// may damage each task's directory on its disk (S6): one draw in
    /// eleven per directory, three sparing it (a process crash, which loses
    /// nothing handed to the OS), three losing what was not synced (an OS
    /// crash), one for each of the other faults.
    fn disk_faults(&mut self, choices: &mut Choices, instance: u32) {
        let Some(disks) = &mut self.disks else {
            return;
        };
        disks.crashed(instance);
        let faults = disk::DiskFault::ALL;
        for task in disks.tasks_on(instance) {
            let drawn = choices.below(6 + faults.len() as u32 - 1) as usize;
            let fault = match drawn {
                0..=2 => continue,
                3..=5 => faults[0],
                other => faults[other - 5],
            };
            let Some(disks) = &mut self.disks else {
                return;
            };
            let end = disks
                .changelog_of(instance, &task)
                .and_then(|changelog| self.cluster.high_watermark(changelog).ok())
                .unwrap_or(0);
            disks.fault(instance, &task, fault, end);
            self.stats.disk_faults += 1;
            self.record(Event::DiskFault {
                instance,
                task: (*task).clone(),
                fault: fault.name(),
            });
        }
    }

    /// A task moves to another instance; the old host keeps running as a
    /// zombie until the new owner starts the task and fences it (X4).
    fn move_task(&mut self, choices: &mut Choices) {
        let alive: Vec<u32> = (0..self.instances.len() as u32)
            .filter(|&index| self.instances[index as usize].alive)
            .collect();
        if alive.len() < 2 {
            return;
        }
        let movable: Vec<TaskId> = self
            .owners
            .iter()
            .filter(|(task, owner)| alive.contains(owner) && !self.pending_starts.contains(*task))
            .map(|(task, _)| task.clone())
            .collect();
        if movable.is_empty() {
            return;
        }
        let task = movable[choices.below(movable.len() as u32) as usize].clone();
        let from = self.owners[&task];
        let others: Vec<u32> = alive
            .into_iter()
            .filter(|&instance| instance != from)
            .collect();
        let to = others[choices.below(others.len() as u32) as usize];
        self.owners.insert(task.clone(), to);
        self.pending_starts.insert(task.clone());
        self.record(Event::Moved { task, from, to });
    }

    /// Restarts a crashed instance or starts a moved task on its new owner.
    fn recover(&mut self, choices: &mut Choices) {
        let dead: Vec<usize> = (0..self.instances.len())
            .filter(|&index| !self.instances[index].alive)
            .collect();
        if !dead.is_empty() && (self.pending_starts.is_empty() || choices.chance(0.5)) {
            let instance = dead[choices.below(dead.len() as u32) as usize];
            self.instances[instance].alive = true;
            self.record(Event::Restarted {
                instance: instance as u32,
            });
            self.start_pending();
            return;
        }
        let startable: Vec<TaskId> = self
            .pending_starts
            .iter()
            .filter(|task| self.instances[self.owners[*task] as usize].alive)
            .cloned()
            .collect();
        if startable.is_empty() {
            return;
        }
        let task = startable[choices.below(startable.len() as u32) as usize].clone();
        let owner = self.owners[&task];
        self.start_task(&task, owner);
    }

    // ----- the liveness phase -----

    /// Faults stop; the inputs the safety phase did not reach are produced
    /// at once, so every run checks its whole workload; then inputs stop too.
    /// Every instance comes back, every task starts on its owner, zombies
    /// are gone. Then the world must quiesce within `liveness_steps` steps
    /// (I8). Returns whether it did.
    pub(crate) fn run_liveness(&mut self, choices: &mut Choices) -> bool {
        self.live = true;
        self.record(Event::LivenessPhase);
        while self.inputs_left > 0 {
            self.produce(choices, false);
        }
        for instance in 0..self.instances.len() {
            if !self.instances[instance].alive {
                self.instances[instance].alive = true;
                self.record(Event::Restarted {
                    instance: instance as u32,
                });
            }
        }
        // Zombies learn they lost their task when their next call fails; here
        // they are simply dropped before the owners start.
        for instance in 0..self.instances.len() {
            let owners = &self.owners;
            self.instances[instance]
                .hosts
                .retain(|hosted| owners.get(&*hosted.at.task) == Some(&(instance as u32)));
        }
        self.start_pending();
        let commit_interval = self.settings.clock.commit_interval_ms as i64;
        for _ in 0..self.settings.budget.liveness_steps {
            if self.quiesced() {
                return true;
            }
            self.step += 1;
            self.stats.steps += 1;
            // A task fenced by the broker's transaction timeout restarts.
            self.start_pending();
            for (instance, task) in self.active_tasks() {
                let Some(host) = self.host_index(instance, &task) else {
                    continue;
                };
                let lanes = self.host(instance, host).positions().len();
                for lane in 0..lanes {
                    if let Some(host) = self.host_index(instance, &task) {
                        self.fetch(instance, host, lane, usize::MAX);
                    }
                }
                while let Some(host) = self.host_index(instance, &task) {
                    if self.host(instance, host).task.failure().is_some() {
                        break;
                    }
                    let now = self.now;
                    match self.host_mut(instance, host).task.next_deliverable(now) {
                        Ok(Some(tp)) => self.deliver(instance, host, &tp),
                        Ok(None) => {
                            let task = &self.host(instance, host).task;
                            if task.is_synchronised() && task.buffered() > 0 {
                                let at = self.at(instance, host);
                                self.record(Event::Withheld { at });
                            }
                            break;
                        }
                        Err(error) => {
                            self.task_failed(instance, host, error);
                            break;
                        }
                    }
                }
            }
            self.tick_pending_timers();
            // Let the commit interval pass, then commit everything.
            self.advance_clock(commit_interval);
            for (instance, task) in self.active_tasks() {
                if let Some(host) = self.host_index(instance, &task) {
                    self.commit(instance, host, None);
                }
            }
        }
        self.quiesced()
    }

    /// Nothing left to do: no open transaction anywhere, every running task
    /// has committed everything and read its tps to the end, and no timer
    /// service holds a pending timer (K2).
    pub(crate) fn quiesced(&self) -> bool {
        if !self.cluster.open_transactions().is_empty()
            || !self.cluster.unwritten_markers().is_empty()
        {
            return false;
        }
        for (_, _, host) in self.active_hosts() {
            // A task on a path to a consistent view rests with the records
            // of epochs its sources have not closed (V4).
            let buffered = host.task.buffered() > 0 && !host.task.awaits_open_epochs();
            if host.task.has_open_work()
                || buffered
                || parsley::next_due(host.task.slots_view()).is_some()
            {
                return false;
            }
            for (tp, position) in host.positions() {
                if self
                    .cluster
                    .high_watermark(tp)
                    .map(|end| end > *position)
                    .unwrap_or(false)
                {
                    return false;
                }
            }
        }
        self.pending_starts.is_empty()
    }

    /// Every task's host at the end of a run, stopped ones included: on
    /// each task's owner, one per task (zombies are gone by then).
    pub(crate) fn final_hosts(&self) -> Vec<&TaskHost> {
        let mut hosts: Vec<&TaskHost> = Vec::new();
        for (instance, state) in self.instances.iter().enumerate() {
            for hosted in &state.hosts {
                let owner = self.owners.get(&*hosted.at.task) == Some(&(instance as u32));
                if owner && !hosts.iter().any(|host| host.task.id() == &*hosted.at.task) {
                    hosts.push(&hosted.host);
                }
            }
        }
        hosts
    }
}
