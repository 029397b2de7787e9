//! `produce`: input records through the registered app's producer, paced
//! (`--rate`, `--duration`) and riding out an unusable cluster (`--wait`).

use super::*;

/// How many batches of a paced `produce` may be under way at once: a
/// producer slower than its tenth of a second (one that makes a client per
/// call, a cluster slow to acknowledge) keeps the rate without holding up
/// the next batch, up to this many.
const MAX_BATCHES_IN_FLIGHT: usize = 16;

/// What the batches of a `produce` did.
#[derive(Default)]
struct Tally {
    appended: usize,
    batches: usize,
    slowest: Duration,
    /// The first batch that failed, how long it took, and why.
    /// `None` for a batch whose producer panicked.
    failed: Option<(Option<crate::pacing::Batch>, Duration, BoxError)>,
}

impl Tally {
    fn add(
        &mut self,
        done: Result<
            (crate::pacing::Batch, Duration, Result<usize, BoxError>),
            tokio::task::JoinError,
        >,
    ) {
        match done {
            Ok((_, took, Ok(count))) => {
                self.appended += count;
                self.batches += 1;
                self.slowest = self.slowest.max(took);
            }
            Ok((batch, took, Err(error))) => {
                if self.failed.is_none() {
                    self.failed = Some((Some(batch), took, error));
                }
            }
            Err(error) => {
                if self.failed.is_none() {
                    self.failed = Some((
                        None,
                        Duration::ZERO,
                        format!("the producer panicked: {error}").into(),
                    ));
                }
            }
        }
    }
}

/// How long `produce --wait` pauses between two attempts to reach the
/// cluster: librdkafka's own `reconnect.backoff.max.ms`.
const WAIT_PAUSE: Duration = Duration::from_secs(1);

pub(super) async fn produce(registry: &Registry, args: ProduceArgs) -> ExitCode {
    let started = Instant::now();
    let (client, app, assembly) = match produce_client(registry, &args, started).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let Some(producer) = app.producer.clone() else {
        return fail(format!(
            "application {:?} has no producer: produce its input with your own tools",
            args.common.app
        ));
    };
    let total = match (args.count, args.rate, args.duration) {
        (Some(count), _, _) => count,
        (None, Some(rate), Some(duration)) => {
            (rate as f64 * duration.as_secs_f64()).round() as usize
        }
        (None, _, _) => 1000,
    };
    let pacing = crate::pacing::Pacing {
        total,
        rate: args.rate,
    };
    let reached = started.elapsed();
    let producing = tokio::time::Instant::now();
    let mut tally = Tally::default();
    let mut last_sent: Option<(crate::pacing::Batch, Duration)> = None;
    let mut running: tokio::task::JoinSet<(
        crate::pacing::Batch,
        Duration,
        Result<usize, BoxError>,
    )> = tokio::task::JoinSet::new();
    for batch in pacing.batches() {
        while let Some(done) = running.try_join_next() {
            tally.add(done);
        }
        while running.len() >= MAX_BATCHES_IN_FLIGHT && tally.failed.is_none() {
            if let Some(done) = running.join_next().await {
                tally.add(done);
            }
        }
        if tally.failed.is_some() {
            break;
        }
        tokio::time::sleep_until(producing + batch.due).await;
        let request = ProduceRequest {
            client: client.clone(),
            assembly: assembly.clone(),
            count: batch.count,
            keys: args.keys,
            seed: crate::pacing::batch_seed(args.seed, batch.index),
        };
        let sent = producer(request);
        last_sent = Some((batch, producing.elapsed()));
        running.spawn(async move {
            let began = Instant::now();
            let outcome = sent.await;
            (batch, began.elapsed(), outcome)
        });
    }
    while let Some(done) = running.join_next().await {
        tally.add(done);
    }
    let (appended, batches, slowest) = (tally.appended, tally.batches, tally.slowest);
    if let Some((batch, took, error)) = tally.failed {
        let waited = match args.wait {
            Some(wait) => format!(
                " after {:.1} s (each record could be retried for {:.1} s: --wait)",
                took.as_secs_f64(),
                wait.max(crate::client::DEFAULT_TIMEOUT).as_secs_f64()
            ),
            None => format!(" after {:.1} s", took.as_secs_f64()),
        };
        let which = batch.map_or("a batch".to_string(), |batch| {
            format!(
                "batch {} (records {}..{} of {total})",
                batch.index,
                batch.first,
                batch.first + batch.count
            )
        });
        let denied = denied_in(error.as_ref());
        let because = denied.as_ref().map_or(String::new(), |denied| {
            format!(
                "\nnot authorized: no ACL allows {} {denied} (`setup APP --print-acls PRINCIPAL --producer` prints the ACLs produce needs)",
                PRINCIPAL.get().map_or("this client's principal", String::as_str)
            )
        });
        eprintln!(
            "error: producing failed: {which} failed{waited}: {error}; \
             {appended} records were appended by the {batches} batches that completed; \
             the failed batch may be partly appended, and was not sent again{because}"
        );
        return ExitCode::from(if denied.is_some() {
            EXIT_NOT_AUTHORIZED
        } else {
            EXIT_FAILED
        });
    }
    let elapsed = producing.elapsed();
    match (args.rate, last_sent) {
        (Some(rate), Some((last, at))) => {
            // The rate the batches went at: the records before the last
            // batch over the time it took to reach it.
            let sent_rate = if at.is_zero() {
                String::new()
            } else {
                format!(" ({:.1} records/s", last.first as f64 / at.as_secs_f64())
                    + &format!("; --rate {rate})")
            };
            println!(
                "produced {appended} records in {batches} batches, the last sent after {:.2} s{sent_rate}, all acknowledged after {:.2} s; the slowest batch took {:.2} s",
                at.as_secs_f64(),
                elapsed.as_secs_f64(),
                slowest.as_secs_f64()
            );
        }
        _ => println!("produced {appended} records"),
    }
    if args.wait.is_some() && reached >= WAIT_PAUSE {
        println!(
            "waited {:.1} s for the cluster before the first batch",
            reached.as_secs_f64()
        );
    }
    ExitCode::SUCCESS
}

