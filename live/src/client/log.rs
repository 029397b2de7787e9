//! librdkafka's log: the client context every client made here shares
//! ([`LogContext`]), and what each context does with librdkafka's log lines
//! and global errors.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::ClientContext;

/// The context of every client made here: librdkafka's log lines and
/// global errors go to `tracing` under the target `librdkafka`, at the level
/// librdkafka gives them ([`tracing_level`]), so `PARSLEY_LOG`'s
/// `librdkafka=…` directive filters all of them; and an error librdkafka
/// both logs and reports (a broker connection that failed, say) is printed
/// once, not twice.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogContext;

impl ClientContext for LogContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        log_librdkafka(level, fac, log_message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        error_librdkafka(&error, reason);
    }

    // Only the clients made with `statistics.interval.ms` report any: the
    // runtime's stage consumers.
    fn stats(&self, statistics: rdkafka::Statistics) {
        crate::stats::publish(&statistics);
    }
}

impl ConsumerContext for LogContext {}

/// librdkafka's syslog level as a `tracing` level: emergency to error are
/// errors, warning a warning, notice and info info, debug debug.
pub fn tracing_level(level: RDKafkaLogLevel) -> tracing::Level {
    match level {
        RDKafkaLogLevel::Emerg
        | RDKafkaLogLevel::Alert
        | RDKafkaLogLevel::Critical
        | RDKafkaLogLevel::Error => tracing::Level::ERROR,
        RDKafkaLogLevel::Warning => tracing::Level::WARN,
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => tracing::Level::INFO,
        RDKafkaLogLevel::Debug => tracing::Level::DEBUG,
    }
}

/// One event under the target `librdkafka` at `level`.
macro_rules! librdkafka_event {
    ($level:expr, $($rest:tt)+) => {
        match $level {
            tracing::Level::ERROR => tracing::event!(target: "librdkafka", tracing::Level::ERROR, $($rest)+),
            tracing::Level::WARN => tracing::event!(target: "librdkafka", tracing::Level::WARN, $($rest)+),
            tracing::Level::INFO => tracing::event!(target: "librdkafka", tracing::Level::INFO, $($rest)+),
            tracing::Level::DEBUG => tracing::event!(target: "librdkafka", tracing::Level::DEBUG, $($rest)+),
            tracing::Level::TRACE => tracing::event!(target: "librdkafka", tracing::Level::TRACE, $($rest)+),
        }
    };
}

/// What a client context does with one of librdkafka's log lines: logs it
/// under the target `librdkafka` at its level ([`tracing_level`]), unless it
/// repeats an error just reported through [`error_librdkafka`]. For
/// `ClientContext::log` of every context in the crate.
pub(crate) fn log_librdkafka(level: RDKafkaLogLevel, fac: &str, message: &str) {
    if echoes().log_line(Instant::now(), message) {
        librdkafka_event!(tracing_level(level), facility = fac, "{message}");
    }
}

/// What a client context does with one of librdkafka's global errors: logs
/// it under the target `librdkafka`, as an error if it is fatal and a
/// warning otherwise (librdkafka retries the rest by itself), unless a log
/// line just said the same. For `ClientContext::error` of every context in
/// the crate.
pub(crate) fn error_librdkafka(error: &KafkaError, reason: &str) {
    if !echoes().error_line(Instant::now(), reason) {
        return;
    }
    let fatal = error.rdkafka_error_code() == Some(RDKafkaErrorCode::Fatal);
    let level = if fatal {
        tracing::Level::ERROR
    } else {
        tracing::Level::WARN
    };
    librdkafka_event!(level, error = %error, "{reason}");
}

fn echoes() -> std::sync::MutexGuard<'static, Echoes> {
    static ECHOES: Mutex<Echoes> = Mutex::new(Echoes::new());
    ECHOES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// librdkafka says most failures twice: once as a log line (`FAIL`,
/// `ERROR`, …) and once as a global error whose reason is the same text.
/// This remembers what was said in the last few seconds, so the second
/// saying is dropped whichever comes first.
#[derive(Debug)]
struct Echoes {
    /// (when, log line) and (when, error reason), newest last.
    lines: std::collections::VecDeque<(Instant, bool, String)>,
}

impl Echoes {
    /// How long a line is remembered.
    const WINDOW: Duration = Duration::from_secs(5);
    /// How many lines are remembered.
    const KEEP: usize = 64;

    const fn new() -> Echoes {
        Echoes {
            lines: std::collections::VecDeque::new(),
        }
    }

