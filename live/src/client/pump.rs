//! A producer whose events (delivery reports, librdkafka's log and
//! statistics) are served on a thread of its own that sleeps until one is
//! queued: [`PumpedProducer`].
//!
//! rust-rdkafka's `ThreadedProducer` serves them in 100-ms polls, and its
//! poll loop spins through the end of a poll that an event cut short: the
//! time left, under a millisecond, reaches librdkafka as a 0-ms wait, again
//! and again until the deadline passes. With delivery reports coming all
//! the time that is about 1 % of a core per producer, and the runtime makes
//! one producer per task (X4): in the order pipeline's live bench it was a
//! fifth of the process's CPU, most of it reading the clock. Here the
//! thread sleeps on the producer's queue's non-empty callback, and serves
//! each event with a 0-ms poll.

use std::ffi::c_void;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::bindings as rdsys;
use rdkafka::producer::{BaseProducer, Producer, ProducerContext};

use super::Wake;

/// How long the pump sleeps without a wake-up before it looks again: a
/// safety net only, the queue's callback wakes it.
const IDLE_LOOK: Duration = Duration::from_millis(100);

/// The most events the pump serves before it sleeps again: a queue that
/// keeps refilling cannot keep it from looking at its stop flag.
const EVENTS_PER_PASS: usize = 4096;

/// A [`BaseProducer`] with a thread that serves its events as they come;
/// dereferences to the producer. Dropping it stops and joins the thread
/// before the producer goes.
pub(crate) struct PumpedProducer<C: ProducerContext + 'static> {
    // Declared first: dropped (the thread joined, the queue's callback
    // off) before the producer.
    _pump: Pump,
    producer: Arc<BaseProducer<C>>,
}

impl<C: ProducerContext + 'static> PumpedProducer<C> {
    /// Starts serving `producer`'s events.
    pub(crate) fn new(producer: BaseProducer<C>) -> std::io::Result<PumpedProducer<C>> {
        let producer = Arc::new(producer);
        let wake = Arc::new(Wake::default());
        let queue = Arc::new(MainQueue::of(&producer, Arc::clone(&wake)));
        let stop = Arc::new(AtomicBool::new(false));
        let passes = Arc::new(AtomicU64::new(0));
        let thread = {
            let (producer, queue, wake, stop) = (
                Arc::clone(&producer),
                Arc::clone(&queue),
                Arc::clone(&wake),
                Arc::clone(&stop),
            );
            let passes = Arc::clone(&passes);
            std::thread::Builder::new()
                .name("producer events".into())
                .spawn(move || serve(&producer, &queue, &wake, &stop, &passes))?
        };
        Ok(PumpedProducer {
            _pump: Pump {
                stop,
                wake,
                thread: Some(thread),
                _queue: queue,
                passes,
            },
            producer,
        })
    }
}

impl<C: ProducerContext + 'static> PumpedProducer<C> {
    /// How many times the event thread has looked at the queue.
    #[cfg(test)]
    fn passes(&self) -> u64 {
        self._pump.passes.load(Ordering::Relaxed)
    }
}

impl<C: ProducerContext + 'static> Deref for PumpedProducer<C> {
    type Target = BaseProducer<C>;

    fn deref(&self) -> &BaseProducer<C> {
        &self.producer
    }
}

/// The pump's loop: serve what is queued, then sleep until the queue turns
/// non-empty (or [`IDLE_LOOK`] passes), until told to stop.
fn serve<C: ProducerContext>(
    producer: &BaseProducer<C>,
    queue: &MainQueue,
    wake: &Wake,
    stop: &AtomicBool,
    passes: &AtomicU64,
) {
    loop {
        passes.fetch_add(1, Ordering::Relaxed);
        // Armed before the queue is read: an event queued from here on
        // wakes the sleep below.
        wake.arm();
        let mut served = 0;
        while served < EVENTS_PER_PASS && queue.len() > 0 {
            // A 0-ms poll serves one event at most, and never spins.
            producer.poll(Duration::ZERO);
            served += 1;
        }
        if stop.load(Ordering::Acquire) {
            return;
        }
        // The queue's callback fires only when it turns non-empty: a queue
        // left non-empty by a full pass would not wake the sleep.
        if queue.len() > 0 {
            continue;
        }
        wake.wait(IDLE_LOOK);
    }
}

struct Pump {
    stop: Arc<AtomicBool>,
    wake: Arc<Wake>,
    thread: Option<JoinHandle<()>>,
    // Kept until the thread is joined; its drop turns the callback off.
    _queue: Arc<MainQueue>,
    /// How many times the thread looked at the queue.
    passes: Arc<AtomicU64>,
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.wake.notify();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("a producer's event thread panicked");
            }
        }
        tracing::trace!(
            passes = self.passes.load(Ordering::Relaxed),
            "a producer's event thread stopped"
        );
    }
}

