//! The log-only causal audit (`parsley_sim::audit`): clean on the committed
//! logs of correct runs (test driver and simulator), and it reports the
//! invariant a tampered log or a planted bug breaks.

use std::time::Duration;

use bytes::Bytes;
use parsley::dead_letter_headers::{ERROR, OFFSET};
use parsley::header::{self, STAMP_HEADER};
use parsley::mutation::{self, Mutation};
use parsley::ConsumedRecord;
use parsley::{
    assemble, App, Assembly, Claim, DeadLetter, DeadLetterKind, Header, Parsley, Stamp, Tp,
};
use parsley_examples::{ChainTopics, FanInTopics, Order, PaymentsTopics};
use parsley_sim::audit::{
    audit, audit_with, committed_logs, committed_logs_at_cut, group_offsets, AuditOptions,
    AuditReport, CommittedLogs, LogBounds,
};
use parsley_sim::sim::{run_seed, Invariant, Scenario};
use parsley_sim::{TestDriver, TestRecord};

use crate::shipped;

const START: i64 = 1_700_000_000_000;
const MINUTE: Duration = Duration::from_secs(60);

/// The committed logs of a driver's cluster, with the app's assembly.
fn read(driver: &TestDriver, app: &App) -> (Assembly, CommittedLogs) {
    let cluster = driver.cluster();
    let assembly = assemble(app, &*cluster).expect("the driver assembled the app");
    let logs = committed_logs(&cluster, app, &assembly);
    (assembly, logs)
}

fn assert_clean(report: &AuditReport) {
    assert!(report.is_clean(), "{report}");
    assert!(report.summary.notes.is_empty(), "{report}");
    assert_eq!(
        report.summary.tasks_reconstructed, report.summary.tasks,
        "{report}"
    );
    assert_eq!(
        report.summary.outputs_matched, report.summary.outputs,
        "{report}"
    );
    assert_eq!(
        report.summary.changelog_matched, report.summary.changelog_records,
        "{report}"
    );
    assert_eq!(
        report.summary.dead_letters_matched, report.summary.dead_letters,
        "{report}"
    );
}

fn assert_reports(report: &AuditReport, invariant: Invariant, needle: &str) {
    assert!(
        report
            .violations
            .iter()
            .any(|violation| violation.invariant == invariant && violation.message.contains(needle)),
        "expected {invariant} mentioning {needle:?}:\n{report}"
    );
}

/// Asserts that `invariant`, mentioning `needle`, is the one invariant the
/// report finds broken.
fn assert_only(report: &AuditReport, invariant: Invariant, needle: &str) {
    assert_reports(report, invariant, needle);
    assert_eq!(report.invariants().len(), 1, "{report}");
}

fn with_stamp(record: &ConsumedRecord, stamp: &Stamp) -> ConsumedRecord {
    let mut record = record.clone();
    record
        .data
        .headers
        .retain(|header| header.name != STAMP_HEADER);
    record.data.headers.push(Header {
        name: STAMP_HEADER.into(),
        value: header::encode(stamp),
    });
    record
}

/// Rewrites the stamp of `tp`'s record at `index` in `logs` with `edit`.
fn restamp(logs: &mut CommittedLogs, tp: &Tp, index: usize, edit: impl FnOnce(&mut Stamp)) {
    let mut records = logs.records(tp).to_vec();
    let mut stamp = stamp_of(&records[index]);
    edit(&mut stamp);
    records[index] = with_stamp(&records[index], &stamp);
    logs.insert_records(tp.clone(), records);
}

fn stamp_of(record: &ConsumedRecord) -> Stamp {
    record
        .data
        .header(STAMP_HEADER)
        .map_or_else(Stamp::empty, |bytes| header::decode(bytes).unwrap())
}

// ----- the test driver's examples -----

/// `balances` on two partitions, with ticks, an aborted commit and a
/// restart.
fn balances_run() -> (App, TestDriver) {
    let topics = PaymentsTopics::new();
    let app = parsley_examples::balances(&topics).unwrap();
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(START)
        .partitions("orders", 2)
        .build()
        .unwrap();
    let orders = driver.input(&topics.orders).unwrap();
    for (index, key) in ["alice", "bob", "carol", "dave", "alice"]
        .iter()
        .enumerate()
    {
        orders
            .pipe(
                key.to_string(),
                Order {
                    total: 10 + index as i64,
                },
            )
            .unwrap();
    }
    driver.advance_wall_clock(MINUTE).unwrap();
    driver.fail_next_commit("balances", 0).unwrap();
    orders.pipe("bob".to_string(), Order { total: 3 }).unwrap();
    orders.pipe("erin".to_string(), Order { total: 4 }).unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();
    driver.restart().unwrap();
    orders
        .pipe("alice".to_string(), Order { total: 1 })
        .unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();
    (app, driver)
}

/// `balances_run`'s app, assembly and committed logs, to forge.
fn balances_logs() -> (App, Assembly, CommittedLogs) {
    let (app, driver) = balances_run();
    let (assembly, logs) = read(&driver, &app);
    (app, assembly, logs)
}

/// I1, I4–I7 hold on `balances` (ticks, a plain tick handler on a stateful
/// stage), and the audit saw what it checked.
#[test]
fn audit_is_clean_on_balances_under_the_test_driver() {
    let (app, driver) = balances_run();
    let (assembly, logs) = read(&driver, &app);
    let report = audit(&app, &assembly, &logs);
    assert_clean(&report);
    let summary = &report.summary;
    assert_eq!(summary.tasks, 2);
    assert_eq!(summary.outputs, 6, "two tasks, three minutes: {report}");
    assert_eq!(summary.ticks, 6);
    assert_eq!(summary.ticks_delivered, 6);
    assert_eq!(summary.changelog_records, 8);
    assert!(summary.claims_checked > 0);
    assert!(report.to_string().starts_with("audit clean: "), "{report}");
}

