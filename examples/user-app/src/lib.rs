//! Sessions and fraud, as a user would write them:
//!
//! ```text
//! clicks ──► sessions ──► session-timer-requests ──► session-timers (K2) ──► session-timer-fires ──► sessions
//!               └──► session-summaries ──► fraud ◄── payments
//!                                            └──► alerts
//! ```
//!
//! `sessions` keeps each user's open session and asks the timer service for
//! a fire a gap after every click; the fire of the last click's timer closes
//! the session and writes its click count to `session-summaries`. `fraud`
//! remembers each user's last closed session and raises an alert for a
//! large payment from a user whose last session was a single click.

use parsley::{App, CompositionError, Json, Parsley, Stage, Step, Topic, Utf8, I64};
use serde::{Deserialize, Serialize};

/// An idle gap that closes a session.
pub const GAP_MS: i64 = 30_000;
/// A payment at or above this is large.
pub const LARGE: i64 = 1_000;

/// The application's topics.
#[derive(Clone)]
pub struct Topics {
    /// Clicks, keyed by user; the value is the page.
    pub clicks: Topic<String, i64>,
    /// Payments, keyed by user; the value is the amount.
    pub payments: Topic<String, i64>,
    /// Timer requests (K2).
    pub requests: Topic<String, i64>,
    /// Timer fires (K2).
    pub fires: Topic<String, i64>,
    /// Closed sessions' click counts.
    pub summaries: Topic<String, i64>,
    /// Alerts: the payment's amount.
    pub alerts: Topic<String, i64>,
}

impl Topics {
    /// The topics, every name after `prefix`.
    pub fn new(prefix: &str) -> Topics {
        let topic = |name: &str| Topic::with_codecs(format!("{prefix}{name}"), Utf8, I64);
        Topics {
            clicks: topic("clicks"),
            payments: topic("payments"),
            requests: topic("session-timer-requests"),
            fires: topic("session-timer-fires"),
            summaries: topic("session-summaries"),
            alerts: topic("alerts"),
        }
    }
}

/// A user's open session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Clicks so far.
    pub clicks: i64,
    /// The last click's timestamp.
    pub last: i64,
}

/// The application, its id after `prefix`, closing sessions after `gap_ms`.
pub fn app(prefix: &str, topics: &Topics, gap_ms: i64) -> Result<App, CompositionError> {
    let sessions = Stage::named("sessions")
        .state(Json, Session::default)
        .on(&topics.clicks, {
            let requests = topics.requests.clone();
            move |session: Session, click| {
                let next = Session {
                    clicks: session.clicks + 1,
                    last: click.timestamp(),
                };
                Step::of(next).emit(requests.send(click.key().cloned(), click.timestamp() + gap_ms))
            }
        })
        .on(&topics.fires, {
            let summaries = topics.summaries.clone();
            move |session: Session, fire| match session.clicks > 0
                && session.last + gap_ms == *fire.value()
            {
                true => Step::delete().emit(summaries.send(fire.key().cloned(), session.clicks)),
                false => Step::of(session),
            }
        })
        .into((&topics.requests, &topics.summaries))
        .build();
    let timers = Stage::named("session-timers")
        .timer_service(&topics.requests, &topics.fires)
        .build();
    let fraud = Stage::named("fraud")
        .state(I64, || 0i64)
        .on(&topics.summaries, |_last: i64, summary| {
            Step::of(*summary.value())
        })
        .on(&topics.payments, {
            let alerts = topics.alerts.clone();
            move |last: i64, payment| match last == 1 && *payment.value() >= LARGE {
                true => Step::of(last).emit(alerts.send(payment.key().cloned(), *payment.value())),
                false => Step::of(last),
            }
        })
        .into(&topics.alerts)
        .build();
    Parsley::named(format!("{prefix}fraud-watch"))
        .stage(sessions)
        .stage(timers)
        .stage(fraud)
        .build()
}
