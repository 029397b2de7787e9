//! The whole `main` of the application's production binary: the
//! application in a registry, and Parsley's operator commands over it
//! (`setup`, `produce`, `run`, `status`, `skip`, `audit`); and `csv`, which
//! writes the generator's transfers for another engine to read the same
//! input.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use parsley::{Codec, Json, RecordData, Tp, Utf8};
use parsley_live::cli::{LiveApp, ProduceRequest, Registry};
use parsley_transfers::{app, to_csv, transfers, transfers_from, Topics, TransferValue, EPOCH};

const CSV_USAGE: &str = "usage: parsley-transfers csv [--seed SEED] [--count N] [--out FILE]\n\
    writes N transfers (default 100000) from SEED (default 1, the driver tests' input) as id,from,to,amount,timestamp_ms, one a line";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("csv") {
        return csv(&args[1..]);
    }
    let registry = Registry::new().app("transfers", |settings| {
        // `--set epoch-ms=0`: no consistent view.
        let epoch = settings.millis("epoch-ms", EPOCH)?;
        let epoch = (!epoch.is_zero()).then_some(epoch);
        let topics = Topics::new(&settings.namespace);
        let app = app(&settings.namespace, &topics, epoch)?;
        Ok(LiveApp::new(app).producer(move |request| Box::pin(produce(topics.clone(), request))))
    });
    parsley_live::cli::main(registry)
}

/// `csv`: the transfers the TestDriver tests pipe, for the Kafka Streams
/// comparison.
fn csv(args: &[String]) -> ExitCode {
    let (mut seed, mut count, mut out) = (1u64, 100_000usize, None);
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value = args.next();
        let parsed = match (flag.as_str(), value) {
            ("--seed", Some(value)) => value.parse().map(|value| seed = value).is_ok(),
            ("--count", Some(value)) => value.parse().map(|value| count = value).is_ok(),
            ("--out", Some(value)) => {
                out = Some(value.clone());
                true
            }
            _ => false,
        };
        if !parsed {
            eprintln!("{CSV_USAGE}");
            return ExitCode::from(2);
        }
    }
    let csv = to_csv(&transfers(seed, count));
    let written = match &out {
        Some(path) => std::fs::write(path, csv),
        None => std::io::Write::write_all(&mut std::io::stdout().lock(), csv.as_bytes()),
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("csv: {error}");
            ExitCode::from(1)
        }
    }
}

/// `produce`: `count` transfers between the ten accounts from `seed`
/// (`--keys` is not used), each at the wall clock less a lag of up to ten
/// seconds, ids unique to the seed.
async fn produce(
    topics: Topics,
    request: ProduceRequest,
) -> Result<usize, parsley_live::cli::BoxError> {
    let producer = request.client.plain_producer()?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64;
    let name = topics.transfers.name();
    let partitions = request.assembly.partitions_of(name.as_str()).unwrap_or(1);
    for transfer in transfers_from(request.seed, request.count, now) {
        let id = format!("s{}-{}", request.seed, transfer.id);
        let key = Codec::<String>::encode(&Utf8, &id)?;
        let partition = parsley::partition_for(Some(&key), partitions, 0);
        let record = RecordData {
            key: Some(key),
            value: Some(Codec::<TransferValue>::encode(&Json, &transfer.value())?),
            headers: Vec::new(),
            timestamp: transfer.timestamp_ms,
        };
        producer
            .append(&Tp::new(name.clone(), partition), &record)
            .await?;
    }
    Ok(request.count)
}