/// An audit whose search for a task's history runs out of steps found no
/// violation but is not clean: it is inconclusive, says so first, and names
/// the task in a note.
#[test]
fn an_audit_that_could_not_check_a_task_is_inconclusive_not_clean() {
    let (app, driver) = balances_run();
    let (assembly, logs) = read(&driver, &app);
    let report = audit_with(&app, &assembly, &logs, AuditOptions { search_steps: 3 });
    assert!(report.is_clean(), "{report}");
    assert!(report.is_inconclusive(), "{report}");
    assert_eq!(report.summary.tasks_reconstructed, 0, "{report}");
    let text = report.to_string();
    assert!(
        text.starts_with("audit inconclusive: no violation found, but 2 of 2 tasks not checked"),
        "{text}"
    );
    assert!(
        text.contains("note: task balances/0: inconclusive, the search for an interleaving of its committed deliveries ran out of 3 steps"),
        "{text}"
    );
    let report = audit(&app, &assembly, &logs);
    assert!(!report.is_inconclusive(), "{report}");
}

/// The fifth-tick audit cut: a tick fold over the tick slot.
#[test]
fn audit_is_clean_on_the_audit_cut_under_the_test_driver() {
    let topics = PaymentsTopics::new();
    let app = parsley_examples::audit_cut(&topics).unwrap();
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(START)
        .build()
        .unwrap();
    let orders = driver.input(&topics.orders).unwrap();
    for minute in 0..7 {
        orders
            .pipe(format!("k{minute}"), Order { total: minute })
            .unwrap();
        driver.advance_wall_clock(MINUTE).unwrap();
    }
    let (assembly, logs) = read(&driver, &app);
    let report = audit(&app, &assembly, &logs);
    assert_clean(&report);
    assert_eq!(report.summary.ticks, 7);
    assert_eq!(report.summary.outputs, 1, "one cut on the fifth tick");
}

/// A three-stage chain on two partitions, ticks in the middle stage.
#[test]
fn audit_is_clean_on_the_chain_under_the_test_driver() {
    let topics = ChainTopics::new();
    let app = parsley_examples::chain(&topics, MINUTE).unwrap();
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(START)
        .default_partitions(2)
        .build()
        .unwrap();
    let input = driver.input(&topics.input).unwrap();
    for round in 0..3 {
        for key in ["a", "b", "c", "d"] {
            input.pipe(key.to_string(), round + 1).unwrap();
        }
        driver.advance_wall_clock(MINUTE).unwrap();
    }
    let (assembly, logs) = read(&driver, &app);
    let report = audit(&app, &assembly, &logs);
    assert_clean(&report);
    assert_eq!(report.summary.tasks, 6);
    assert!(report.summary.outputs_matched >= 36, "{report}");
}

/// The fan-in: orders claim payments, and one order is held until its
/// payment arrives.
fn fan_in_run() -> (App, TestDriver, FanInTopics) {
    let topics = FanInTopics::new();
    let app = parsley_examples::fan_in(&topics, MINUTE).unwrap();
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(START)
        .build()
        .unwrap();
    let payments = driver.input(&topics.payments).unwrap();
    let orders = driver.input(&topics.orders).unwrap();
    let (paid, at) = payments
        .pipe_record(TestRecord::new("a".to_string(), 50))
        .unwrap();
    orders
        .pipe_record(
            TestRecord::new("b".to_string(), 5).stamped(Stamp::from_claims([Claim::new(paid, at)])),
        )
        .unwrap();
    payments.pipe("c".to_string(), 7).unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();
    // Held: the order arrives before the payment it claims is fetched.
    driver.pause("payments");
    let (paid, at) = payments
        .pipe_record(TestRecord::new("d".to_string(), 20))
        .unwrap();
    orders
        .pipe_record(
            TestRecord::new("a".to_string(), 8).stamped(Stamp::from_claims([Claim::new(paid, at)])),
        )
        .unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();
    driver.resume("payments").unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();
    (app, driver, topics)
}

/// `fan_in_run`'s app, assembly and committed logs, to forge.
fn fan_in_logs() -> (App, Assembly, CommittedLogs) {
    let (app, driver, _) = fan_in_run();
    let (assembly, logs) = read(&driver, &app);
    (app, assembly, logs)
}

#[test]
fn audit_is_clean_on_the_fan_in_under_the_test_driver() {
    let (app, driver, _) = fan_in_run();
    let (assembly, logs) = read(&driver, &app);
    let report = audit(&app, &assembly, &logs);
    assert_clean(&report);
    assert_eq!(report.summary.changelog_records, 5);
    assert_eq!(report.summary.ticks, 3);
}

// ----- the simulator -----

fn load(name: &str) -> Scenario {
    shipped::scenario(name)
}

/// One simulated run of `seed` (with `planted` active during the run only),
/// its violations (the checker's, and any stop or property the run judged)
/// and the audit of its committed logs.
fn simulate(scenario: &Scenario, seed: u64, planted: Option<Mutation>) -> (usize, AuditReport) {
    let simulation = shipped::simulation(scenario);
    mutation::set(planted);
    // The free `run_seed` runs with whatever this thread planted.
    let outcome = run_seed(&simulation, seed);
    mutation::set(None);
    let app = simulation.app();
    let assembly = assemble(app, &outcome.cluster).expect("the run assembled the app");
    let logs = committed_logs(&outcome.cluster, app, &assembly);
    let report = audit(app, &assembly, &logs);
    (outcome.violations.len(), report)
}

/// Every shipped scenario, a few seeds each: the simulator's committed logs
/// (aborts, crashes, fencing, hanging transactions, redelivery, logic errors)
/// audit clean, timers' cross-partition scheduler stamps included.
#[test]
fn audit_is_clean_on_simulated_runs_of_every_scenario() {
    let mut dead_letters = 0;
    for name in [
        "balances",
        "audit-cut",
        "chain",
        "fan-in",
        "timers",
        "dead-letter",
        "enrichment",
        "dedupe",
    ] {
        let scenario = load(name);
        for seed in 0..3 {
            let (checker, report) = simulate(&scenario, seed, None);
            assert_eq!(checker, 0, "{name} seed {seed}: the checker fails");
            assert!(report.is_clean(), "{name} seed {seed}: {report}");
            assert!(
                report.summary.notes.is_empty(),
                "{name} seed {seed}: {report}"
            );
            assert!(report.summary.deliveries > 0, "{name} seed {seed}");
            assert_eq!(
                report.summary.dead_letters_matched, report.summary.dead_letters,
                "{name} seed {seed}: {report}"
            );
            dead_letters += report.summary.dead_letters;
        }
    }
    assert!(dead_letters > 0, "the dead-letter scenario dead-letters");
}