/// A handle on the producer's main queue (where librdkafka puts its
/// events) with the non-empty callback that notifies the pump's [`Wake`].
struct MainQueue {
    queue: NonNull<rdsys::rd_kafka_queue_t>,
    /// The callback's argument: freed only after the callback is off.
    wake: *const Wake,
}

// SAFETY: librdkafka's queue handles may be used from any thread, and the
// `Wake` behind `wake` is `Sync`.
unsafe impl Send for MainQueue {}
unsafe impl Sync for MainQueue {}

unsafe extern "C" fn queue_turned_non_empty(_: *mut rdsys::rd_kafka_t, opaque: *mut c_void) {
    // SAFETY: `opaque` is `MainQueue::wake`, alive until the callback is
    // turned off in `MainQueue::drop`.
    let wake = unsafe { &*(opaque as *const Wake) };
    wake.notify();
}

impl MainQueue {
    fn of<C: ProducerContext>(producer: &BaseProducer<C>, wake: Arc<Wake>) -> MainQueue {
        // SAFETY: the client is alive (borrowed); the handle returned holds
        // a reference on the queue until `rd_kafka_queue_destroy`.
        let raw = unsafe { rdsys::rd_kafka_queue_get_main(producer.client().native_ptr()) };
        let queue = NonNull::new(raw).expect("librdkafka gives every client a main queue");
        let wake = Arc::into_raw(wake);
        // SAFETY: `queue` is a valid handle; `wake` outlives the callback
        // (released only after it is turned off).
        unsafe {
            rdsys::rd_kafka_queue_cb_event_enable(
                queue.as_ptr(),
                Some(queue_turned_non_empty),
                wake as *mut c_void,
            );
        }
        MainQueue { queue, wake }
    }

    /// How many events wait on the queue.
    fn len(&self) -> usize {
        // SAFETY: a valid handle until drop.
        unsafe { rdsys::rd_kafka_queue_length(self.queue.as_ptr()) }
    }
}

impl Drop for MainQueue {
    fn drop(&mut self) {
        // SAFETY: turning the callback off takes the queue's lock, which
        // the callback runs under: no call is in flight after it returns,
        // so the handle and the callback's argument may go.
        unsafe {
            rdsys::rd_kafka_queue_cb_event_enable(self.queue.as_ptr(), None, std::ptr::null_mut());
            rdsys::rd_kafka_queue_destroy(self.queue.as_ptr());
            drop(Arc::from_raw(self.wake));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Instant;

    use rdkafka::producer::{BaseRecord, DeliveryResult};
    use rdkafka::{ClientConfig, ClientContext};

    use super::*;

    #[derive(Default)]
    struct Reports(AtomicUsize);

    impl ClientContext for Reports {}

    impl ProducerContext for Reports {
        type DeliveryOpaque = ();

        fn delivery(&self, _: &DeliveryResult<'_>, _: ()) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A producer of a cluster nobody listens at: its records time out
    /// after 100 ms, each with a failed delivery report.
    fn unreachable() -> PumpedProducer<Reports> {
        let producer = ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:9")
            .set("message.timeout.ms", "100")
            .set("log_level", "0")
            .create_with_context(Reports::default())
            .expect("a producer");
        PumpedProducer::new(producer).expect("its event thread")
    }

    /// The event thread serves delivery reports as they are queued: a
    /// record that times out has its report without anyone polling.
    #[test]
    fn delivery_reports_are_served_without_polling() {
        let producer = unreachable();
        for _ in 0..3 {
            let record = BaseRecord::to("topic")
                .partition(0)
                .payload("value")
                .key("key");
            producer
                .send(record)
                .map_err(|(error, _)| error)
                .expect("queued");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while producer.context().0.load(Ordering::Relaxed) < 3 {
            assert!(Instant::now() < deadline, "the reports were never served");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// An idle producer's event thread sleeps: it looks at the queue about
    /// once per [`IDLE_LOOK`], not in a loop (rust-rdkafka's
    /// `ThreadedProducer` polls thousands of times a second at the end of
    /// each 100-ms poll).
    #[test]
    fn an_idle_event_thread_sleeps() {
        let producer = unreachable();
        // Whatever librdkafka queues at start (connection errors, logs).
        std::thread::sleep(Duration::from_millis(300));
        let before = producer.passes();
        std::thread::sleep(Duration::from_secs(1));
        let passes = producer.passes() - before;
        assert!(passes <= 40, "{passes} looks at an idle queue in a second");
    }

    /// Dropping the producer stops its thread promptly: the stop wakes it.
    #[test]
    fn dropping_stops_the_event_thread() {
        let producer = unreachable();
        let started = Instant::now();
        drop(producer);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