/// `produce`'s client, application and assembly. With `--wait`, an
/// unreachable cluster (and an answer Kafka says to retry) is tried again
/// every [`WAIT_PAUSE`] until the wait is over, and the client's bound on
/// each call, the producers' delivery timeout among them, is at least the
/// wait; then it fails as without it, saying how long it waited and that
/// nothing was appended.
async fn produce_client(
    registry: &Registry,
    args: &ProduceArgs,
    started: Instant,
) -> Result<(LiveClient, LiveApp, Assembly), ExitCode> {
    let app = registry
        .build(&args.common.app, &settings_of(&args.common))
        .map_err(fail)?;
    let mut config = live_config(&args.common)?;
    let Some(wait) = args.wait else {
        let client = LiveClient::new(config).map_err(client_error)?;
        let assembly = assemble_on(&client, &app.app).await.map_err(refuse)?;
        return Ok((client, app, assembly));
    };
    config.timeout = config.timeout.max(wait);
    let mut said = false;
    loop {
        let attempt = match LiveClient::new(config.clone()) {
            Ok(client) => match assemble_on(&client, &app.app).await {
                Ok(assembly) => return Ok((client, app, assembly)),
                Err(error) => error,
            },
            Err(error) => RuntimeError::from(error),
        };
        let retriable = attempt.is_unreachable() || attempt.retriable_code().is_some();
        let waited = started.elapsed();
        if !retriable {
            return Err(refuse(attempt));
        }
        if waited + WAIT_PAUSE > wait {
            eprintln!(
                "error: {attempt}\nwaited {:.1} s of --wait {:.1} s for the cluster; no record was appended",
                waited.as_secs_f64(),
                wait.as_secs_f64()
            );
            return Err(ExitCode::from(refused_code(&attempt)));
        }
        if !said {
            said = true;
            tracing::info!(error = %attempt, wait_s = wait.as_secs_f64(),
                "the cluster cannot be used yet: retrying every second for up to --wait");
        }
        tokio::time::sleep(WAIT_PAUSE).await;
    }
}

/// The authorizer's refusal inside a producer's error, if it is one: the
/// registered producer's error is the user's, so its chain of sources is
/// searched for the runtime's error.
fn denied_in(error: &(dyn std::error::Error + 'static)) -> Option<crate::error::Denied> {
    let mut cause = Some(error);
    while let Some(found) = cause {
        if let Some(live) = found.downcast_ref::<LiveError>() {
            if let Some(denied) = live.denied() {
                return Some(denied);
            }
        }
        if let Some(runtime) = found.downcast_ref::<RuntimeError>() {
            if let Some(denied) = live_error_of(runtime).and_then(LiveError::denied) {
                return Some(denied);
            }
        }
        cause = found.source();
    }
    None
}