/// A planted bug is reported by the audit, with `invariant`, within the
/// first seeds.
fn audit_catches(planted: Mutation, name: &str, invariant: Invariant) {
    let scenario = load(name);
    for seed in 0..30 {
        let (_, report) = simulate(&scenario, seed, Some(planted));
        if report.invariants().contains(&invariant) {
            return;
        }
    }
    panic!(
        "{} went unnoticed by the audit's {invariant} over 30 seeds of {name}",
        planted.name()
    );
}

#[test]
fn i1_audit_catches_a_gate_that_ignores_claims() {
    audit_catches(Mutation::GateIgnoresClaims, "fan-in", Invariant::I1);
}

#[test]
fn i7_audit_catches_emissions_outside_the_transaction() {
    audit_catches(
        Mutation::EmissionsOutsideTransaction,
        "balances",
        Invariant::I7,
    );
}

#[test]
fn i5_audit_catches_a_history_not_restored_after_an_abort() {
    audit_catches(Mutation::HistoryNotRestored, "balances", Invariant::I5);
}

#[test]
fn i6_audit_catches_a_tick_slot_that_is_the_null_slot() {
    audit_catches(Mutation::TickSlotIsNullSlot, "audit-cut", Invariant::I6);
}

#[test]
fn i4_audit_catches_a_tick_time_not_rolled_back() {
    audit_catches(Mutation::TickTimeNotRolledBack, "balances", Invariant::I4);
}

#[test]
fn i10_audit_catches_a_dead_letter_dropped() {
    audit_catches(
        Mutation::DeadLetterDropsRecord,
        "dead-letter",
        Invariant::I10,
    );
}

#[test]
fn i6_audit_catches_positions_committed_past_held_records() {
    audit_catches(Mutation::PositionsPastHeld, "balances", Invariant::I6);
}

/// S5: a transaction's batch on the changelog holds each slot's first change
/// instead of its value at the commit; the reconstruction finds no place in
/// the committed history where the pending changes are that batch.
#[test]
fn i6_audit_catches_a_changelog_batch_that_keeps_a_slots_first_change() {
    audit_catches(
        Mutation::ChangelogKeepsFirstChange,
        "balances",
        Invariant::I6,
    );
}

// ----- tampered logs -----

fn tp(topic: &str, partition: u32) -> Tp {
    Tp::new(topic, partition)
}

/// I7: a committed output dropped from the log is an emission lost.
#[test]
fn i7_audit_reports_a_lost_output() {
    let (app, assembly, mut logs) = balances_logs();
    let audits = tp("audits", 0);
    let mut records = logs.records(&audits).to_vec();
    records.remove(1);
    logs.insert_records(audits, records);
    let report = audit(&app, &assembly, &logs);
    assert_only(&report, Invariant::I7, "lost");
}

/// Commits `tp`'s record `of` once more, as a foreign writer would, at
/// index `at` of its records: the records from `at` on (which nothing
/// consumes) move up an offset; at the end, the copy takes the log end.
/// Returns the copy's offset.
fn plant_copy(logs: &mut CommittedLogs, tp: &Tp, of: usize, at: usize) -> u64 {
    let mut records = logs.records(tp).to_vec();
    let bounds = logs.bounds(tp).unwrap();
    let mut copy = records[of].clone();
    copy.offset = records.get(at).map_or(bounds.end, |record| record.offset);
    for record in &mut records[at..] {
        record.offset += 1;
    }
    let offset = copy.offset;
    records.insert(at, copy);
    logs.insert_records(tp.clone(), records);
    logs.insert_bounds(
        tp.clone(),
        LogBounds {
            start: bounds.start,
            read_until: bounds.read_until + 1,
            end: bounds.end + 1,
        },
    );
    offset
}

/// I7: a committed output written twice is a duplicate.
#[test]
fn i7_audit_reports_a_duplicated_output() {
    let (app, assembly, mut logs) = balances_logs();
    let audits = tp("audits", 0);
    let at = logs.records(&audits).len();
    plant_copy(&mut logs, &audits, 0, at);
    let report = audit(&app, &assembly, &logs);
    assert_only(&report, Invariant::I7, "duplicated");
}

/// I7: an output duplicated early in a long, busy log (the timers shape:
/// orders and fires on one task, transactions of many deliveries on few
/// keys) is reported as a duplicate within a search budget the full search
/// runs out of: once the task's history exceeds the duplicate's stamp, no
/// order of what follows can emit it, and the search stops there rather
/// than trying them all (the outputs' lookahead). The full search needs
/// some 1,400,000 steps here.
#[test]
fn i7_audit_reports_a_duplicate_deep_in_a_busy_log_within_its_search_budget() {
    use parsley_examples::{timers_with, TimerTopics};

    let topics = TimerTopics::new();
    let app = timers_with("timers", &topics, 2_000).unwrap();
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(START)
        .commit_each_step(false)
        .commit_interval(Duration::from_millis(500))
        .build()
        .unwrap();
    let orders = driver.input(&topics.orders).unwrap();
    let accounts = ["alice", "bob", "carol", "dave"];
    for round in 0..300 {
        let key = accounts[round % accounts.len()];
        orders
            .pipe(
                key.to_string(),
                Order {
                    total: 1 + (round % 7) as i64,
                },
            )
            .unwrap();
        driver
            .advance_wall_clock(Duration::from_millis(100))
            .unwrap();
    }
    driver.advance_wall_clock(MINUTE).unwrap();
    let (assembly, mut logs) = read(&driver, &app);
    // The first expiry committed once more, stamp and all, a third of the
    // way into the log, as a foreign writer would while the application
    // ran on.
    let expiries = tp("expiries", 0);
    let at = logs.records(&expiries).len() / 3;
    let planted = plant_copy(&mut logs, &expiries, 0, at);
    let (first, planted) = (
        logs.records(&expiries)[0].offset,
        format!("{expiries}@{planted}"),
    );
    let budget = AuditOptions {
        search_steps: 200_000,
    };
    let report = audit_with(&app, &assembly, &logs, budget);
    assert!(report.summary.notes.is_empty(), "{report}");
    assert!(report.summary.deliveries > 500, "{report}");
    assert_reports(&report, Invariant::I7, &format!("{planted} (alice, "));
    assert_only(
        &report,
        Invariant::I7,
        &format!("duplicated: it repeats expiries-0@{first}"),
    );
}