    fn forget_old(&mut self, now: Instant) {
        while self.lines.len() >= Self::KEEP
            || self
                .lines
                .front()
                .is_some_and(|(at, _, _)| now.saturating_duration_since(*at) > Self::WINDOW)
        {
            self.lines.pop_front();
        }
    }

    /// Whether a log line is to be printed: not when it repeats an error
    /// reason said in the window.
    fn log_line(&mut self, now: Instant, message: &str) -> bool {
        self.forget_old(now);
        let echo = self
            .lines
            .iter()
            .any(|(_, error, reason)| *error && !reason.is_empty() && message.contains(reason));
        self.lines.push_back((now, false, message.to_owned()));
        !echo
    }

    /// Whether an error is to be printed: not when a log line in the window
    /// said it (or the same error was just printed).
    fn error_line(&mut self, now: Instant, reason: &str) -> bool {
        self.forget_old(now);
        let echo = self.lines.iter().any(|(_, error, line)| {
            if *error {
                line == reason
            } else {
                !reason.is_empty() && line.contains(reason)
            }
        });
        self.lines.push_back((now, true, reason.to_owned()));
        !echo
    }
}
/// What `run` logs under the runtime's default filter (`info`, librdkafka's
/// own lines from `warn`), as the text a terminal would show: for the
/// tests that pin a log line.
#[cfg(test)]
pub(crate) fn logged(run: impl FnOnce()) -> String {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info,librdkafka=warn"))
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, run);
    let bytes = captured
        .0
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// librdkafka's syslog levels land on tracing's levels.
    #[test]
    fn librdkafka_levels_map_to_tracing_levels() {
        use tracing::Level;
        for (level, expected) in [
            (RDKafkaLogLevel::Emerg, Level::ERROR),
            (RDKafkaLogLevel::Alert, Level::ERROR),
            (RDKafkaLogLevel::Critical, Level::ERROR),
            (RDKafkaLogLevel::Error, Level::ERROR),
            (RDKafkaLogLevel::Warning, Level::WARN),
            (RDKafkaLogLevel::Notice, Level::INFO),
            (RDKafkaLogLevel::Info, Level::INFO),
            (RDKafkaLogLevel::Debug, Level::DEBUG),
        ] {
            assert_eq!(tracing_level(level), expected, "{level:?}");
        }
    }

    /// A failure librdkafka says twice (a log line, then a global error
    /// with the same text, or the other way round) is printed once; another
    /// failure, or the same one after the window, is printed again.
    #[test]
    fn an_error_said_twice_is_printed_once() {
        let now = Instant::now();
        let reason = "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)";
        let mut echoes = Echoes::new();
        assert!(echoes.log_line(now, &format!("[thrd:127.0.0.1:1/bootstrap]: {reason}")));
        assert!(!echoes.error_line(now, reason));
        let mut echoes = Echoes::new();
        assert!(echoes.error_line(now, reason));
        assert!(!echoes.log_line(now, &format!("[thrd:127.0.0.1:1/bootstrap]: {reason}")));
        assert!(
            !echoes.error_line(now, reason),
            "the same error again at once"
        );
        assert!(echoes.error_line(now, "1/1 brokers are down"));
        let later = now + Echoes::WINDOW + Duration::from_secs(1);
        assert!(echoes.error_line(later, reason));
    }

    /// librdkafka's lines reach tracing under the target `librdkafka` at
    /// their level, and an error it also logged is printed once.
    #[test]
    fn librdkafka_lines_are_logged_under_its_target_once() {
        let text = logged(|| {
            let reason = "test-capture:1/bootstrap: Connect failed: Connection refused";
            LogContext.log(
                RDKafkaLogLevel::Error,
                "FAIL",
                &format!("[thrd:x]: {reason}"),
            );
            LogContext.error(
                KafkaError::Global(RDKafkaErrorCode::BrokerTransportFailure),
                reason,
            );
            LogContext.log(
                RDKafkaLogLevel::Notice,
                "CONFWARN",
                "test-capture: a notice",
            );
            LogContext.error(
                KafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
                "test-capture: 1/1 brokers are down",
            );
        });
        let lines: Vec<&str> = text
            .lines()
            .filter(|line| line.contains("test-capture"))
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].contains("ERROR librdkafka") && lines[0].contains("facility=\"FAIL\""),
            "{text}"
        );
        assert!(
            lines[1].contains("WARN librdkafka") && lines[1].contains("brokers are down"),
            "{text}"
        );
    }
}
