//! The whole `main` of the pipeline's production binary: the application
//! in a registry, and Parsley's operator commands over it (`setup`,
//! `produce`, `run`, `status`, `skip`, `audit`).

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parsley::{Codec, Json, RecordData, Topic, Tp, Utf8};
use parsley_live::cli::{LiveApp, ProduceRequest, Registry};
use parsley_shop_app::{app, Order, Profile, Topics};
use serde::Serialize;

fn main() -> ExitCode {
    let registry = Registry::new().app("shop", |settings| {
        let window = settings.millis("window-ms", Duration::from_secs(60))?;
        let grace = settings.millis("grace-ms", Duration::from_secs(5))?;
        let topics = Topics::new(&settings.namespace);
        let app = app(&settings.namespace, &topics, window, grace)?;
        Ok(LiveApp::new(app).producer(move |request| Box::pin(produce(topics.clone(), request))))
    });
    parsley_live::cli::main(registry)
}

/// `produce`: every fifth record a profile update for one of `keys`
/// customers, the others orders of theirs, ids unique to the seed; every
/// fourth order is sent twice, as a retrying producer would.
async fn produce(
    topics: Topics,
    request: ProduceRequest,
) -> Result<usize, parsley_live::cli::BoxError> {
    let producer = request.client.plain_producer()?;
    let mut state = request
        .seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1);
    let mut written = 0;
    for index in 0..request.count {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let customer = format!("c{}", (state >> 33) as usize % request.keys.max(1));
        if index % 5 == 4 {
            let profile = Profile {
                tier: format!("t{}", (state >> 20) % 3),
                discount: ((state >> 24) % 40) as i64,
            };
            append(&producer, &request, &topics.profiles, &customer, &profile).await?;
            written += 1;
            continue;
        }
        let order = Order {
            id: format!("o{}-{index}", request.seed),
            customer,
            product: format!("p{}", (state >> 28) % 3),
            cents: 100 + ((state >> 12) % 10_000) as i64,
        };
        let copies = if index % 4 == 0 { 2 } else { 1 };
        for _ in 0..copies {
            append(&producer, &request, &topics.orders, &order.id, &order).await?;
            written += 1;
        }
    }
    Ok(written)
}

async fn append<V: Serialize + serde::de::DeserializeOwned + 'static>(
    producer: &parsley_live::PlainProducer,
    request: &ProduceRequest,
    topic: &Topic<String, V>,
    key: &str,
    value: &V,
) -> Result<(), parsley_live::cli::BoxError> {
    let key = Codec::<String>::encode(&Utf8, &key.to_string())?;
    let partitions = request
        .assembly
        .partitions_of(topic.name().as_str())
        .unwrap_or(1);
    let partition = parsley::partition_for(Some(&key), partitions, 0);
    let record = RecordData {
        key: Some(key),
        value: Some(Codec::<V>::encode(&Json, value)?),
        headers: Vec::new(),
        timestamp: SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64,
    };
    producer
        .append(&Tp::new(topic.name().clone(), partition), &record)
        .await?;
    Ok(())
}