/// I1: an order rewritten to claim a payment that was delivered after it
/// (the changelog shows the order first): no interleaving that respects the
/// gate explains the committed state. The forged claim names a payment
/// committed after the order, so it is a causal inversion too (I3).
#[test]
fn i1_audit_reports_a_delivery_before_its_claim() {
    let (app, assembly, mut logs) = fan_in_logs();
    let orders = tp("orders", 0);
    let payments = tp("payments", 0);
    // payments@0, orders@0, payments@1 were delivered in that order.
    let later_payment = logs.records(&payments)[1].offset;
    restamp(&mut logs, &orders, 0, |stamp| {
        *stamp = Stamp::from_claims([Claim::new(payments.clone(), later_payment)]);
    });
    let report = audit(&app, &assembly, &logs);
    assert_reports(
        &report,
        Invariant::I1,
        &format!("before its claim payments-0@{later_payment}"),
    );
    assert_reports(
        &report,
        Invariant::I3,
        &format!("causal inversion: payments-0@{later_payment} was committed after"),
    );
    assert_eq!(report.invariants().len(), 2, "{report}");
}

/// I1: a committed delivery whose claim the committed history never
/// delivers (the claimed payment lies beyond the committed position).
#[test]
fn i1_audit_reports_a_claim_the_committed_history_never_delivers() {
    let (app, assembly, mut logs) = fan_in_logs();
    let payments = tp("payments", 0);
    let group = app.group_of("ledger").unwrap().to_string();
    let committed = logs.committed(&group, &payments).unwrap().clone();
    let records = logs.records(&payments).to_vec();
    let last = records.len() - 1;
    // The last committed payment delivered, its position moved back before
    // it: the committed history no longer delivers it, yet an order
    // claims it.
    let mut earlier = committed.clone();
    earlier.offset = records[last].offset;
    logs.insert_committed(&group, payments.clone(), earlier);
    logs.insert_records(payments, records);
    let report = audit(&app, &assembly, &logs);
    assert!(report.invariants().contains(&Invariant::I1), "{report}");
    assert_reports(&report, Invariant::I1, "never");
}

/// I5: an output whose stamp lost its claims does not claim the record it
/// was emitted for.
#[test]
fn i5_audit_reports_an_output_that_does_not_claim_its_cause() {
    let (app, assembly, mut logs) = balances_logs();
    let audits = tp("audits", 0);
    restamp(&mut logs, &audits, 2, |stamp| *stamp = Stamp::empty());
    let report = audit(&app, &assembly, &logs);
    assert_only(
        &report,
        Invariant::I5,
        "does not claim the delivered record",
    );
}

/// I3 (G6): a claim on an offset that holds no committed record — here a
/// transaction marker.
#[test]
fn i3_audit_reports_a_claim_on_a_marker() {
    let (app, assembly, mut logs) = balances_logs();
    let audits = tp("audits", 0);
    let records = logs.records(&audits);
    let marker = (0..logs.bounds(&audits).unwrap().end)
        .find(|offset| records.iter().all(|record| record.offset != *offset))
        .expect("transactions leave markers");
    let last = records.len() - 1;
    restamp(&mut logs, &audits, last, |stamp| {
        stamp.claim(&audits, marker)
    });
    let report = audit(&app, &assembly, &logs);
    assert_only(&report, Invariant::I3, &format!("claims audits-0@{marker}"));
}

/// I1 (G6): a claim beyond the log end names a cause never appended.
#[test]
fn i1_audit_reports_a_claim_beyond_the_log_end() {
    let (app, assembly, mut logs) = balances_logs();
    let audits = tp("audits", 0);
    let orders = tp("orders", 1);
    let end = logs.bounds(&orders).unwrap().end;
    restamp(&mut logs, &audits, 0, |stamp| stamp.claim(&orders, end + 3));
    let report = audit(&app, &assembly, &logs);
    assert_reports(&report, Invariant::I1, "never appended");
}

/// I3: an output claiming a record at or beyond the last stable offset —
/// inside a transaction still open — is a precommitted read: no
/// `read_committed` consumer can have delivered that record.
#[test]
fn i3_audit_reports_a_claim_beyond_the_last_stable_offset() {
    let (app, assembly, mut logs) = balances_logs();
    let audits = tp("audits", 0);
    let orders = tp("orders", 1);
    // Two records of a transaction still open follow the committed ones:
    // the read stopped at the last stable offset, the log goes on.
    let bounds = logs.bounds(&orders).unwrap();
    let stable = bounds.end;
    logs.insert_bounds(
        orders.clone(),
        LogBounds {
            end: stable + 2,
            ..bounds
        },
    );
    restamp(&mut logs, &audits, 0, |stamp| stamp.claim(&orders, stable));
    let report = audit(&app, &assembly, &logs);
    assert_only(
        &report,
        Invariant::I3,
        &format!("precommitted read: orders-1@{stable} lies at or beyond the last stable offset {stable}"),
    );
}

