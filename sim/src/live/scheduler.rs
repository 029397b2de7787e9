//! The timer scheduler of the request/reply shape (K2) on a real cluster:
//! it drives [`TimerScheduler`], as the simulator does over the model. It
//! reads committed timer requests with `read_committed` and appends each
//! fire record when it is due, to the fire topic's partition of the request.
//! A request it cannot read stops it with a [`SchedulerError`] naming the
//! record.
//!
//! It keeps its pending timers in memory: a restarted scheduler reads the
//! requests again from the start and fires each again. The example's stage
//! tolerates that (a second fire releases an empty reservation); a
//! production scheduler would keep its position and pending timers durably.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parsley::assembly::Assembly;
use parsley::Tp;
use parsley_live::{Isolation, LiveClient, LiveError};

use crate::scheduler::{TimerRequestError, TimerScheduler};
use crate::topologies::TimerTopics;

/// Why the live scheduler stopped.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// Kafka refused a fetch of the requests or an append of a fire.
    #[error(transparent)]
    Live(#[from] LiveError),
    /// A committed timer request could not be read.
    #[error(transparent)]
    Request(#[from] TimerRequestError),
}

/// A running scheduler; [`LiveScheduler::stop`] ends it.
pub struct LiveScheduler {
    stop: Arc<AtomicBool>,
    fired: Arc<AtomicU64>,
    pending: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<Result<(), SchedulerError>>,
}

impl LiveScheduler {
    /// Starts reading `topics.requests` from the beginning of every partition.
    pub fn start(client: LiveClient, topics: &TimerTopics, assembly: &Assembly) -> LiveScheduler {
        let partitions = assembly
            .partitions_of(topics.requests.name().as_str())
            .unwrap_or(0);
        let requests: Vec<Tp> = (0..partitions)
            .map(|partition| topics.requests.tp(partition))
            .collect();
        let fires = topics.fires.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let fired = Arc::new(AtomicU64::new(0));
        let pending = Arc::new(AtomicU64::new(0));
        let (stopping, counting, waiting) =
            (Arc::clone(&stop), Arc::clone(&fired), Arc::clone(&pending));
        let task = tokio::spawn(async move {
            let mut consumer =
                client.consumer("parsley-live-scheduler", Isolation::ReadCommitted)?;
            let producer = client.plain_producer()?;
            let mut scheduler = TimerScheduler::new();
            let mut positions = vec![0u64; requests.len()];
            while !stopping.load(Ordering::Relaxed) {
                for (tp, position) in requests.iter().zip(positions.iter_mut()) {
                    let fetched = consumer.fetch(tp, *position).await?;
                    *position = fetched.next_offset;
                    for record in &fetched.records {
                        scheduler.observe(tp, record)?;
                    }
                }
                for (partition, data) in scheduler.due(parsley_live::runtime::wall_clock_ms()) {
                    producer.append(&fires.tp(partition), &data).await?;
                    counting.fetch_add(1, Ordering::Relaxed);
                }
                waiting.store(scheduler.pending() as u64, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(())
        });
        LiveScheduler {
            stop,
            fired,
            pending,
            task,
        }
    }

    /// Fire records written so far.
    pub fn fired(&self) -> u64 {
        self.fired.load(Ordering::Relaxed)
    }

    /// Timers read but not yet due, at the last look.
    pub fn pending(&self) -> u64 {
        self.pending.load(Ordering::Relaxed)
    }

    /// Stops the scheduler and returns how its loop ended.
    pub async fn stop(self) -> Result<(), SchedulerError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.task.await {
            Ok(result) => result,
            Err(error) => Err(SchedulerError::Live(LiveError::Join {
                what: "the live timer scheduler".into(),
                reason: error.to_string(),
            })),
        }
    }
}
