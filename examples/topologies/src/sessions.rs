//! The sessions example (K2).

use serde::{Deserialize, Serialize};

use parsley::{App, CompositionError, Json, Parsley, Stage, Step, Topic, I64};

use crate::*;

/// The topics of the sessions example (K2).
#[derive(Clone, Debug)]
pub struct SessionTopics {
    /// Clicks, keyed by user; the value is the page (unused by the logic).
    pub clicks: Topic<String, i64>,
    /// Timer requests: the time a user's session would close (K2).
    pub requests: Topic<String, i64>,
    /// The timer service's fires (K2).
    pub fires: Topic<String, i64>,
    /// Closed sessions: the user and the session's click count.
    pub summaries: Topic<String, i64>,
}

impl SessionTopics {
    /// The topics with their plain names.
    pub fn new() -> Self {
        SessionTopics::with_prefix("")
    }

    /// The same topics with `prefix` before each name.
    pub fn with_prefix(prefix: &str) -> Self {
        SessionTopics {
            clicks: long_topic(format!("{prefix}clicks")),
            requests: long_topic(format!("{prefix}session-timer-requests")),
            fires: long_topic(format!("{prefix}session-timer-fires")),
            summaries: long_topic(format!("{prefix}session-summaries")),
        }
    }
}

impl Default for SessionTopics {
    fn default() -> Self {
        SessionTopics::new()
    }
}

/// How long a user stays idle before their session closes.
pub const SESSION_GAP_MS: i64 = 30_000;

/// A user's open session: its clicks and the time of the last one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Clicks so far.
    pub clicks: i64,
    /// The last click's timestamp.
    pub last_click: i64,
}

/// Sessions with timers (K2): `sessions` keeps each user's open session and
/// asks the timer service (`session-timers`) for a timer at every click, a
/// gap after it; a fire closes the session when it is the last click's
/// timer (later clicks asked for later timers, so earlier fires find the
/// session still going) and writes its summary; `report` folds the
/// summaries into a count of clicks per user in closed sessions.
pub fn sessions(topics: &SessionTopics) -> Result<App, CompositionError> {
    sessions_named("sessions", topics, SESSION_GAP_MS)
}

/// [`sessions`] under another application id and gap.
pub fn sessions_named(
    app_id: &str,
    topics: &SessionTopics,
    gap_ms: i64,
) -> Result<App, CompositionError> {
    let requests = topics.requests.clone();
    let summaries = topics.summaries.clone();
    let sessions = Stage::named("sessions")
        .state(Json, Session::default)
        .on(&topics.clicks, move |session: Session, click| {
            let next = Session {
                clicks: session.clicks + 1,
                last_click: click.timestamp(),
            };
            Step::of(next).emit(requests.send(click.key().cloned(), click.timestamp() + gap_ms))
        })
        .on(&topics.fires, move |session: Session, fire| {
            if session.clicks > 0 && session.last_click + gap_ms == *fire.value() {
                Step::delete().emit(summaries.send(fire.key().cloned(), session.clicks))
            } else {
                Step::of(session)
            }
        })
        .into((&topics.requests, &topics.summaries))
        .build();
    let report = Stage::named("report")
        .state(I64, || 0i64)
        .on(&topics.summaries, |clicks: i64, summary| {
            Step::of(clicks + summary.value())
        })
        .build();
    let timers = Stage::named("session-timers")
        .timer_service(&topics.requests, &topics.fires)
        .resolution(TIMER_RESOLUTION)
        .build();
    Parsley::named(app_id)
        .stage(sessions)
        .stage(timers)
        .stage(report)
        .build()
}
