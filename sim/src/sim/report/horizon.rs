//! Time-aware sizing: the longest stretch of time an application's logic
//! looks across (a window and its grace, a session's gap, a time to live, a
//! tick interval), and a plain note when a simulation's inputs span less
//! than it. A window that closes one interval early cannot show in a run
//! whose records all fall in one window, and nothing else in a summary says
//! so.

use std::fmt;
use std::time::Duration;

use parsley::App;
use parsley::WindowShape;

use crate::sim::world::settings::{Settings, TimeStrategy};
use crate::sim::world::stats::Stats;

/// One stretch of time the application declares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Horizon {
    /// What declares it, in words ("the windows of stage revenue: 60 s plus
    /// 5 s of grace").
    pub what: String,
    /// How long it is.
    pub span: Duration,
}

impl fmt::Display for Horizon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

fn seconds(duration: Duration) -> String {
    format!("{} s", trimmed(duration.as_secs_f64()))
}

fn trimmed(seconds: f64) -> String {
    let text = format!("{seconds:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Every horizon `app` declares, stage by stage.
pub fn horizons(app: &App) -> Vec<Horizon> {
    let mut found = Vec::new();
    for plan in app.stages() {
        let stage = &plan.stage;
        let name = plan.name();
        if let Some(window) = stage.hooks().operator::<parsley::WindowDecl>() {
            let (what, span) = match window.shape {
                WindowShape::Time { size, .. } => (
                    format!(
                        "the windows of stage {name}: {} plus {} of grace",
                        seconds(size),
                        seconds(window.grace)
                    ),
                    size + window.grace,
                ),
                WindowShape::Session { gap } => (
                    format!(
                        "the sessions of stage {name}: a gap of {} plus {} of grace",
                        seconds(gap),
                        seconds(window.grace)
                    ),
                    gap + window.grace,
                ),
            };
            found.push(Horizon { what, span });
        }
        if let Some(join) = stage.hooks().operator::<parsley::StreamJoinDecl>() {
            found.push(Horizon {
                what: format!(
                    "the join window of stage {name}: {} before, {} after, plus {} of grace",
                    seconds(join.before),
                    seconds(join.after),
                    seconds(join.grace)
                ),
                span: join.before + join.after + join.grace,
            });
        }
        if let Some(expiry) = stage.hooks().operator::<parsley::ExpiryDecl>() {
            found.push(Horizon {
                what: format!("the time to live of stage {name}: {}", seconds(expiry.ttl)),
                span: expiry.ttl,
            });
        }
        if let Some(ticks) = stage.ticks() {
            let what = match stage.hooks().operator::<parsley::TimerDecl>() {
                Some(_) => format!(
                    "the resolution of timer service {name}: {}",
                    seconds(ticks.interval)
                ),
                None => format!(
                    "the tick interval of stage {name}: {}",
                    seconds(ticks.interval)
                ),
            };
            found.push(Horizon {
                what,
                span: ticks.interval,
            });
        }
    }
    found
}

/// The longest of [`horizons`], if the application declares any.
pub fn longest(app: &App) -> Option<Horizon> {
    horizons(app).into_iter().max_by_key(|horizon| horizon.span)
}

/// The note for seeds whose inputs spanned, on average, less simulated time
/// than `horizon`: what it is, how far the inputs reached, and the knobs to
/// raise with their values now. `None` when the inputs reach past it.
pub fn note(horizon: &Horizon, stats: &Stats, seeds: u64, settings: &Settings) -> Option<String> {
    let span_ms = stats.inputs_span_ms / seeds.max(1);
    if u128::from(span_ms) >= horizon.span.as_millis() {
        return None;
    }
    // Boundary-seeking time jumps to windows' closes and expiries, which
    // spreads the same inputs over them.
    let aim = match settings.clock.time {
        TimeStrategy::Uniform => {
            ", or let the clock aim at the application's deadlines (`time`, now uniform: set it to boundary)"
        }
        TimeStrategy::Boundary => "",
    };
    Some(format!(
        "a seed's inputs span {} of simulated time on average, less than the application's longest horizon, {horizon}: a bug that needs records on both sides of it (in two windows, after a time to live) cannot show; raise the inputs (`inputs`, now {}) or the clock's steps (`step_ms`, now {}..={} ms) until they span it{aim}",
        seconds(Duration::from_millis(span_ms)),
        settings.workload.inputs,
        settings.clock.step_ms.min,
        settings.clock.step_ms.max
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use parsley::Windows;
    use parsley::{Parsley, Stage, Topic, Utf8, I64};

    fn app() -> App {
        let sales = Topic::<String, i64>::with_codecs("sales", Utf8, I64);
        let totals = Topic::with_codecs("totals", parsley::WindowedCodec(Utf8), I64);
        let revenue = Stage::named("revenue")
            .windowed(Windows::tumbling(Duration::from_secs(60)).grace(Duration::from_secs(5)))
            .aggregate(&sales, I64, || 0i64, |total, sale| total + sale.value())
            .into(&totals)
            .build();
        let out = Topic::<String, i64>::with_codecs("out", Utf8, I64);
        let beat = Stage::named("beat")
            .on(&sales, |_sale| Vec::new())
            .ticks(Duration::from_secs(10), |_tick| Vec::new())
            .into(&out)
            .build();
        Parsley::named("shop")
            .stage(revenue)
            .stage(beat)
            .build()
            .unwrap()
    }

    /// The longest horizon is named with its stage, and a run whose inputs
    /// span less is told so with the knobs to raise; one that spans it is
    /// not.
    #[test]
    fn inputs_shorter_than_the_longest_horizon_get_a_note_naming_it_and_the_knobs() {
        let app = app();
        let longest = longest(&app).unwrap();
        assert_eq!(longest.span, Duration::from_secs(65));
        assert_eq!(
            longest.what,
            "the windows of stage revenue: 60 s plus 5 s of grace"
        );
        assert_eq!(horizons(&app).len(), 2);
        let settings = Settings::default();
        let short = Stats {
            inputs_span_ms: 2 * 9_500,
            ..Stats::default()
        };
        let note = note(&longest, &short, 2, &settings).expect("9.5 s is short of 65 s");
        assert!(note.contains("span 9.5 s"), "{note}");
        assert!(note.contains("the windows of stage revenue"), "{note}");
        assert!(note.contains("`inputs`, now 100"), "{note}");
        assert!(note.contains("`step_ms`, now 1..=500 ms"), "{note}");
        assert!(!note.contains("`time`"), "{note}");
        let mut uniform = settings;
        uniform.clock.time = TimeStrategy::Uniform;
        let note = super::note(&longest, &short, 2, &uniform).expect("still short");
        assert!(note.contains("(`time`, now uniform"), "{note}");
        let long = Stats {
            inputs_span_ms: 2 * 65_000,
            ..Stats::default()
        };
        assert_eq!(super::note(&longest, &long, 2, &settings), None);
    }
}
