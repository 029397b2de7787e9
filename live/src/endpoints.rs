//! An instance's HTTP endpoints for operators, on one address
//! (`parsley-live run --metrics ADDR`):
//!
//! | path | answers |
//! |---|---|
//! | `/metrics` | every figure, in the Prometheus text format, with `# HELP` |
//! | `/health` | 200 while the process is alive and not in `ERROR` (the body is its state), 503 with the failed tasks and why otherwise: a liveness probe |
//! | `/ready` | 200 while every owned task runs and none is stuck in a call, 503 naming each task that is not (restoring, retrying, stalled, …) or the state (`CREATED`, `REBALANCING`, `PENDING_SHUTDOWN`): a readiness probe |
//! | `/query/<stage>/<key>` | a stateful stage's committed state of one key, as JSON ([`crate::query`]): 200 from the owner of the key's task; a 307 redirect to the owner's endpoint from any other instance; 4xx and 5xx with a typed error (`{"error": …}`) otherwise |
//!
//! The key is one percent-encoded path segment: its text in the stage's
//! key codec's form, or `base64:` and its bytes
//! ([`key_bytes`](crate::query::key_bytes)).
//!
//! Any other path is 404. Commit latency is a histogram (buckets from 1 ms
//! to 30 s), so it aggregates across instances.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::instance::InstanceState;
use crate::query::{percent_decode, percent_encode, Queries, QueryError};
use crate::runtime::{Health, HealthError};

/// The commit latency's histogram buckets, in seconds.
const COMMIT_BUCKETS: [f64; 14] = [
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
];

/// Why the endpoints could not start.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// A figures recorder is installed in this process already.
    #[error("the figures' recorder cannot be installed: {0}")]
    Recorder(String),
    /// The address cannot be listened on.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// The running endpoints: attach the instance once it started, so `/health`
/// and `/ready` answer for it (before that, `/health` says `CREATED` and
/// `/ready` 503).
#[derive(Clone, Debug)]
pub struct Endpoints {
    address: SocketAddr,
    health: Arc<Mutex<Option<Health>>>,
    queries: Arc<Mutex<Option<Queries>>>,
}

impl Endpoints {
    /// The address listened on (the port chosen, when given port 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// From now on `/health` and `/ready` answer for `health`'s instance.
    pub fn attach(&self, health: Health) {
        *self.health.lock().unwrap_or_else(PoisonError::into_inner) = Some(health);
    }

    /// From now on `/query` answers for `queries`' instance (before that,
    /// 503 `moving`).
    pub fn attach_queries(&self, queries: Queries) {
        *self.queries.lock().unwrap_or_else(PoisonError::into_inner) = Some(queries);
    }
}

/// Installs the process's figures recorder (Prometheus, with the help text
/// of every figure) and serves `/metrics`, `/health` and `/ready` on
/// `address`, on the current tokio runtime. Once per process.
pub async fn serve(address: SocketAddr) -> Result<Endpoints, EndpointError> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("parsley_commit_seconds".into()),
            &COMMIT_BUCKETS,
        )
        .map_err(|error| EndpointError::Recorder(error.to_string()))?
        .install_recorder()
        .map_err(|error| EndpointError::Recorder(error.to_string()))?;
    describe();
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| EndpointError::Listen { address, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| EndpointError::Listen { address, source })?;
    let endpoints = Endpoints {
        address: bound,
        health: Arc::new(Mutex::new(None)),
        queries: Arc::new(Mutex::new(None)),
    };
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    let shared = endpoints.clone();
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!(error = %error, "the figures' endpoint could not accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let (handle, health, queries) = (
                handle.clone(),
                Arc::clone(&shared.health),
                Arc::clone(&shared.queries),
            );
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                    let path = request.uri().path().to_owned();
                    let answered = match path.strip_prefix(QUERY) {
                        Some(query) => {
                            let queries = queries
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .clone();
                            Err((query.to_owned(), queries))
                        }
                        None => Ok(answer(&path, &handle, &health)),
                    };
                    async move {
                        Ok::<_, Infallible>(match answered {
                            Ok(answer) => answer,
                            Err((query, queries)) => answer_query(&query, queries).await,
                        })
                    }
                });
                let served = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                if let Err(error) = served {
                    tracing::debug!(error = %error, "a figures' endpoint connection ended on an error");
                }
            });
        }
    });
    Ok(endpoints)
}