/// I3: a committed record claiming a record that was committed after it is
/// a causal inversion (its writer read the cause before it committed).
#[test]
fn i3_audit_reports_a_cause_committed_after_its_effect() {
    let (app, assembly, mut logs) = balances_logs();
    let orders = tp("orders", 0);
    // A committed record of the application that claims an order.
    let (claimant, claimed) = logs
        .tps()
        .filter(|tp| tp.topic.as_str() != "orders")
        .flat_map(|tp| logs.records(tp).iter().map(move |record| (tp, record)))
        .find_map(|(tp, record)| {
            let stamp = stamp_of(record);
            let claim = stamp.claims().iter().find(|claim| claim.tp == orders)?;
            Some(((tp.clone(), record.offset), claim.offset))
        })
        .expect("an output claims an order");
    let effect = logs
        .commit_sequence(&claimant.0, claimant.1)
        .expect("the model knows when the claimant committed");
    let cause = logs
        .commit_sequence(&orders, claimed)
        .expect("the model knows when the order committed");
    assert!(cause < effect, "in the real run the cause committed first");
    // Rewrite history: the order commits after the record that claims it.
    let order: Vec<(u64, u64)> = logs
        .records(&orders)
        .iter()
        .map(|record| {
            let sequence = logs.commit_sequence(&orders, record.offset).unwrap();
            let sequence = if record.offset == claimed {
                effect + 1
            } else {
                sequence
            };
            (record.offset, sequence)
        })
        .collect();
    logs.insert_commit_order(orders.clone(), order);
    let report = audit(&app, &assembly, &logs);
    assert_reports(
        &report,
        Invariant::I3,
        &format!(
            "causal inversion: orders-0@{claimed} was committed after the record that claims it"
        ),
    );
}

/// I6: a changelog record that is not the fold of the committed deliveries.
#[test]
fn i6_audit_reports_a_changelog_that_differs_from_the_fold() {
    let (app, assembly, mut logs) = balances_logs();
    let changelog = tp("payments-balances-state-changelog", 0);
    let mut records = logs.records(&changelog).to_vec();
    records[0].data.value = Some(Bytes::from_static(b"12345"));
    logs.insert_records(changelog, records);
    let report = audit(&app, &assembly, &logs);
    assert_only(&report, Invariant::I6, "12345");
}

/// I4: a tick committed twice is a burst of two ticks in one interval.
#[test]
fn i4_audit_reports_a_tick_committed_twice() {
    let (app, assembly, mut logs) = balances_logs();
    let ticks = tp("payments-balances-ticks", 0);
    let bounds = logs.bounds(&ticks).unwrap();
    let mut records = logs.records(&ticks).to_vec();
    let mut copy = records[records.len() - 1].clone();
    copy.offset = bounds.end;
    records.push(copy);
    logs.insert_records(ticks.clone(), records);
    logs.insert_bounds(
        ticks,
        LogBounds {
            start: 0,
            read_until: bounds.end + 1,
            end: bounds.end + 1,
        },
    );
    let report = audit(&app, &assembly, &logs);
    assert_only(&report, Invariant::I4, "only 0 ms apart");
}

/// I5 (G7): a checkpoint whose history is not the merge of the committed
/// deliveries.
#[test]
fn i5_audit_reports_a_checkpoint_history_that_is_not_the_committed_one() {
    let (app, assembly, mut logs) = balances_logs();
    let orders = tp("orders", 0);
    let ticks = tp("payments-balances-ticks", 0);
    let group = app.group_of("balances").unwrap().to_string();
    let committed = logs.committed(&group, &orders).unwrap().clone();
    let mut checkpoint = parsley::Checkpoint::decode(&committed.metadata).unwrap();
    checkpoint.history.claim(&orders, committed.offset + 5);
    let metadata = checkpoint.encode();
    for lane in [orders, ticks] {
        let mut offset = logs.committed(&group, &lane).unwrap().clone();
        offset.metadata = metadata.as_str().into();
        logs.insert_committed(&group, lane, offset);
    }
    let report = audit(&app, &assembly, &logs);
    assert_only(&report, Invariant::I5, "is not the merge");
}

// ----- dead letters (X5, I10) -----

const DLQ: &str = "payments-balances-dlq";

/// `balances` with X5's opt-in on two partitions: negative orders are
/// refused and dead-lettered, with an aborted commit and a restart between.
fn dead_letter_run() -> (App, TestDriver, PaymentsTopics) {
    let topics = PaymentsTopics::new();
    let app = Parsley::named("payments")
        .stage(parsley_examples::balances_stage_dead_letters(
            &topics, MINUTE,
        ))
        .build()
        .unwrap();
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(START)
        .partitions("orders", 2)
        .build()
        .unwrap();
    let orders = driver.input(&topics.orders).unwrap();
    for (key, total) in [
        ("alice", 10),
        ("bob", -5),
        ("carol", 3),
        ("alice", -1),
        ("dave", 7),
    ] {
        orders.pipe(key.to_string(), Order { total }).unwrap();
    }
    driver.advance_wall_clock(MINUTE).unwrap();
    driver.fail_next_commit("balances", 0).unwrap();
    orders
        .pipe("erin".to_string(), Order { total: -2 })
        .unwrap();
    orders.pipe("bob".to_string(), Order { total: 4 }).unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();
    driver.restart().unwrap();
    orders
        .pipe("carol".to_string(), Order { total: -8 })
        .unwrap();
    orders
        .pipe("alice".to_string(), Order { total: 1 })
        .unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();
    assert!(driver.stopped_tasks().is_empty());
    (app, driver, topics)
}

