//! librdkafka's own statistics (`statistics.interval.ms`), as figures: what
//! the client library says of each of its handles and of each broker it
//! talks to. Labelled by `client` (the handle's name, e.g.
//! `rdkafka#producer-3`, unique within the process) and, per broker, by
//! `broker`.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rdkafka::Statistics;

/// How often librdkafka reports its statistics to a runtime client.
pub(crate) const INTERVAL: Duration = Duration::from_secs(5);

/// [`INTERVAL`] as librdkafka's `statistics.interval.ms` setting.
pub(crate) fn interval_ms() -> String {
    INTERVAL.as_millis().to_string()
}

/// Publishes one report of librdkafka's statistics.
pub(crate) fn publish(stats: &Statistics) {
    let client = [("client", stats.name.clone())];
    metrics::gauge!("rdkafka_replyq", &client).set(stats.replyq as f64);
    metrics::gauge!("rdkafka_msg_cnt", &client).set(stats.msg_cnt as f64);
    metrics::gauge!("rdkafka_msg_size_bytes", &client).set(stats.msg_size as f64);
    // librdkafka's totals of one handle: they only grow while it lives.
    metrics::counter!("rdkafka_tx_requests_total", &client).absolute(non_negative(stats.tx));
    metrics::counter!("rdkafka_tx_bytes_total", &client).absolute(non_negative(stats.tx_bytes));
    metrics::counter!("rdkafka_rx_responses_total", &client).absolute(non_negative(stats.rx));
    metrics::counter!("rdkafka_rx_bytes_total", &client).absolute(non_negative(stats.rx_bytes));
    metrics::counter!("rdkafka_txmsgs_total", &client).absolute(non_negative(stats.txmsgs));
    metrics::counter!("rdkafka_rxmsgs_total", &client).absolute(non_negative(stats.rxmsgs));
    if let Some(eos) = &stats.eos {
        metrics::gauge!("rdkafka_txn_state_age_seconds", &client)
            .set(eos.txn_stateage as f64 / 1e6);
    }
    if let Some(group) = &stats.cgrp {
        metrics::counter!("rdkafka_cgrp_rebalances_total", &client)
            .absolute(non_negative(group.rebalance_cnt));
        metrics::gauge!("rdkafka_cgrp_assignment_size", &client)
            .set(f64::from(group.assignment_size));
        log_rebalance(&stats.name, group);
    }
    for broker in stats.brokers.values() {
        // librdkafka's bootstrap pseudo-brokers have no node id.
        if broker.nodeid < 0 {
            continue;
        }
        let labels = [
            ("client", stats.name.clone()),
            ("broker", broker.nodename.clone()),
        ];
        metrics::gauge!("rdkafka_broker_up", &labels)
            .set(f64::from(u8::from(broker.state == "UP")));
        metrics::gauge!("rdkafka_broker_outbuf_cnt", &labels).set(broker.outbuf_cnt as f64);
        metrics::gauge!("rdkafka_broker_waitresp_cnt", &labels).set(broker.waitresp_cnt as f64);
        metrics::counter!("rdkafka_broker_req_timeouts_total", &labels)
            .absolute(broker.req_timeouts);
        if let Some(rtt) = &broker.rtt {
            metrics::gauge!("rdkafka_broker_rtt_avg_seconds", &labels).set(rtt.avg as f64 / 1e6);
            metrics::gauge!("rdkafka_broker_rtt_p99_seconds", &labels).set(rtt.p99 as f64 / 1e6);
        }
    }
}

/// Logs each rebalance librdkafka counted since the last report of
/// `client`, with its reason (what Kafka's group protocol gives no callback
/// for).
fn log_rebalance(client: &str, group: &rdkafka::statistics::ConsumerGroup) {
    static SEEN: Mutex<Vec<(String, i64)>> = Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    let count = match seen.iter_mut().find(|(name, _)| name == client) {
        Some((_, count)) => count,
        None => {
            seen.push((client.to_owned(), 0));
            &mut seen.last_mut().expect("pushed").1
        }
    };
    if group.rebalance_cnt > *count {
        *count = group.rebalance_cnt;
        tracing::info!(
            client,
            rebalances = group.rebalance_cnt,
            reason = %group.rebalance_reason,
            join_state = %group.join_state,
            assigned = group.assignment_size,
            "group rebalance seen by librdkafka"
        );
    }
}

fn non_negative(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// The help text of librdkafka's figures.
pub(crate) fn describe() {
    use metrics::{describe_counter, describe_gauge, Unit};
    describe_gauge!(
        "rdkafka_replyq",
        "librdkafka: operations (callbacks, events) waiting in the handle's queue."
    );
    describe_gauge!(
        "rdkafka_msg_cnt",
        "librdkafka: messages in the producer's queues, not yet delivered."
    );
    describe_gauge!(
        "rdkafka_msg_size_bytes",
        Unit::Bytes,
        "librdkafka: bytes of the messages in the producer's queues."
    );
    describe_counter!(
        "rdkafka_tx_requests_total",
        "librdkafka: requests the handle sent to brokers."
    );
    describe_counter!(
        "rdkafka_tx_bytes_total",
        Unit::Bytes,
        "librdkafka: bytes the handle sent to brokers."
    );
    describe_counter!(
        "rdkafka_rx_responses_total",
        "librdkafka: responses the handle received from brokers."
    );
    describe_counter!(
        "rdkafka_rx_bytes_total",
        Unit::Bytes,
        "librdkafka: bytes the handle received from brokers."
    );
    describe_counter!(
        "rdkafka_txmsgs_total",
        "librdkafka: messages the handle produced to brokers."
    );
    describe_counter!(
        "rdkafka_rxmsgs_total",
        "librdkafka: messages the handle consumed from brokers."
    );
    describe_gauge!(
        "rdkafka_txn_state_age_seconds",
        Unit::Seconds,
        "librdkafka: seconds the transactional producer has been in its current transaction state."
    );
    describe_counter!(
        "rdkafka_cgrp_rebalances_total",
        "librdkafka: rebalances of the instances' group this member went through."
    );
    describe_gauge!(
        "rdkafka_cgrp_assignment_size",
        "librdkafka: partitions of `<app>.instances` (tasks) assigned to this member."
    );
    describe_gauge!(
        "rdkafka_broker_up",
        "librdkafka: 1 while the handle's connection to the broker is up."
    );
    describe_gauge!(
        "rdkafka_broker_outbuf_cnt",
        "librdkafka: requests waiting to be sent to the broker."
    );
    describe_gauge!(
        "rdkafka_broker_waitresp_cnt",
        "librdkafka: requests sent to the broker and waiting for its response."
    );
    describe_counter!(
        "rdkafka_broker_req_timeouts_total",
        "librdkafka: requests to the broker that timed out."
    );
    describe_gauge!(
        "rdkafka_broker_rtt_avg_seconds",
        Unit::Seconds,
        "librdkafka: average round-trip time to the broker over the last statistics window."
    );
    describe_gauge!(
        "rdkafka_broker_rtt_p99_seconds",
        Unit::Seconds,
        "librdkafka: 99th percentile round-trip time to the broker over the last statistics window."
    );
}
