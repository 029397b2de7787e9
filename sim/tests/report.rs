//! Failure reports centred on the violation: the checker names the records
//! each violation is about, and the story of a shrunk planted bug tells the
//! violating delivery and the claimed records' events, however far apart
//! they are in the trace. On the harness's own fan-in, the `bank`, where a
//! withdrawal may claim the deposit that funded it.

use parsley::mutation::Mutation;
use parsley_sim::sim::{
    story_of, Entry, Event, Failure, Gate, Invariant, Relation, RunOutcome, TimeStrategy, Violation,
};

use crate::support;

/// The planted bugs the bank exposes, and the invariant that must report
/// each (the examples' mutation suite runs every planted bug on its shipped
/// scenario).
const PLANTED: [(Mutation, Invariant); 2] = [
    (Mutation::GateIgnoresClaims, Invariant::I1),
    (Mutation::StampingForgetsHeld, Invariant::I5),
];

/// The first of the bank's first 50 seeds that violates `invariant` with
/// `planted` planted, and that violation.
fn caught(planted: Mutation, invariant: Invariant) -> (RunOutcome, Violation) {
    let simulation = support::bank_simulation(support::fan_in_settings(), Some(planted));
    let start = simulation.seeds().start;
    let found = (start..start + 50).find_map(|seed| {
        let outcome = simulation.run_seed(seed);
        let violation = outcome
            .violations
            .iter()
            .find(|violation| violation.invariant == invariant)
            .cloned()?;
        Some((outcome, violation))
    });
    found.unwrap_or_else(|| panic!("{} is not caught by {invariant}", planted.name()))
}

/// The bank with the gate ignoring claims, seed 6, shrunk: a seed whose
/// shrunk run keeps the claimed deposit's production far (more told events
/// than the story's window) from the violating withdrawal.
fn shrunk_bank() -> Failure {
    // Seed 6 under uniform time shrinks to a story whose claim lies far
    // from the violation, which the story test needs.
    let mut settings = support::fan_in_settings();
    settings.clock.time = TimeStrategy::Uniform;
    let simulation = support::bank_simulation(settings, Some(Mutation::GateIgnoresClaims));
    let original = simulation.run_seed(6);
    let failure = simulation.shrink(original, 300);
    let failure = failure.expect("the planted bug fails seed 6");
    assert_eq!(failure.invariant, Invariant::I1);
    failure
}

/// The report's notion of an event worth a line: not fetches, clock moves
/// or quiet tick checks.
fn told(entry: &Entry) -> bool {
    !matches!(
        entry.event,
        Event::Fetched { .. }
            | Event::Withheld { .. }
            | Event::ClockAdvanced { .. }
            | Event::TickChecked { emitted: None, .. }
    )
}

#[test]
fn a_causal_delivery_violation_names_the_delivery_its_stamp_and_its_claims() {
    let (outcome, violation) = caught(Mutation::GateIgnoresClaims, Invariant::I1);
    let at = violation.at().expect("I1 names the task instance");
    let (tp, offset) = violation.record.clone().expect("I1 names the delivery");
    let stamp = violation.stamp.clone().expect("I1 names the stamp");
    // The entry it points at is that delivery, on that instance.
    let entry = &outcome.trace[violation.entry_in(&outcome.trace).unwrap()];
    assert_eq!(entry.step, violation.step);
    assert!(
        matches!(&entry.event, Event::Delivered { at: by, tp: t, offset: o, .. }
            if *by == at && *t == tp && *o == offset),
        "{violation}: the entry is {}",
        entry.event
    );
    // Every claim is named once, and the unresolved one is the message's.
    let claims: Vec<_> = violation
        .related
        .iter()
        .map(|related| parsley::Claim::new(related.tp.clone(), related.offset))
        .collect();
    assert_eq!(claims, stamp.claims().to_vec());
    let unresolved: Vec<_> = violation
        .related
        .iter()
        .filter(|related| related.relation == Relation::Unresolved)
        .collect();
    assert_eq!(unresolved.len(), 1, "{violation}");
    let claim = unresolved[0];
    let named = format!("its claim {}@{} was delivered", claim.tp, claim.offset);
    assert!(violation.message.contains(&named), "{violation}");
    // Where it was: the gate had not passed it, and no delivery of it by the
    // violating instance came before.
    assert_ne!(claim.gate, Some(Gate::Delivered), "{violation}");
    assert!(
        claim
            .deliveries
            .iter()
            .all(|delivery| !(delivery.before && delivery.at == at)),
        "{violation}: {:?}",
        claim.deliveries
    );
    assert!(
        claim.status.is_some(),
        "bank withdrawals claim logged deposits"
    );
}