fn answer(
    path: &str,
    handle: &PrometheusHandle,
    health: &Mutex<Option<Health>>,
) -> Response<Full<Bytes>> {
    let health = health
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let (status, body) = match path {
        "/metrics" => (StatusCode::OK, handle.render()),
        "/health" => match health.map_or(Ok("CREATED".to_string()), |health| health.health()) {
            Ok(state) => (StatusCode::OK, format!("{state}\n")),
            Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
        },
        "/ready" => match health.map_or(
            Err(HealthError::NotReady {
                state: InstanceState::Created,
                not_ready: Vec::new(),
            }),
            |health| health.ready(),
        ) {
            Ok(state) => (StatusCode::OK, format!("{state}\n")),
            Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
        },
        _ => (
            StatusCode::NOT_FOUND,
            "not found: try /metrics, /health, /ready or /query/<stage>/<key>\n".to_string(),
        ),
    };
    let content_type = if path == "/metrics" {
        "text/plain; version=0.0.4"
    } else {
        "text/plain; charset=utf-8"
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = hyper::header::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}

/// Where queries are asked.
const QUERY: &str = "/query/";

/// `/query/<stage>/<key>`'s answer: the committed state as JSON, a
/// redirect to the owner, or a typed error.
async fn answer_query(path: &str, queries: Option<Queries>) -> Response<Full<Bytes>> {
    let (stage, key) = path.split_once('/').unwrap_or((path, ""));
    let (Some(stage), Some(key)) = (percent_decode(stage), percent_decode(key)) else {
        let body = serde_json::json!({
            "error": "bad_path",
            "message": format!("`/query/{path}` is not /query/<stage>/<key>, each percent-encoded UTF-8"),
        });
        return json_response(StatusCode::BAD_REQUEST, &body, None);
    };
    let Some(queries) = queries else {
        let body = serde_json::json!({
            "error": "moving",
            "message": "the instance has not started its tasks yet",
        });
        return json_response(StatusCode::SERVICE_UNAVAILABLE, &body, None);
    };
    match queries.query(&stage, &key).await {
        Ok(answer) => json_response(StatusCode::OK, &answer.to_json(), None),
        Err(error) => {
            let status =
                StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let location = match &error {
                QueryError::NotOwner { endpoint, .. } => Some(format!(
                    "http://{endpoint}{QUERY}{}/{}",
                    percent_encode(&stage),
                    percent_encode(&key)
                )),
                _ => None,
            };
            json_response(status, &error.to_json(), location)
        }
    }
}

fn json_response(
    status: StatusCode,
    body: &serde_json::Value,
    location: Option<String>,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(format!("{body}\n"))));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    if let Some(value) =
        location.and_then(|location| hyper::header::HeaderValue::from_str(&location).ok())
    {
        headers.insert(hyper::header::LOCATION, value);
    }
    response
}

/// The help text of every figure the runtime exports but the operators' own
/// counters, which each task describes as it starts (`Exported::new`).
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        "parsley_records_delivered_total",
        "Records the task's gate delivered to its stage's logic, over every run of the task in this process."
    );
    describe_counter!(
        "parsley_ticks_emitted_total",
        "Ticks (T1) the task emitted."
    );
    describe_counter!(
        "parsley_transactions_committed_total",
        "Transactions the task committed (X1)."
    );
    describe_counter!(
        "parsley_transactions_aborted_total",
        "Transactions the task aborted and rewound (X3)."
    );
    describe_counter!(
        "parsley_records_redelivered_total",
        "Records delivered again after an abort rewound the task (X3)."
    );
    describe_counter!(
        "parsley_records_dead_lettered_total",
        "Records the task wrote to its dead-letter topic instead of their effects (X5)."
    );
    describe_counter!(
        "parsley_task_restarts_total",
        "Restarts of the task after a transient failure, with a fresh producer, from its committed checkpoint."
    );
    describe_counter!(
        "parsley_rebalances_total",
        "Rebalances of the instances' group this instance took part in."
    );
    describe_gauge!(
        "parsley_records_held",
        "Records the task's causal gate holds until their causes are delivered (G2)."
    );
    describe_gauge!(
        "parsley_consumer_lag",
        "Committed records on the task's source tps beyond its stage group's committed position, read from the cluster (markers not counted up to 10,000 offsets)."
    );
    describe_gauge!(
        "parsley_consumer_lag_age_seconds",
        Unit::Seconds,
        "Seconds since parsley_consumer_lag was last read from the cluster: it grows while the cluster does not answer."
    );
    describe_gauge!(
        "parsley_instance_state",
        "1 for the instance's state (CREATED, REBALANCING, RUNNING, PENDING_SHUTDOWN, ERROR), 0 for the others."
    );
    describe_gauge!(
        "parsley_owned_tasks",
        "Tasks this instance owns now (its static share or its group assignment)."
    );
    describe_gauge!(
        "parsley_task_state",
        "1 for the task's state on this instance (restoring, running, retrying, fenced, failed, stopped), 0 for the others."
    );
    describe_gauge!(
        "parsley_seconds_since_last_commit",
        Unit::Seconds,
        "Seconds since the task's last commit on this instance."
    );
    describe_gauge!(
        "parsley_restore_remaining_records",
        "Changelog offsets the task has still to restore before it delivers (0 once restored)."
    );
    describe_histogram!(
        "parsley_commit_seconds",
        Unit::Seconds,
        "Wall time of one commit, from sending the offsets to the end of the transaction."
    );
    crate::stats::describe();
}
