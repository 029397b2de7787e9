//! Transaction state errors (fencing itself is in the table,
//! `fidelity/cases.rs`).

use super::fixtures::*;
use crate::model::*;

/// Model only: librdkafka checks a transaction's state in the client, with
/// errors of its own, and cannot be handed another cluster's producer.
///
/// The coordinator's bookkeeping errors: a second `begin`, ending or sending
/// without a transaction, and a handle this cluster never issued.
#[test]
fn transaction_state_errors() {
    let mut c = cluster();
    let t = tp("in", 0);
    let p = c.init_producer("p", 0);
    assert_eq!(
        c.commit(p).unwrap_err(),
        ModelError::NoOpenTransaction {
            transactional_id: "p".into()
        }
    );
    assert!(matches!(
        c.send(p, &t, rec("x")),
        Err(ModelError::NoOpenTransaction { .. })
    ));
    assert!(matches!(
        c.abort(p),
        Err(ModelError::NoOpenTransaction { .. })
    ));
    c.begin(p, 0).unwrap();
    assert_eq!(
        c.begin(p, 0).unwrap_err(),
        ModelError::TransactionAlreadyOpen {
            transactional_id: "p".into()
        }
    );
    let stranger = ProducerId { id: 99, epoch: 0 };
    assert_eq!(
        c.begin(stranger, 0).unwrap_err(),
        ModelError::UnknownProducer
    );
    // A failed send leaves the transaction and the logs as they were.
    assert!(matches!(
        c.send(p, &tp("nope", 0), rec("x")),
        Err(ModelError::UnknownTopic { .. })
    ));
    assert_eq!(c.high_watermark(&t).unwrap(), 0);
    c.commit(p).unwrap();
    assert!(c.entries(&t).unwrap().is_empty());
}
