//! The pipeline's own binary on a real broker (`KAFKA_BOOTSTRAP_SERVERS`,
//! e.g. from `scripts/kafka/broker.sh` of the Parsley repository): two
//! instances under group membership, input flowing the whole time, one
//! instance killed with SIGKILL mid-stream. Afterwards, read back from the
//! committed topics independently of the runtime: every order id written
//! once to unique-orders and enriched once, every duplicate dropped, every
//! window exact (its revenue the sum of its on-time sales), every sale in a
//! window or in late-sales; every task's lag zero; the audit clean; the
//! survivor stops gracefully. It measures how many orders were enriched
//! with a profile newer than the order (G9, issue 27) and prints it; an
//! instance still running when the test panics is killed.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Deref, DerefMut};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parsley::WindowedCodec;
use parsley::{Codec, Json, Utf8, I64};
use parsley_live::{assemble_on, read_committed, task_status, test_broker, LiveClient, ReadBack};
use parsley_shop_app::{app, Enriched, Order, Profile, Topics};

const WINDOW_MS: i64 = 2_000;
const GRACE_MS: i64 = 1_000;
const BIN: &str = env!("CARGO_BIN_EXE_parsley-shop-app");

fn command(bootstrap: &str, namespace: &str, args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .args(["--namespace", namespace, "--bootstrap", bootstrap])
        .args(["--set", &format!("window-ms={WINDOW_MS}")])
        .args(["--set", &format!("grace-ms={GRACE_MS}")]);
    command
}

/// A child process killed (SIGKILL) and reaped when dropped, unless it has
/// already exited: a test that panics leaves no instance running.
struct KillOnDrop(Child);

