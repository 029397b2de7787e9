//! The timer scheduler of the request/reply shape (K2) on a real cluster:
//! the live counterpart of the simulator's. It reads committed timer
//! requests with `read_committed`, observes each with a [`CausalClock`]
//! (K1), and when a request's time comes appends the keyed fire record,
//! stamped with what it observed, to the fire topic's partition of the
//! request. The consumer of the fire record is thereby gated behind the
//! request and its causes.
//!
//! It keeps its pending timers in memory: a restarted scheduler reads the
//! requests again from the start and fires each again. The example's stage
//! tolerates that (a second fire releases an empty reservation); a
//! production scheduler would keep its position and pending timers durably.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parsley::assembly::Assembly;
use parsley::live::{Isolation, LiveClient, LiveError};
use parsley::{CausalClock, Codec, Json, RecordData, Tp};

use crate::topologies::TimerTopics;

/// A running scheduler; [`LiveScheduler::stop`] ends it.
pub struct LiveScheduler {
    stop: Arc<AtomicBool>,
    fired: Arc<AtomicU64>,
    pending: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<Result<(), LiveError>>,
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
            let mut clock = CausalClock::new();
            let mut positions = vec![0u64; requests.len()];
            let mut timers: Vec<(Bytes, i64, u32)> = Vec::new();
            while !stopping.load(Ordering::Relaxed) {
                for (tp, position) in requests.iter().zip(positions.iter_mut()) {
                    let fetched = consumer.fetch(tp, *position).await?;
                    *position = fetched.next_offset;
                    for record in fetched.records {
                        // Stages write valid stamps; a request that does not
                        // decode is skipped by the clock, not by the timer.
                        let _ = clock.observe(tp, &record);
                        let fire_at = record
                            .data
                            .value
                            .as_deref()
                            .and_then(|value| Codec::<i64>::decode(&Json, value).ok());
                        if let (Some(key), Some(fire_at)) = (record.data.key.clone(), fire_at) {
                            timers.push((key, fire_at, tp.partition));
                        }
                    }
                }
                let now = parsley::live::runtime::wall_clock_ms();
                let (due, later): (Vec<_>, Vec<_>) = timers
                    .drain(..)
                    .partition(|(_, fire_at, _)| *fire_at <= now);
                timers = later;
                for (key, fire_at, partition) in due {
                    let mut data = RecordData {
                        key: Some(key),
                        value: Some(Codec::<i64>::encode(&Json, &fire_at).expect("times encode")),
                        headers: Vec::new(),
                        timestamp: now,
                    };
                    clock.stamp_record(&mut data);
                    producer.append(&fires.tp(partition), &data).await?;
                    counting.fetch_add(1, Ordering::Relaxed);
                }
                waiting.store(timers.len() as u64, Ordering::Relaxed);
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
    pub async fn stop(self) -> Result<(), LiveError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.task.await {
            Ok(result) => result,
            Err(error) => Err(LiveError::Join {
                what: "the live timer scheduler".into(),
                reason: error.to_string(),
            }),
        }
    }
}
