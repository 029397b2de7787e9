//! `audit` of a running application, at a consistent cut: the stage
//! groups' committed offsets are read first, then every log to its last
//! stable offset, then the offsets again (`parsley_live::read_committed`);
//! what the application committed after the offsets were read (ticks,
//! timer fires, outputs in flight) lies beyond the cut and is no violation
//! (`parsley::audit`, *At a consistent cut*). The application here is
//! `timers` (a stateful stage with ticks and a timer service, K2) on two
//! partitions, running while input flows; it is audited repeatedly, by the
//! library call `parsley-live audit` makes and by the command itself, and a
//! bug planted in its logs while it runs is still flagged.

#![cfg(feature = "live")]

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parsley::audit::{audit, AuditReport, Invariant};
use parsley::header::STAMP_HEADER;
use parsley::Tp;
use parsley_examples::TopologyName;
use parsley_live::{read_committed, test_broker, PlainProducer, Runtime, RuntimeConfig};

use crate::live_common;

use live_common::{set_up, Live, TICK};

/// Orders produced every 150 ms, 8 a batch, until `stop`.
fn flow(live: Arc<Live>, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let mut produced = 0;
        let mut seed = 1000;
        while !stop.load(Ordering::Relaxed) {
            produced += live.produce(8, seed).await.len();
            seed += 1;
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        produced
    })
}

/// Reads the running application at a cut and audits it, as `parsley-live
/// audit` does.
async fn audit_running(live: &Live) -> AuditReport {
    let read = read_committed(&live.client, &live.topology.app, &live.assembly)
        .await
        .expect("read back");
    audit(&live.topology.app, &live.assembly, &read.to_logs())
}

fn parsley_live_audit(live: &Live, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_parsley-live"))
        .args(["audit", TopologyName::as_str(live.topology.name)])
        .args(extra)
        .args(["--namespace", &live.namespace])
        .args(["--set", &format!("tick-ms={}", TICK.as_millis())])
        .args(["--bootstrap", &live.client.config().bootstrap_servers])
        .output()
        .expect("parsley-live audit runs")
}

/// Audited while input flows, ticks fire and timers fire, repeatedly, the
/// running application is clean each time, and the summary names the cut
/// per tp and what lay beyond it; over the rounds, tasks committed while
/// the logs were read and records lay beyond the cut (the reads that
/// reported I2, I4 and I5 before). `parsley-live audit` on it exits 0 and
/// prints the cut; held to one search step, it exits 9, inconclusive. Then an output of the cut is committed a second time by
/// a foreign writer while the application runs (the effect of a runtime
/// that commits an emission twice): the next audit of the running
/// application reports it (I7), and so does `parsley-live audit` (exit 1).
#[tokio::test(flavor = "multi_thread")]
async fn audit_of_a_running_application_is_clean_at_each_cut_and_flags_a_planted_duplicate() {
    let Some(config) = test_broker() else { return };
    let live = Arc::new(set_up(&config, TopologyName::Timers, "audit-running", 2).await);
    let timers = live.topology.timers.clone().expect("the timer topics");
    live.produce(40, 1).await;
    let runtime = Runtime::start(
        Arc::new(live.topology.app.clone()),
        RuntimeConfig::new(config.clone()),
    )
    .await
    .expect("start");
    let stop = Arc::new(AtomicBool::new(false));
    let producer = flow(Arc::clone(&live), Arc::clone(&stop));

    // Wait for timers to fire, so that ticks, fires and expiries flow.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let read = read_committed(&live.client, &live.topology.app, &live.assembly)
            .await
            .expect("read back");
        if read.topic(timers.expiries.name().as_str()).len() >= 10 {
            break;
        }
        assert!(Instant::now() < deadline, "no timer fired in 90 s");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let (mut moved, mut beyond, mut ticks) = (0, 0, Vec::new());
    for round in 0..8 {
        let report = audit_running(&live).await;
        eprintln!("{}: round {round}: {report}", live.namespace);
        assert!(report.is_clean(), "round {round}: {report}");
        assert!(report.summary.notes.is_empty(), "round {round}: {report}");
        assert_eq!(
            report.summary.tasks_reconstructed, report.summary.tasks,
            "round {round}: {report}"
        );
        assert!(report.summary.cut.read_again);
        let text = report.to_string();
        assert!(
            text.contains("cut: each stage group's committed offsets, read before the logs"),
            "{text}"
        );
        assert!(
            text.contains(&format!("{}-0:", timers.fires.name())),
            "the cut is named per tp: {text}"
        );
        moved += report.summary.cut.tasks_moved;
        beyond += report.summary.cut.beyond;
        ticks.push(report.summary.ticks);
        tokio::time::sleep(Duration::from_millis(300 + 100 * round)).await;
    }
    assert!(
        moved > 0 && beyond > 0,
        "the audits ran at a moving cut: {moved} tasks moved, {beyond} records beyond"
    );
    assert!(
        ticks.windows(2).all(|pair| pair[0] <= pair[1]) && ticks.first() < ticks.last(),
        "ticks kept coming: {ticks:?}"
    );

    let output = parsley_live_audit(&live, &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.starts_with("audit clean: "), "{stdout}");
    assert!(stdout.contains("records beyond the cut"), "{stdout}");
    // A search held to one step checks no task: inconclusive, exit 9.
    let output = parsley_live_audit(&live, &["--search-steps", "1"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(9), "{stdout}");
    assert!(stdout.starts_with("audit inconclusive: "), "{stdout}");
    assert!(stdout.contains("ran out of 1 steps"), "{stdout}");

    // The planted bug: the first expiry, an output well within every cut,
    // committed once more, stamp and all, while the application runs.
    let read = read_committed(&live.client, &live.topology.app, &live.assembly)
        .await
        .expect("read back");
    let (tp, first): (Tp, _) = read
        .topic(timers.expiries.name().as_str())
        .first()
        .map(|(tp, record)| ((*tp).clone(), (*record).clone()))
        .expect("an expiry");
    assert!(first.data.header(STAMP_HEADER).is_some());
    let plain = PlainProducer::new(&config).expect("a producer");
    let at = plain.append(&tp, &first.data).await.expect("appended");
    // The task that writes the partition is not reconstructed: the
    // duplicate is I7 (or, as the search reports the deepest point it
    // reached, the state change its reconstruction then misses, I6).
    let writer = format!("task reserve/{}", tp.partition);
    let report = audit_running(&live).await;
    eprintln!("{}: planted {tp}@{at}: {report}", live.namespace);
    assert!(!report.is_clean(), "the duplicate {tp}@{at} is reported");
    assert!(
        report.violations.iter().all(|violation| matches!(
            violation.invariant,
            Invariant::I6 | Invariant::I7
        ) && violation.message.contains(&writer)),
        "only {writer}, which writes {tp}, is reported: {report}"
    );
    assert_eq!(
        report.summary.tasks_reconstructed,
        report.summary.tasks - 1,
        "{report}"
    );
    let output = parsley_live_audit(&live, &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.starts_with("audit found"), "{stdout}");
    assert!(stdout.contains(&writer), "{stdout}");

    stop.store(true, Ordering::Relaxed);
    producer.await.expect("the producer");
    runtime.stopper().stop();
    for run in runtime.wait().await {
        run.outcome.expect("a graceful stop");
    }
}