impl Deref for KillOnDrop {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Sets the flag to false when dropped: the producer thread stops when the
/// test ends, panicking or not.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

fn instance(bootstrap: &str, namespace: &str) -> KillOnDrop {
    KillOnDrop(
        command(bootstrap, namespace, &["run", "shop"])
            .args(["--session-timeout-ms", "6000"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn an instance"),
    )
}

/// What the committed topics say, checked; `Err` names what is not (yet)
/// right. `Ok` carries the order count and the revenue windows' count.
fn check(read: &ReadBack, topics: &Topics) -> Result<(usize, usize), String> {
    let decode = |bytes: &Option<_>| -> Vec<u8> {
        Option::as_deref(bytes)
            .map(<[u8]>::to_vec)
            .unwrap_or_default()
    };
    let ids: BTreeSet<String> = read
        .topic(topics.orders.name().as_str())
        .iter()
        .map(|(_, record)| {
            Codec::<Order>::decode(&Json, &decode(&record.data.value))
                .expect("an order")
                .id
        })
        .collect();
    let once = |topic: &str, id_of: &dyn Fn(&[u8]) -> String| -> Result<(), String> {
        let mut seen = BTreeSet::new();
        for (tp, record) in read.topic(topic) {
            let id = id_of(&decode(&record.data.value));
            if !seen.insert(id.clone()) {
                return Err(format!(
                    "{topic}: order {id} twice (again at {tp}@{})",
                    record.offset
                ));
            }
        }
        match seen == ids {
            true => Ok(()),
            false => Err(format!(
                "{topic} holds {} of {} order ids",
                seen.len(),
                ids.len()
            )),
        }
    };
    once(topics.unique_orders.name().as_str(), &|bytes| {
        Codec::<Order>::decode(&Json, bytes).expect("an order").id
    })?;
    once(topics.enriched.name().as_str(), &|bytes| {
        Codec::<Enriched>::decode(&Json, bytes)
            .expect("an enriched order")
            .order
            .id
    })?;
    // Every enriched sale is on time for its window or late, once.
    let late: BTreeSet<String> = read
        .topic(topics.late.name().as_str())
        .iter()
        .map(|(_, record)| {
            Codec::<Enriched>::decode(&Json, &decode(&record.data.value))
                .expect("a sale")
                .order
                .id
        })
        .collect();
    let mut expected: BTreeMap<(String, i64), i64> = BTreeMap::new();
    for (_, record) in read.topic(topics.enriched.name().as_str()) {
        let sale = Codec::<Enriched>::decode(&Json, &decode(&record.data.value)).expect("a sale");
        if late.contains(&sale.order.id) {
            continue;
        }
        let start = record.data.timestamp - record.data.timestamp.rem_euclid(WINDOW_MS);
        *expected
            .entry((sale.order.product.clone(), start))
            .or_default() += sale.due;
    }
    let mut written: BTreeMap<(String, i64), i64> = BTreeMap::new();
    for (tp, record) in read.topic(topics.revenue.name().as_str()) {
        let window = WindowedCodec(Utf8)
            .decode(&decode(&record.data.key))
            .expect("a window");
        let revenue = Codec::<i64>::decode(&I64, &decode(&record.data.value)).expect("a revenue");
        if written
            .insert((window.key.clone(), window.start), revenue)
            .is_some()
        {
            return Err(format!(
                "window {} [{}, {}) written twice (again at {tp}@{})",
                window.key, window.start, window.end, record.offset
            ));
        }
    }
    if written != expected {
        let missing = expected
            .iter()
            .filter(|(window, due)| written.get(*window) != Some(due))
            .count();
        return Err(format!(
            "{missing} of {} windows not (yet) exact",
            expected.len()
        ));
    }
    Ok((ids.len(), written.len()))
}

/// Which version of its customer's profile each enriched order was joined
/// with, judged by timestamps: the version as of the order's timestamp
/// (the latest of a timestamp at or below it) is what G9 promises.
#[derive(Debug, Default)]
struct Freshness {
    /// Enriched orders judged.
    orders: usize,
    /// Joined with the version as of the order's timestamp, and with no
    /// other version that would have given the same result.
    as_of: usize,
    /// Joined with a result the version as of the order's timestamp gives,
    /// and so does a newer one (same tier and discount): fine.
    ambiguous: usize,
    /// Joined with the version before a profile of the order's very
    /// millisecond (a timestamp tie, which G9 breaks by tp): fine.
    ties: usize,
    /// Joined with a profile newer than the order, the version as of the
    /// order's timestamp giving something else (issue 27).
    newer: Vec<String>,
    /// Of those, the order's timestamp and how much newer (ms) the oldest
    /// newer version is that gives what the join wrote.
    newer_by: Vec<(i64, i64)>,
    /// The timestamp of every enriched order judged.
    judged_at: Vec<i64>,
    /// Of the orders joined with a newer profile, whether the order reached
    /// its by-customer partition after one of a later timestamp (written by
    /// another task): timestamp order across the join's sources cannot put
    /// it before a profile that later order let through.
    newer_overtaken: Vec<bool>,
    /// Joined with a version older than the one as of the order's
    /// timestamp, and no newer one gives the same result.
    older: Vec<String>,
    /// Matching no version of the customer's profile.
    unexplained: Vec<String>,
    /// Enriched orders whose timestamp is not their first copy's in
    /// `orders` (the join's timestamp is the stream record's, J2).
    retimed: usize,
}

impl Freshness {
    fn share(&self, count: usize) -> f64 {
        100.0 * count as f64 / self.orders.max(1) as f64
    }
}

fn freshness(read: &ReadBack, topics: &Topics, rekeyed: &str) -> Freshness {
    let decode = |bytes: &Option<_>| -> Vec<u8> {
        Option::as_deref(bytes)
            .map(<[u8]>::to_vec)
            .unwrap_or_default()
    };
    // Each customer's profile versions by (timestamp, offset); a customer's
    // profiles are in one partition.
    let mut profiles: BTreeMap<String, Vec<(i64, u64, Profile)>> = BTreeMap::new();
    for (_, record) in read.topic(topics.profiles.name().as_str()) {
        let customer = Codec::<String>::decode(&Utf8, &decode(&record.data.key)).expect("a key");
        let profile =
            Codec::<Profile>::decode(&Json, &decode(&record.data.value)).expect("a profile");
        profiles
            .entry(customer)
            .or_default()
            .push((record.data.timestamp, record.offset, profile));
    }
    for versions in profiles.values_mut() {
        versions.sort_by_key(|(timestamp, offset, _)| (*timestamp, *offset));
    }
    let mut first_copy: BTreeMap<String, i64> = BTreeMap::new();
    for (_, record) in read.topic(topics.orders.name().as_str()) {
        let order = Codec::<Order>::decode(&Json, &decode(&record.data.value)).expect("an order");
        let first = first_copy.entry(order.id).or_insert(record.data.timestamp);
        *first = (*first).min(record.data.timestamp);
    }
    // The orders that reached their by-customer partition after one of a
    // later timestamp.
    let mut overtaken: BTreeSet<String> = BTreeSet::new();
    let mut latest: BTreeMap<&parsley::Tp, i64> = BTreeMap::new();
    for (tp, record) in read.topic(rekeyed) {
        let Ok(order) = Codec::<Order>::decode(&Json, &decode(&record.data.value)) else {
            continue;
        };
        let latest = latest.entry(tp).or_insert(i64::MIN);
        if record.data.timestamp < *latest {
            overtaken.insert(order.id);
        }
        *latest = (*latest).max(record.data.timestamp);
    }
    let none = Vec::new();
    let mut judged = Freshness::default();
    for (_, record) in read.topic(topics.enriched.name().as_str()) {
        let sale = Codec::<Enriched>::decode(&Json, &decode(&record.data.value)).expect("a sale");
        let at = record.data.timestamp;
        judged.orders += 1;
        judged.judged_at.push(at);
        if first_copy.get(&sale.order.id) != Some(&at) {
            judged.retimed += 1;
        }
        let versions = profiles.get(&sale.order.customer).unwrap_or(&none);
        // What the join gives with version `index` (None: no row yet).
        let gives = |index: Option<usize>| -> (Option<String>, i64) {
            let profile = index.map(|index| &versions[index].2);
            let cents = sale.order.cents;
            (
                profile.map(|profile| profile.tier.clone()),
                cents - cents * profile.map_or(0, |profile| profile.discount) / 100,
            )
        };
        let observed = (sale.tier.clone(), sale.due);
        let as_of = versions
            .iter()
            .rposition(|(timestamp, ..)| *timestamp <= at);
        let before_tie = versions.iter().rposition(|(timestamp, ..)| *timestamp < at);
        let newer_matches = (as_of.map_or(0, |index| index + 1)..versions.len())
            .any(|index| gives(Some(index)) == observed);
        let older_matches = std::iter::once(None)
            .chain((0..as_of.unwrap_or(0)).map(Some))
            .filter(|index| *index != as_of)
            .any(|index| gives(index) == observed);
        let story = || {
            format!(
                "order {} of {} at {at}: tier {:?}, due {} of {}; profiles {:?}",
                sale.order.id,
                sale.order.customer,
                sale.tier,
                sale.due,
                sale.order.cents,
                versions
                    .iter()
                    .map(|(timestamp, _, profile)| (timestamp, &profile.tier, profile.discount))
                    .collect::<Vec<_>>()
            )
        };
        if gives(as_of) == observed {
            match newer_matches {
                true => judged.ambiguous += 1,
                false => judged.as_of += 1,
            }
        } else if before_tie != as_of && gives(before_tie) == observed {
            judged.ties += 1;
        } else if newer_matches {
            let by = (as_of.map_or(0, |index| index + 1)..versions.len())
                .find(|index| gives(Some(*index)) == observed)
                .map(|index| versions[index].0 - at)
                .expect("a newer version matches");
            judged.newer_by.push((at, by));
            judged
                .newer_overtaken
                .push(overtaken.contains(&sale.order.id));
            judged.newer.push(story());
        } else if older_matches {
            judged.older.push(story());
        } else {
            judged.unexplained.push(story());
        }
    }
    judged
}

/// The committed topics, read back; a read that times out (the broker
/// shares this machine's cores with both instances) is tried again, a few
/// times, naming each failure.
async fn read_back(
    client: &LiveClient,
    app: &parsley::App,
    assembly: &parsley::Assembly,
) -> ReadBack {
    let mut failures = Vec::new();
    for _ in 0..5 {
        match read_committed(client, app, assembly).await {
            Ok(read) => return read,
            Err(error) => failures.push(error.to_string()),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("reading back failed five times: {failures:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_one_of_two_instances_under_flowing_input_keeps_every_order_once_and_every_window_exact(
) {
    let Some(config) = test_broker() else { return };
    let bootstrap = config.bootstrap_servers.clone();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let namespace = format!("shop-{nanos:x}-");
    let began = Instant::now();
    let setup = command(
        &bootstrap,
        &namespace,
        &["setup", "shop", "--partitions", "2"],
    )
    .output()
    .expect("setup");
    assert!(
        setup.status.success(),
        "{}",
        String::from_utf8_lossy(&setup.stderr)
    );

    let mut first = instance(&bootstrap, &namespace);
    let mut second = instance(&bootstrap, &namespace);
    // Input flows before the kill and for a while after it: each side at
    // least a given time and a given number of batches (each `produce` is
    // a process of its own, seconds each on a loaded machine), within a
    // bound.
    let flowing = Arc::new(AtomicBool::new(true));
    let _stop_producing = StopOnDrop(Arc::clone(&flowing));
    let batches = Arc::new(AtomicU64::new(0));
    let producer = {
        let (flowing, batches, bootstrap, namespace) = (
            Arc::clone(&flowing),
            Arc::clone(&batches),
            bootstrap.clone(),
            namespace.clone(),
        );
        std::thread::spawn(move || {
            while flowing.load(Ordering::Relaxed) {
                let seed = batches.load(Ordering::Relaxed).to_string();
                let produced = command(&bootstrap, &namespace, &["produce", "shop"])
                    .args(["--count", "40", "--keys", "8", "--seed", &seed])
                    .output()
                    .expect("produce");
                assert!(
                    produced.status.success(),
                    "{}",
                    String::from_utf8_lossy(&produced.stderr)
                );
                batches.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(300));
            }
        })
    };
    let flow = |at_least: Duration, batches_at_least: u64| {
        let batches = Arc::clone(&batches);
        async move {
            let start = Instant::now();
            let from = batches.load(Ordering::Relaxed);
            while start.elapsed() < at_least
                || batches.load(Ordering::Relaxed) - from < batches_at_least
            {
                assert!(
                    start.elapsed() < Duration::from_secs(90),
                    "input flowed too slowly: {} batches in {:?}",
                    batches.load(Ordering::Relaxed) - from,
                    start.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            batches.load(Ordering::Relaxed) - from
        }
    };
    let before = flow(Duration::from_secs(8), 4).await;
    let killed_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    first.kill().expect("SIGKILL");
    first.wait().expect("the killed instance is reaped");
    let after = flow(Duration::from_secs(14), 6).await;
    flowing.store(false, Ordering::Relaxed);
    producer.join().expect("the producer");
    let batches = batches.load(Ordering::Relaxed);
    eprintln!(
        "input: {before} batches before the kill, {after} after it, {batches} in all, \
         stopped after {:?}",
        began.elapsed()
    );

    let topics = Topics::new(&namespace);
    let app = app(
        &namespace,
        &topics,
        Duration::from_millis(WINDOW_MS as u64),
        Duration::from_millis(GRACE_MS as u64),
    )
    .unwrap();
    let client = LiveClient::new(config).expect("client");
    let assembly = assemble_on(&client, &app).await.expect("assembled");
    let deadline = Instant::now() + Duration::from_secs(120);
    let (orders, windows, duplicates) = loop {
        assert!(
            second.try_wait().expect("status").is_none(),
            "the surviving instance exited"
        );
        let read = read_back(&client, &app, &assembly).await;
        let checked = check(&read, &topics);
        let statuses = task_status(&client, &app, &assembly).await.expect("status");
        let lag: u64 = statuses.iter().map(|task| task.lag()).sum();
        match checked {
            Ok((orders, windows)) if lag == 0 => {
                break (
                    orders,
                    windows,
                    read.topic(topics.orders.name().as_str()).len() - orders,
                )
            }
            other => assert!(
                Instant::now() < deadline,
                "{other:?}, lag {lag}, after the input stopped"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        orders > 200 && windows > 5,
        "{orders} orders, {windows} windows"
    );
    assert!(duplicates > 50, "{duplicates} duplicates dropped");
    eprintln!("exact, lag zero after {:?}", began.elapsed());

    let status = Command::new("kill")
        .args(["-TERM", &second.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(status.success());
    let exit = second.wait().expect("the survivor exits");
    assert!(exit.success(), "a graceful stop exits 0, got {exit}");
    let read = read_back(&client, &app, &assembly).await;
    check(&read, &topics).expect("still exact at rest");

    let report = parsley::audit::audit(&app, &assembly, &read.to_logs());
    assert!(report.is_clean(), "{report}");

    // G9 (issue 27): each order joined with its customer's profile as of
    // the order's timestamp. Measured and printed, not bounded: the join
    // delivers in timestamp order across its sources' heads (as Kafka
    // Streams does), but an order reaches its by-customer partition from
    // whichever dedupe task re-keyed it, not in timestamp order; one
    // overtaken there by a later order is joined after the profiles that
    // later order let through. Every order measured joined with a newer
    // profile had been overtaken so (4.2 % to 10.6 % of the orders after
    // the first 5 s and outside the 10 s after the kill; up to 59 % in
    // those 10 s, when the killed instance's tasks stall for its session
    // timeout while the survivor's go on; measured when each re-key was a
    // stage of its own).
    let judged = freshness(
        &read,
        &topics,
        &format!("{namespace}shop-by-customer-repartition"),
    );
    eprintln!(
        "profiles as of each order's timestamp: {} orders; {} as of ({:.1} %), \
         {} ambiguous ({:.1} %), {} ties ({:.1} %), {} newer ({:.1} %), {} older ({:.1} %), \
         {} unexplained; {} not at their first copy's timestamp",
        judged.orders,
        judged.as_of,
        judged.share(judged.as_of),
        judged.ambiguous,
        judged.share(judged.ambiguous),
        judged.ties,
        judged.share(judged.ties),
        judged.newer.len(),
        judged.share(judged.newer.len()),
        judged.older.len(),
        judged.share(judged.older.len()),
        judged.unexplained.len(),
        judged.retimed,
    );
    eprintln!(
        "newer, by when the order was written and by how much newer its profile (ms, below): {}",
        by_phase(&judged, (nanos / 1_000_000) as i64, killed_at)
    );
    for story in judged.newer.iter().take(5) {
        eprintln!("  {story}");
    }
    assert!(
        judged.older.is_empty() && judged.unexplained.is_empty(),
        "joined with an older profile than the order's: {:#?}; with none of the customer's: {:#?}",
        judged.older,
        judged.unexplained
    );
}

/// When an order was written, relative to the test's start and the kill:
/// its startup, its steady state (before the kill and from 10 s after it),
/// or the 10 s after the kill.
fn phase(at: i64, started_at: i64, killed_at: i64) -> (u8, &'static str) {
    match at {
        at if at < started_at + 5_000 => (0, "first 5 s"),
        at if at < killed_at => (1, "then until the kill"),
        at if at < killed_at + 10_000 => (2, "10 s after the kill"),
        _ => (3, "later"),
    }
}

/// The orders joined with a newer profile, by when they were written
/// (relative to the test's start and the kill) and by how much newer
/// their profile was (ms, below), with how many orders each phase had.
fn by_phase(judged: &Freshness, started_at: i64, killed_at: i64) -> String {
    let mut orders: BTreeMap<(u8, &str), usize> = BTreeMap::new();
    for at in &judged.judged_at {
        *orders.entry(phase(*at, started_at, killed_at)).or_default() += 1;
    }
    let mut overtaken: BTreeMap<(u8, &str), usize> = BTreeMap::new();
    for ((at, _), behind) in judged.newer_by.iter().zip(&judged.newer_overtaken) {
        *overtaken
            .entry(phase(*at, started_at, killed_at))
            .or_default() += usize::from(*behind);
    }
    let mut phases: BTreeMap<(u8, &str), BTreeMap<i64, usize>> = BTreeMap::new();
    for (at, by) in &judged.newer_by {
        let bucket = [100, 250, 500, 1_000, 2_000, 5_000, 10_000, i64::MAX]
            .into_iter()
            .find(|bound| by < bound)
            .expect("the last bound is the largest");
        *phases
            .entry(phase(*at, started_at, killed_at))
            .or_default()
            .entry(bucket)
            .or_default() += 1;
    }
    orders
        .iter()
        .map(|(phase, count)| {
            let newer = phases.get(phase).cloned().unwrap_or_default();
            let total: usize = newer.values().sum();
            format!(
                "{}: {total} of {count} ({:.1} %, {} of them overtaken in by-customer) {newer:?}",
                phase.1,
                100.0 * total as f64 / (*count).max(1) as f64,
                overtaken.get(phase).copied().unwrap_or(0)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
