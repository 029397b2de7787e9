//! X6: stages that consume the same topic commit their positions and
//! checkpoints under consumer groups of their own, so a restart of one
//! stage's task resumes from that stage's position, never the other's.
//!
//! The application here is written the way a user would write one, with the
//! public API only: `clicks` feeds two stages, `count` (stateful) and
//! `mirror` (stateless).

use std::time::Duration;

use crate::support::{mirror, START};
use parsley::mutation::{self, Mutation};
use parsley::{assemble, App, Parsley, Stage, Step, Topic, Tp, Utf8, I64};
use parsley_sim::audit::{audit, committed_logs};
use parsley_sim::TestDriver;

const SECOND: Duration = Duration::from_secs(1);

struct Shop {
    clicks: Topic<String, i64>,
    counts: Topic<String, i64>,
    mirrored: Topic<String, i64>,
    app: App,
}

fn shop() -> Shop {
    let clicks: Topic<String, i64> = Topic::with_codecs("clicks", Utf8, I64);
    let counts: Topic<String, i64> = Topic::with_codecs("counts", Utf8, I64);
    let mirrored: Topic<String, i64> = Topic::with_codecs("mirrored", Utf8, I64);
    let count = Stage::named("count")
        .state(I64, || 0i64)
        .on(&clicks, {
            let counts = counts.clone();
            move |seen: i64, click| {
                Step::of(seen + 1).emit(counts.send(click.key().cloned(), seen + 1))
            }
        })
        .into(&counts)
        .build();
    let mirror = mirror(&clicks, &mirrored);
    let app = Parsley::named("shop")
        .stage(count)
        .stage(mirror)
        .build()
        .expect("two stages may consume one topic");
    Shop {
        clicks,
        counts,
        mirrored,
        app,
    }
}

fn committed(driver: &TestDriver, group: &str, tp: &Tp) -> Option<u64> {
    driver
        .cluster()
        .committed(group, tp)
        .map(|committed| committed.offset)
}

/// X6: each stage's group is `<application.id>-<stage>`.
#[test]
fn x6_each_stage_has_a_group_of_its_own() {
    let shop = shop();
    assert_eq!(shop.app.group_of("count"), Some("shop-count"));
    assert_eq!(shop.app.group_of("mirror"), Some("shop-mirror"));
    assert_eq!(shop.app.group_of("nope"), None);
}

/// X6: `count` commits `clicks-0` while `mirror`'s delivery of the same
/// record is still uncommitted; `mirror`'s task then restarts alone. It must
/// resume from its own committed position (nothing), not from `count`'s,
/// and deliver the click again: one mirrored record, one count, and a clean
/// audit. Under one shared group the restart resumed past the click and the
/// mirrored record was lost.
#[test]
fn x6_a_restarted_stage_resumes_from_its_own_position_not_a_sibling_stage() {
    let (driver, shop) = restart_mirror_between_commits();
    let input = Tp::new("clicks", 0);
    assert_eq!(committed(&driver, "shop-mirror", &input), Some(1));
    assert_eq!(
        driver
            .output(&shop.mirrored)
            .unwrap()
            .read_values()
            .unwrap(),
        [7]
    );
    assert_eq!(
        driver.output(&shop.counts).unwrap().read_values().unwrap(),
        [1]
    );
    let cluster = driver.cluster();
    let assembly = assemble(&shop.app, &*cluster).unwrap();
    let logs = committed_logs(&cluster, &shop.app, &assembly);
    let report = audit(&shop.app, &assembly, &logs);
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.summary.outputs_matched, 2, "{report}");
}

/// The test above bites: with every stage under the application id (the
/// planted bug `SharedGroup`), `mirror` restarts from `count`'s position
/// and the mirrored click is lost.
#[test]
fn x6_under_one_shared_group_the_restarted_stage_loses_its_output() {
    mutation::set(Some(Mutation::SharedGroup));
    let (driver, shop) = restart_mirror_between_commits();
    mutation::set(None);
    let mirrored = driver
        .output(&shop.mirrored)
        .unwrap()
        .read_values()
        .unwrap();
    assert!(mirrored.is_empty(), "{mirrored:?}");
}

/// `count` commits `clicks-0` while `mirror`'s delivery of the same record
/// is uncommitted, and `mirror` restarts twice before it commits.
fn restart_mirror_between_commits() -> (TestDriver, Shop) {
    let shop = shop();
    let driver = TestDriver::builder(&shop.app)
        .initial_wall_clock(START)
        .commit_each_step(false)
        .commit_interval(10 * SECOND)
        .build()
        .unwrap();
    let clicks = driver.input(&shop.clicks).unwrap();
    clicks.pipe("ada".to_string(), 7).unwrap();
    // Half an interval later `mirror` crashes: its producer's open
    // transaction is aborted, and its task delivers the click again.
    driver.advance_wall_clock(5 * SECOND).unwrap();
    driver.restart_task("mirror", 0).unwrap();
    // `count` commits at the interval; `mirror`, restarted later, has not
    // reached its own interval yet.
    driver.advance_wall_clock(5 * SECOND).unwrap();
    if !mutation::active(Mutation::SharedGroup) {
        let input = Tp::new("clicks", 0);
        assert_eq!(committed(&driver, "shop-count", &input), Some(1));
        assert_eq!(committed(&driver, "shop-mirror", &input), None);
        assert_eq!(committed(&driver, "shop", &input), None, "no shared group");
    }
    // `mirror` crashes again before it commits.
    driver.restart_task("mirror", 0).unwrap();
    driver.advance_wall_clock(10 * SECOND).unwrap();
    (driver, shop)
}

/// `restart_task` names a task that exists.
#[test]
fn restart_task_refuses_an_unknown_task() {
    let shop = shop();
    let driver = TestDriver::new(&shop.app).unwrap();
    let error = driver.restart_task("mirror", 3).unwrap_err();
    assert!(error.to_string().contains("mirror"), "{error}");
}

/// I15: the simulator reads who committed what from the cluster's
/// committed group offsets, so with every stage under the application id
/// (the planted bug `SharedGroup`) its report names the shared group and
/// both stages, not only the records `mirror` then skips.
#[test]
fn i15_the_simulator_names_a_group_two_stages_share() {
    use parsley_sim::sim::{Input, Simulation};
    let shop = shop();
    let simulation = Simulation::builder(shop.app.clone())
        .input(Input::new(&shop.clicks, |draw| {
            (Some(draw.key()), draw.range(1, 100))
        }))
        .inputs(20)
        .keys(3)
        .planted(Some(Mutation::SharedGroup))
        .build()
        .unwrap();
    let summary = simulation.check_seeds(0..5);
    let failure = summary.failure.expect("a shared group is caught");
    assert!(failure.contains("fails I15 a group per stage"), "{failure}");
    assert!(
        failure.contains("group `shop` is no stage's group, but it holds committed positions on"),
        "{failure}"
    );
    assert!(
        failure.contains("consumed by stages `count` and `mirror`, which share it"),
        "{failure}"
    );
}
