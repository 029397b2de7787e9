//! What the live tests share: the broker's address, unique names, a small
//! summing application and the stopping of instances.

#![allow(dead_code)]

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parsley_live::LiveConfig;

/// The broker's address, or `None` (after a note) when the tests should
/// skip; see [`parsley_live::test_broker`].
pub fn live_config() -> Option<LiveConfig> {
    parsley_live::test_broker()
}

/// A name no other test, and no earlier run on the same broker, uses.
pub fn unique(kind: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    hasher.write_u64(nanos);
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    format!("live-{kind}-{:016x}", hasher.finish())
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64)
}

/// Everything the runtime logs in this test process, formatted: installed
/// once as the global subscriber (task threads log there), read by tests
/// that look for their own app's lines.
pub fn captured_logs() -> String {
    use std::sync::{Arc, Mutex, OnceLock};
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    let logs = LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&logs);
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || Capture(Arc::clone(&sink)))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
        logs
    });
    String::from_utf8_lossy(&logs.lock().unwrap()).into_owned()
}

struct Capture(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Starts three instances of `app` at once, asserts that each starts, that
/// together they run `tasks` tasks within `within` with none exiting, then
/// stops them and asserts each task ended gracefully or was released.
pub async fn three_instances_all_run(
    app: std::sync::Arc<parsley::App>,
    config: parsley_live::RuntimeConfig,
    tasks: usize,
    within: std::time::Duration,
) {
    use parsley_live::Runtime;
    let (a, b, c) = tokio::join!(
        Runtime::start(std::sync::Arc::clone(&app), config.clone()),
        Runtime::start(std::sync::Arc::clone(&app), config.clone()),
        Runtime::start(std::sync::Arc::clone(&app), config.clone()),
    );
    let instances: Vec<Runtime> = [a, b, c]
        .into_iter()
        .map(|started| started.unwrap_or_else(|error| panic!("an instance did not start: {error}")))
        .collect();
    let deadline = std::time::Instant::now() + within;
    loop {
        assert!(
            instances.iter().all(|runtime| !runtime.finished()),
            "an instance exited"
        );
        let running: usize = instances.iter().map(|runtime| runtime.tasks().len()).sum();
        if running == tasks {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the three instances run {running} of {tasks} tasks after {within:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    stop_all(instances).await;
}

/// Stops every instance and waits for it, asserting that each of its tasks
/// ended gracefully or was released.
pub async fn stop_all(instances: Vec<parsley_live::Runtime>) {
    for runtime in &instances {
        runtime.stopper().stop();
    }
    for runtime in instances {
        for run in runtime.wait().await {
            if let Err(error) = &run.outcome {
                assert!(error.is_released(), "{}: {error}", run.task);
            }
        }
    }
}

/// The application `id` of one stage named `stage`: sums the values of
/// each key of `input` into `output`, emitting each new total.
pub fn summing(
    id: &str,
    stage: &str,
    input: &parsley::Topic<String, i64>,
    output: &parsley::Topic<String, i64>,
) -> parsley::App {
    use parsley::{Json, Parsley, Stage, Step};
    let emit = output.clone();
    let stage = Stage::named(stage)
        .state(Json, || 0i64)
        .on(input, move |sum: i64, record| {
            let total = sum + record.value();
            Ok::<_, String>(Step::of(total).emit(emit.send(record.key().cloned(), total)))
        })
        .into(output)
        .build();
    Parsley::named(id)
        .stage(stage)
        .build()
        .expect("the test app composes")
}