#[test]
fn every_planted_bug_is_reported_on_a_task_and_a_record() {
    for (planted, invariant) in PLANTED {
        let (outcome, violation) = caught(planted, invariant);
        assert!(
            violation.task.is_some(),
            "{}: {violation} names no task",
            planted.name()
        );
        // Lost ticks and wrong state are about a tick check and a slot, not
        // about one record.
        let about_a_record = !matches!(
            violation.message.as_str(),
            message if message.contains("emitted no tick") || message.contains("committed slot")
        );
        if !about_a_record {
            continue;
        }
        let (tp, offset) = violation
            .record
            .clone()
            .unwrap_or_else(|| panic!("{}: {violation} names no record", planted.name()));
        let entry = &outcome.trace[violation.entry_in(&outcome.trace).unwrap()];
        assert!(
            entry.event.concerns(&tp, offset),
            "{}: {violation} points at {}",
            planted.name(),
            entry.event
        );
        match invariant {
            Invariant::I5 => {
                assert!(violation.stamp.is_some(), "{violation}");
                let delivering = violation
                    .related
                    .iter()
                    .find(|related| related.relation == Relation::Delivering);
                // An emission names the delivery it was made in; a tick,
                // made at a tick check, names none.
                match (&entry.event, delivering) {
                    (Event::Delivered { tp, offset, .. }, Some(delivering)) => assert!(
                        *tp == delivering.tp && *offset == delivering.offset,
                        "{violation}: {}",
                        entry.event
                    ),
                    (Event::TickChecked { .. }, None) => {}
                    (event, _) => panic!("{violation}: {event}"),
                }
            }
            Invariant::I1 => assert!(!violation.related.is_empty(), "{violation}"),
            _ => {}
        }
    }
}

#[test]
fn the_shrunk_story_tells_the_violating_delivery_and_the_claimed_records() {
    let failure = shrunk_bank();
    let trace = &failure.shrunk.trace;
    let violation = failure
        .shrunk
        .violations
        .iter()
        .find(|violation| violation.invariant == Invariant::I1)
        .expect("the shrunk run violates I1");
    let (tp, offset) = violation.record.clone().expect("I1 names the delivery");
    let centre = violation.entry_in(trace).unwrap();
    // A window smaller than the distance from every claimed deposit's
    // production to the violating delivery, so that what lies outside it
    // must come from the records the violation names.
    let nearest = violation
        .related
        .iter()
        .filter(|related| related.relation == Relation::Unresolved)
        .filter_map(|claim| {
            let produced = trace.iter().position(|entry| {
                matches!(&entry.event, Event::InputProduced { tp, offset, .. }
                    if *tp == claim.tp && *offset == claim.offset)
            })?;
            Some(trace[produced..centre].iter().filter(|e| told(e)).count())
        })
        .min()
        .expect("a claimed deposit was produced");
    assert!(
        nearest >= 2,
        "the test needs the claim away from the violation"
    );
    let events_max = (nearest - 1).min(6);
    let story = story_of(trace, Some(violation), events_max);
    let lines: Vec<&str> = story.lines().collect();
    let marked = |mark: &str, what: &str| {
        lines
            .iter()
            .any(|line| line.starts_with(mark) && line.contains(what))
    };
    assert!(
        marked(" > step", &format!("delivered {tp}@{offset} ")),
        "no violating delivery in\n{story}"
    );
    assert!(
        marked(" * step", &format!("input {tp}@{offset}")),
        "the delivered record's production is missing in\n{story}"
    );
    let unresolved: Vec<_> = violation
        .related
        .iter()
        .filter(|related| related.relation == Relation::Unresolved)
        .collect();
    assert!(!unresolved.is_empty(), "{violation}");
    for claim in unresolved {
        let record = format!("{}@{}", claim.tp, claim.offset);
        let head = format!("    {record} (unresolved claim): {}", claim.whereabouts());
        assert!(lines.contains(&head.as_str()), "no {head:?} in\n{story}");
        // Its production, far before the window: more told events lie
        // between it and the violating delivery than the window holds.
        let produced = trace
            .iter()
            .position(|entry| {
                matches!(&entry.event, Event::InputProduced { tp, offset, .. }
                    if *tp == claim.tp && *offset == claim.offset)
            })
            .expect("the claimed deposit was produced");
        let between = trace[produced..centre].iter().filter(|e| told(e)).count();
        assert!(
            between > events_max,
            "the test needs the claim far from the violation: {between} events apart"
        );
        assert!(
            marked(" * step", &format!("input {record}")),
            "{record}'s production is missing in\n{story}"
        );
        for delivery in &claim.deliveries {
            let line = format!("step {:>5}", delivery.step);
            assert!(
                lines.iter().any(|l| l.contains(&line)
                    && l.contains(&format!("{} delivered {record} ", delivery.at))),
                "{record}'s delivery at step {} is missing in\n{story}",
                delivery.step
            );
        }
    }
    // What was left out is counted, and the story stays short.
    assert!(story.contains("  … "), "{story}");
    assert!(lines.len() < 3 * events_max + 10, "{story}");
}