/// The committed dead letters of `logs`: (dead-letter tp, index), the
/// letter.
fn dead_letters(logs: &CommittedLogs) -> Vec<((Tp, usize), DeadLetter)> {
    (0..2)
        .flat_map(|partition| {
            let dlq = tp(DLQ, partition);
            logs.records(&dlq)
                .iter()
                .enumerate()
                .map(|(index, record)| {
                    (
                        (dlq.clone(), index),
                        DeadLetter::from_record(&record.data).unwrap(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

fn set_header(record: &mut ConsumedRecord, name: &str, value: &str) {
    for header in &mut record.data.headers {
        if header.name == name {
            header.value = Bytes::copy_from_slice(value.as_bytes());
        }
    }
}

/// I10 in the audit: every refused order is dead-lettered, and the
/// dead-lettered deliveries have no other effect; the audit matches each
/// dead letter to its delivery and counts them.
#[test]
fn i10_audit_is_clean_on_dead_letters_under_the_test_driver() {
    let (app, driver, _) = dead_letter_run();
    let (assembly, logs) = read(&driver, &app);
    let report = audit(&app, &assembly, &logs);
    assert_clean(&report);
    assert_eq!(report.summary.dead_letters, 4, "{report}");
    assert_eq!(report.summary.dead_letters_skipped, 0, "{report}");
    assert_eq!(driver.dead_letters("balances").unwrap().len(), 4);
    assert!(
        report
            .to_string()
            .contains("4/4 dead letters matched (0 skipped)"),
        "{report}"
    );
}

/// I10: a dead letter removed from the log leaves a committed delivery the
/// logic refuses with no dead letter: a lost record, named.
#[test]
fn i10_audit_reports_a_refused_record_with_no_dead_letter() {
    let (app, driver, _) = dead_letter_run();
    let (assembly, mut logs) = read(&driver, &app);
    let ((dlq, index), letter) = dead_letters(&logs).remove(0);
    let mut records = logs.records(&dlq).to_vec();
    records.remove(index);
    logs.insert_records(dlq, records);
    let report = audit(&app, &assembly, &logs);
    assert_reports(
        &report,
        Invariant::I10,
        &format!(
            "delivered {}@{} in its committed history",
            letter.tp, letter.offset
        ),
    );
    assert_only(&report, Invariant::I10, "(record lost)");
}

/// I10: a dead letter added for an order the logic accepts (whose effects
/// are committed too) is reported, naming the record.
#[test]
fn i10_audit_reports_a_dead_letter_for_an_accepted_record() {
    let (app, driver, _) = dead_letter_run();
    let (assembly, mut logs) = read(&driver, &app);
    let ((dlq, index), letter) = dead_letters(&logs).remove(0);
    let orders = letter.tp.clone();
    let refused: Vec<u64> = dead_letters(&logs)
        .iter()
        .map(|(_, letter)| letter.offset)
        .collect();
    let accepted = logs
        .records(&orders)
        .iter()
        .find(|record| !refused.contains(&record.offset))
        .expect("some orders are accepted")
        .clone();
    let bounds = logs.bounds(&dlq).unwrap();
    let mut forged = logs.records(&dlq)[index].clone();
    forged.offset = bounds.end;
    forged.data.key = accepted.data.key.clone();
    forged.data.value = accepted.data.value.clone();
    set_header(&mut forged, OFFSET, &accepted.offset.to_string());
    let mut records = logs.records(&dlq).to_vec();
    records.push(forged);
    logs.insert_records(dlq.clone(), records);
    logs.insert_bounds(
        dlq,
        LogBounds {
            start: 0,
            read_until: bounds.end + 1,
            end: bounds.end + 1,
        },
    );
    let report = audit(&app, &assembly, &logs);
    assert_only(
        &report,
        Invariant::I10,
        &format!(
            "dead-letters {orders}@{} (logic), but its logic accepts that record",
            accepted.offset
        ),
    );
}

/// I10: a dead letter whose offset header is altered names a record that
/// is no committed delivery; the record it stood in for is lost.
#[test]
fn i10_audit_reports_a_dead_letter_whose_offset_was_altered() {
    let (app, driver, _) = dead_letter_run();
    let (assembly, mut logs) = read(&driver, &app);
    let ((dlq, index), letter) = dead_letters(&logs).remove(0);
    let beyond = logs.bounds(&letter.tp).unwrap().end + 10;
    let mut records = logs.records(&dlq).to_vec();
    set_header(&mut records[index], OFFSET, &beyond.to_string());
    logs.insert_records(dlq.clone(), records);
    let report = audit(&app, &assembly, &logs);
    assert_reports(
        &report,
        Invariant::I10,
        &format!(
            "dead-letters {}@{beyond}, which is not a committed delivery",
            letter.tp
        ),
    );
    assert_reports(
        &report,
        Invariant::I10,
        &format!(
            "delivered {}@{} in its committed history",
            letter.tp, letter.offset
        ),
    );
}

/// I10: one record dead-lettered twice (a copy of a dead letter appended).
#[test]
fn i10_audit_reports_a_record_dead_lettered_twice() {
    let (app, driver, _) = dead_letter_run();
    let (assembly, mut logs) = read(&driver, &app);
    let ((dlq, index), letter) = dead_letters(&logs).remove(0);
    let bounds = logs.bounds(&dlq).unwrap();
    let mut records = logs.records(&dlq).to_vec();
    let mut copy = records[index].clone();
    copy.offset = bounds.end;
    records.push(copy);
    logs.insert_records(dlq.clone(), records);
    logs.insert_bounds(
        dlq,
        LogBounds {
            start: 0,
            read_until: bounds.end + 1,
            end: bounds.end + 1,
        },
    );
    let report = audit(&app, &assembly, &logs);
    assert_only(
        &report,
        Invariant::I10,
        &format!("{}@{} is dead-lettered twice", letter.tp, letter.offset),
    );
}

/// The operator's skip (docs/RULES.md#skip) of a record the logic accepts,
/// and of a poison record a task stopped on: both `skipped` dead letters
/// audit clean, the poison record's claim on itself included.
#[test]
fn i10_audit_is_clean_on_records_the_operator_skipped() {
    let (app, driver, topics) = dead_letter_run();
    let orders = driver.input(&topics.orders).unwrap();
    let orders0 = tp("orders", 0);
    // Skipped before it is fetched: an order the logic would accept.
    let next = driver.cluster().log(&orders0).unwrap().high_watermark();
    driver.skip("balances", 0, &orders0, next).unwrap();
    let (at, offset) = orders
        .pipe_record(TestRecord::new("zed".to_string(), Order { total: 6 }).partition(0))
        .unwrap();
    assert_eq!((at, offset), (orders0.clone(), next));
    // A poison record (it claims itself) stops the task; the operator
    // skips it.
    let poison = Stamp::from_claims([Claim::new(orders0.clone(), next + 1)]);
    orders
        .pipe_record(
            TestRecord::new("zed".to_string(), Order { total: 2 })
                .partition(0)
                .stamped(poison),
        )
        .unwrap_err();
    driver.skip("balances", 0, &orders0, next + 1).unwrap();
    orders
        .pipe("alice".to_string(), Order { total: 2 })
        .unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();
    assert!(driver.stopped_tasks().is_empty());
    let kinds: Vec<DeadLetterKind> = driver
        .dead_letters("balances")
        .unwrap()
        .iter()
        .map(|letter| letter.kind)
        .collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|kind| **kind == DeadLetterKind::Skipped)
            .count(),
        2,
        "{kinds:?}"
    );
    let (assembly, logs) = read(&driver, &app);
    let report = audit(&app, &assembly, &logs);
    assert_clean(&report);
    assert_eq!(report.summary.dead_letters, 6, "{report}");
    assert_eq!(report.summary.dead_letters_skipped, 2, "{report}");
    // The skipped kind is what lets an accepted record be dead-lettered:
    // relabelled as a logic refusal, it is reported.
    let (assembly, mut logs) = read(&driver, &app);
    let dlq = tp(DLQ, 0);
    let mut records = logs.records(&dlq).to_vec();
    let skipped = records
        .iter()
        .position(|record| record.data.header(ERROR).map(|b| &b[..]) == Some(&b"skipped"[..]))
        .unwrap();
    set_header(&mut records[skipped], ERROR, "logic");
    logs.insert_records(dlq, records);
    let report = audit(&app, &assembly, &logs);
    assert_reports(
        &report,
        Invariant::I10,
        &format!("dead-letters orders-0@{next} (logic), but its logic accepts"),
    );
}

// ----- at a consistent cut of a running application -----

/// A simulated run audited while it runs, as `parsley-live audit` reads a
/// running application: every 40 steps the stage groups' offsets are read
/// (the cut), the run goes on for `lag` steps (commits, ticks, timer
/// fires, crashes, aborts), and then the logs are read, and the offsets
/// again. `planted` is planted for the run (and its checker). Returns the
/// audits.
fn audit_while_running(
    scenario: &Scenario,
    seed: u64,
    planted: Option<Mutation>,
    lag: u64,
) -> Vec<AuditReport> {
    let simulation = shipped::planted(scenario, planted);
    let mut reports = Vec::new();
    let mut cut = None;
    simulation.run_seed_watched(seed, |watch| {
        let step = watch.step;
        if step % 40 == 0 {
            cut = Some((
                step + lag,
                group_offsets(watch.cluster, watch.app, watch.assembly),
            ));
        }
        if cut.as_ref().is_some_and(|(due, _)| *due == step) {
            let (_, offsets) = cut.take().expect("a cut is due");
            let logs = committed_logs_at_cut(watch.cluster, watch.app, watch.assembly, offsets);
            reports.push(audit(watch.app, watch.assembly, &logs));
        }
    });
    mutation::set(None);
    reports
}

/// Every shipped scenario audited at cuts while it runs (input flowing,
/// ticks and timer fires committing, crashes and aborts): clean every
/// time, with records beyond the cut that the old read (the logs read
/// first, or all of them judged) would report; and the cut is named.
#[test]
fn audit_at_a_cut_is_clean_while_the_application_runs() {
    let (mut beyond, mut moved, mut audits) = (0, 0, 0);
    for name in [
        "balances",
        "audit-cut",
        "chain",
        "fan-in",
        "timers",
        "dead-letter",
        "enrichment",
        "dedupe",
    ] {
        let scenario = load(name);
        for seed in 0..3 {
            for (at, report) in audit_while_running(&scenario, seed, None, 9)
                .iter()
                .enumerate()
            {
                assert!(report.is_clean(), "{name} seed {seed} cut {at}: {report}");
                assert!(
                    report.summary.notes.is_empty(),
                    "{name} seed {seed} cut {at}: {report}"
                );
                assert!(report.summary.cut.read_again);
                beyond += report.summary.cut.beyond;
                moved += report.summary.cut.tasks_moved;
                audits += 1;
                if report.summary.cut.beyond > 0 {
                    let text = report.to_string();
                    assert!(text.contains("records beyond the cut"), "{text}");
                    assert!(text.contains(" beyond"), "{text}");
                }
            }
        }
    }
    assert!(audits > 50, "{audits} audits");
    assert!(
        moved > 0 && beyond > 0,
        "{moved} tasks moved, {beyond} records beyond the cut"
    );
}

/// The same cut, judged as if nothing moved (the offsets not read again):
/// what lay beyond it is reported, as `audit` of a running application
/// did before the cut.
#[test]
fn records_beyond_the_cut_are_violations_when_the_read_is_taken_as_one_instant() {
    let topics = parsley_examples::TimerTopics::new();
    let app = parsley_examples::timers(&topics).unwrap();
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(START)
        .build()
        .unwrap();
    let orders = driver.input(&topics.orders).unwrap();
    orders.pipe("a".to_string(), Order { total: 1 }).unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();
    let assembly = assemble(&app, &*driver.cluster()).unwrap();
    let cut = group_offsets(&driver.cluster(), &app, &assembly);
    orders.pipe("b".to_string(), Order { total: 2 }).unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();
    driver.advance_wall_clock(MINUTE).unwrap();
    let logs = committed_logs_at_cut(&driver.cluster(), &app, &assembly, cut.clone());
    let report = audit(&app, &assembly, &logs);
    assert!(report.is_clean(), "{report}");
    assert!(report.summary.cut.beyond > 0, "{report}");
    assert!(report.summary.cut.tasks_moved > 0, "{report}");
    // The same logs and offsets, without the read after the logs.
    let mut one_instant = CommittedLogs::new();
    for tp in logs.tps() {
        one_instant.insert_records(tp.clone(), logs.records(tp).to_vec());
        one_instant.insert_bounds(tp.clone(), logs.bounds(tp).unwrap());
    }
    for ((group, tp), committed) in cut {
        one_instant.insert_committed(&group, tp, committed);
    }
    let naive = audit(&app, &assembly, &one_instant);
    assert!(!naive.is_clean(), "{naive}");
    assert_eq!(naive.summary.cut.beyond, 0, "{naive}");
}

/// A planted bug is reported by an audit at a cut of the running
/// application, with `invariant`, within the first seeds.
fn audit_at_a_cut_catches(planted: Mutation, name: &str, invariant: Invariant) {
    let scenario = load(name);
    for seed in 0..30 {
        let reports = audit_while_running(&scenario, seed, Some(planted), 9);
        if reports
            .iter()
            .any(|report| report.invariants().contains(&invariant))
        {
            return;
        }
    }
    panic!(
        "{} went unnoticed by the audits at a cut's {invariant} over 30 seeds of {name}",
        planted.name()
    );
}

/// Minutes long (six planted bugs, up to 30 seeds each): CI runs it in a
/// step of its own (`.ci/run`, "slow tests"), not README's `cargo test`.
#[test]
#[ignore = "minutes long: CI runs it in its own step (`-- --ignored`)"]
fn audit_at_a_cut_catches_planted_bugs_while_the_application_runs() {
    audit_at_a_cut_catches(Mutation::GateIgnoresClaims, "fan-in", Invariant::I1);
    audit_at_a_cut_catches(
        Mutation::EmissionsOutsideTransaction,
        "balances",
        Invariant::I7,
    );
    audit_at_a_cut_catches(Mutation::HistoryNotRestored, "balances", Invariant::I5);
    audit_at_a_cut_catches(Mutation::TickTimeNotRolledBack, "balances", Invariant::I4);
    audit_at_a_cut_catches(Mutation::TimerFireUnstamped, "timers", Invariant::I5);
    audit_at_a_cut_catches(
        Mutation::DeadLetterDropsRecord,
        "dead-letter",
        Invariant::I10,
    );
}

/// An output of the cut committed twice (a duplicate appended while the
/// application runs, its stamp claiming nothing beyond the cut) is still
/// I7: only what claims beyond the cut is excused.
#[test]
fn i7_audit_at_a_cut_reports_a_duplicate_appended_while_running() {
    let scenario = load("balances");
    let simulation = shipped::simulation(&scenario);
    // The offsets after step 400, the logs 20 steps later.
    let (mut cut, mut read) = (None, None);
    simulation.run_seed_watched(1, |watch| match watch.step {
        399 => cut = Some(group_offsets(watch.cluster, watch.app, watch.assembly)),
        419 => {
            let offsets = cut.clone().expect("the cut was read");
            let logs = committed_logs_at_cut(watch.cluster, watch.app, watch.assembly, offsets);
            read = Some((watch.app.clone(), watch.assembly.clone(), logs));
        }
        _ => {}
    });
    let cut = cut.expect("the cut was read");
    let (app, assembly, logs) = read.expect("the logs were read");
    let app = &app;
    let report = audit(app, &assembly, &logs);
    assert!(report.is_clean(), "{report}");
    // Duplicate the first matched output of a sink partition at its end.
    let sink = app
        .stages()
        .iter()
        .flat_map(|plan| plan.stage.sinks().to_vec())
        .next()
        .expect("balances sinks");
    // An output of the cut: every claim on a consumed tp is below the cut.
    let within = |record: &ConsumedRecord| {
        let claims = stamp_of(record).claims().to_vec();
        let consumed: Vec<_> = claims
            .iter()
            .filter_map(|claim| {
                let (_, committed) = cut.iter().find(|((_, tp), _)| *tp == claim.tp)?;
                Some(claim.offset < committed.offset)
            })
            .collect();
        !consumed.is_empty() && consumed.iter().all(|below| *below)
    };
    let (tp, original) = logs
        .tps()
        .filter(|tp| tp.topic == sink.name)
        .find_map(|tp| {
            Some((
                tp.clone(),
                logs.records(tp).iter().find(|r| within(r))?.clone(),
            ))
        })
        .expect("an output of the cut");
    let mut records = logs.records(&tp).to_vec();
    let mut copy = original;
    copy.offset = logs.bounds(&tp).unwrap().end;
    records.push(copy);
    let mut tampered = logs.clone();
    tampered.insert_records(tp.clone(), records);
    let bounds = logs.bounds(&tp).unwrap();
    tampered.insert_bounds(
        tp,
        LogBounds {
            start: bounds.start,
            read_until: bounds.read_until + 1,
            end: bounds.end + 1,
        },
    );
    let report = audit(app, &assembly, &tampered);
    assert_reports(&report, Invariant::I7, "duplicated");
}

/// Of an application at rest the cut is everything: the offsets read
/// before and after the logs agree, nothing lies beyond the cut, and the
/// audit finds what the audit of one instant's read finds, planted bugs
/// included.
///
/// Minutes long (an audit at a cut of each planted bug): CI runs it in a
/// step of its own (`.ci/run`, "slow tests"), not README's `cargo test`.
#[test]
#[ignore = "minutes long: CI runs it in its own step (`-- --ignored`)"]
fn audit_at_a_cut_of_an_application_at_rest_is_the_audit_of_its_logs() {
    for (name, planted) in [
        ("balances", None),
        ("timers", None),
        ("dead-letter", None),
        ("balances", Some(Mutation::EmissionsOutsideTransaction)),
        ("balances", Some(Mutation::TickTimeNotRolledBack)),
        ("fan-in", Some(Mutation::GateIgnoresClaims)),
    ] {
        let scenario = load(name);
        let simulation = shipped::simulation(&scenario);
        for seed in 0..4 {
            mutation::set(planted);
            let outcome = run_seed(&simulation, seed);
            mutation::set(None);
            let app = simulation.app();
            let assembly = assemble(app, &outcome.cluster).expect("the run's topics fit the app");
            let cut = group_offsets(&outcome.cluster, app, &assembly);
            let at_cut = audit(
                app,
                &assembly,
                &committed_logs_at_cut(&outcome.cluster, app, &assembly, cut),
            );
            let whole = audit(
                app,
                &assembly,
                &committed_logs(&outcome.cluster, app, &assembly),
            );
            assert_eq!(at_cut.summary.cut.tasks_moved, 0, "{name} {seed}");
            assert_eq!(at_cut.summary.cut.beyond, 0, "{name} {seed}");
            assert_eq!(
                at_cut.violations, whole.violations,
                "{name} {seed}: {at_cut}"
            );
            assert_eq!(
                at_cut.summary.tasks_reconstructed, whole.summary.tasks_reconstructed,
                "{name} {seed}"
            );
        }
    }
}
