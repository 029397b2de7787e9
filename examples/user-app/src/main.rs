//! The whole `main` of a user's production binary: the application in a
//! registry, and Parsley's operator commands over it (`setup`, `produce`,
//! `run`, `status`, `skip`, `audit`).

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parsley::{Codec, RecordData, Tp, Utf8, I64};
use parsley_live::cli::{LiveApp, ProduceRequest, Registry};
use parsley_user_app::{app, Topics, GAP_MS};

fn main() -> ExitCode {
    let registry = Registry::new().app("fraud-watch", |settings| {
        let gap = settings.millis("gap-ms", Duration::from_millis(GAP_MS as u64))?;
        let topics = Topics::new(&settings.namespace);
        let app = app(&settings.namespace, &topics, gap.as_millis() as i64)?;
        Ok(LiveApp::new(app).producer(move |request| Box::pin(produce(topics.clone(), request))))
    });
    parsley_live::cli::main(registry)
}

/// `produce`: clicks and, every fourth record, a payment, over `keys`
/// users; amounts from a small generator seeded by `seed`.
async fn produce(
    topics: Topics,
    request: ProduceRequest,
) -> Result<usize, parsley_live::cli::BoxError> {
    let producer = request.client.plain_producer()?;
    let mut state = request
        .seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1);
    for index in 0..request.count {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let user = format!("u{}", (state >> 33) as usize % request.keys.max(1));
        let (topic, value) = match index % 4 {
            3 => (&topics.payments, ((state >> 20) % 2_000) as i64),
            _ => (&topics.clicks, (index % 7) as i64),
        };
        let key = Codec::<String>::encode(&Utf8, &user)?;
        let partitions = request
            .assembly
            .partitions_of(topic.name().as_str())
            .unwrap_or(1);
        let partition = parsley::partition_for(Some(&key), partitions, 0);
        let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64;
        let record = RecordData {
            key: Some(key),
            value: Some(Codec::<i64>::encode(&I64, &value)?),
            headers: Vec::new(),
            timestamp: now,
        };
        producer
            .append(&Tp::new(topic.name().clone(), partition), &record)
            .await?;
    }
    Ok(request.count)
}