#[test]
fn the_report_of_a_shrunk_failure_is_centred_on_its_violation() {
    let failure = shrunk_bank();
    let replays = [("Replay", "a checked command".to_string())];
    let report = parsley_sim::sim::render_report("bank", &failure, &replays);
    let violation = failure
        .shrunk
        .violations
        .iter()
        .find(|violation| violation.invariant == failure.invariant)
        .unwrap();
    let (tp, offset) = violation.record.clone().unwrap();
    assert!(
        report.lines().any(|line| line.starts_with(" > step")
            && line.contains(&format!("delivered {tp}@{offset} "))),
        "{report}"
    );
    assert!(
        report.contains("where its records were at step"),
        "{report}"
    );
    assert!(
        report.ends_with("\nReplay: a checked command\n"),
        "{report}"
    );
}

/// A shrink cut short by its budget says so in words, with the size it
/// reached; one that ran to a local minimum says that instead.
#[test]
fn a_report_says_whether_shrinking_reached_a_minimum() {
    let simulation = support::bank_simulation(
        support::fan_in_settings(),
        Some(Mutation::GateIgnoresClaims),
    );
    let (original, _) = caught(Mutation::GateIgnoresClaims, Invariant::I1);
    let seed = original.seed.unwrap();
    let short = simulation
        .shrink(simulation.run_seed(seed), 10)
        .expect("the seed fails");
    assert!(!short.finished);
    let report = parsley_sim::sim::render_report("bank", &short, &[]);
    let nonzero = short
        .shrunk
        .tape
        .chunks(4)
        .filter(|word| word.iter().any(|&b| b != 0))
        .count();
    // Thousands get a comma, as the report prints them.
    let nonzero = match nonzero {
        n if n >= 1_000 => format!("{},{:03}", n / 1_000, n % 1_000),
        n => n.to_string(),
    };
    assert!(
        report.contains(&format!(
            "Shrinking stopped after 10 attempts at {nonzero} non-zero choices, when its \
             attempts ran out (budget 10 attempts); it had not reached a minimum"
        )),
        "{report}"
    );
    assert!(!report.contains("local minimum"), "{report}");

    let long = simulation.shrink(original, 5_000).expect("the seed fails");
    assert!(long.finished, "{} attempts", long.attempts);
    let report = parsley_sim::sim::render_report("bank", &long, &[]);
    assert!(
        report.contains("Shrinking reached a local minimum"),
        "{report}"
    );
    assert!(!report.contains("had not reached"), "{report}");
}

/// `Simulation::check`'s budget is a knob, and its report says how to go
/// on when the budget ran out.
#[test]
fn a_check_cut_short_says_how_to_continue() {
    let simulation = support::bank_builder(
        support::fan_in_settings(),
        Some(Mutation::GateIgnoresClaims),
    )
    .shrink_attempts(7)
    .build()
    .unwrap();
    let failure = simulation
        .check_seeds(0..20)
        .failure
        .expect("the planted bug fails a seed");
    assert!(
        failure.contains("Shrinking stopped after 7 attempts at "),
        "{failure}"
    );
    assert!(
        failure.contains("To continue: call Simulation::shrink with a larger budget"),
        "{failure}"
    );
}

/// The story of a shrunk run lists the production of only the inputs its
/// violation names (the two-record story): the run still produces its whole
/// workload, and the rest are counted among the events left out.
#[test]
fn a_shrunk_story_lists_only_the_inputs_its_violation_names() {
    let (original, _) = caught(Mutation::GateIgnoresClaims, Invariant::I1);
    let simulation = support::bank_simulation(
        support::fan_in_settings(),
        Some(Mutation::GateIgnoresClaims),
    );
    let failure = simulation.shrink(original, 2_000).expect("the seed fails");
    assert!(failure.reproduces());
    let violation = failure
        .shrunk
        .violations
        .iter()
        .find(|violation| violation.invariant == Invariant::I1)
        .expect("the shrunk run violates I1");
    let mut named: Vec<String> = violation
        .related
        .iter()
        .map(|related| format!("{}@{}", related.tp, related.offset))
        .collect();
    named.extend(
        violation
            .record
            .iter()
            .map(|(tp, offset)| format!("{tp}@{offset}")),
    );
    let report = parsley_sim::sim::render_report("bank", &failure, &[]);
    let story = report
        .split("What happened (shrunk):")
        .nth(1)
        .unwrap_or_else(|| panic!("a shrunk story:\n{report}"));
    let inputs: Vec<&str> = story
        .lines()
        .filter(|line| line.contains("  input "))
        .collect();
    assert!(
        !inputs.is_empty(),
        "the claimed deposit's production is told:\n{story}"
    );
    for line in &inputs {
        assert!(
            named
                .iter()
                .any(|record| line.contains(&format!("input {record}"))),
            "an input the violation does not name ({named:?}) is told: {line}\n{story}"
        );
    }
    let produced = failure
        .shrunk
        .trace
        .iter()
        .filter(|entry| matches!(entry.event, Event::InputProduced { .. }))
        .count();
    assert!(
        produced > inputs.len(),
        "the run produced {produced} inputs, the story tells {}",
        inputs.len()
    );
}

/// The report's `Shrink:` line says where the tape came from: the sizes
/// before and after, the attempts and time it took, and the budget.
#[test]
fn the_shrink_line_carries_the_budget_that_made_the_tape() {
    let (original, _) = caught(Mutation::GateIgnoresClaims, Invariant::I1);
    let simulation = support::bank_simulation(
        support::fan_in_settings(),
        Some(Mutation::GateIgnoresClaims),
    );
    let budget = parsley_sim::sim::ShrinkBudget {
        time: Some(std::time::Duration::from_secs(60)),
        attempts: Some(40),
    };
    let failure = simulation.shrink(original, budget).expect("the seed fails");
    let report = parsley_sim::sim::render_report("bank", &failure, &[]);
    let line = report
        .lines()
        .find(|line| line.starts_with("Shrink: "))
        .unwrap_or_else(|| panic!("no Shrink line:\n{report}"));
    let nonzero = |tape: &[u8]| {
        tape.chunks(4)
            .filter(|word| word.iter().any(|&b| b != 0))
            .count()
    };
    let thousands = |n: usize| match n {
        n if n >= 1_000 => format!("{},{:03}", n / 1_000, n % 1_000),
        n => n.to_string(),
    };
    let expected = format!(
        "Shrink: {} → {} non-zero choices in {} attempts, ",
        thousands(nonzero(&failure.original.tape)),
        thousands(nonzero(&failure.shrunk.tape)),
        failure.attempts
    );
    assert!(line.starts_with(&expected), "{line}\nexpected {expected}");
    assert!(line.contains(" s (budget 60 s or 40 attempts) ("), "{line}");
    assert_eq!(failure.attempts, 40, "{line}");
    assert_eq!(failure.spent, Some(parsley_sim::sim::Spent::Attempts));
}
