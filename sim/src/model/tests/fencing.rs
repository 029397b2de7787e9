//! Fencing: a re-initialised transactional id, and transaction state errors.

use super::fixtures::*;
use crate::model::*;

/// Kafka (`testFencingOnCommit`, `testFencingOnSend`): once a new producer with
/// the same transactional id is initialised, every call of the old one fails
/// with a fencing error, its open transaction is aborted, and the new one
/// works.
#[test]
fn fenced_producer_fails_and_its_open_transaction_is_aborted() {
    let mut c = cluster();
    let t = tp("out", 0);
    let old = c.init_producer("task-0", 0);
    c.begin(old, 0).unwrap();
    c.send(old, &t, rec("zombie")).unwrap();
    c.send_offsets(old, "g", &[(tp("in", 0), CommittedOffset::new(7, ""))])
        .unwrap();

    let new = c.init_producer("task-0", 0);
    let fenced = ModelError::Fenced {
        transactional_id: "task-0".into(),
        epoch: 0,
        current_epoch: 1,
    };
    assert_eq!(c.commit(old).unwrap_err(), fenced);
    assert_eq!(c.send(old, &t, rec("more")).unwrap_err(), fenced);
    assert_eq!(c.abort(old).unwrap_err(), fenced);
    assert_eq!(c.begin(old, 0).unwrap_err(), fenced);
    assert_eq!(
        c.send_offsets(old, "g", &[(tp("in", 0), CommittedOffset::new(8, ""))])
            .unwrap_err(),
        fenced
    );

    assert_eq!(kinds(&c, &t), ["txn", "ABORT"]);
    assert_eq!(c.entry_status(&t, 0), Some(EntryStatus::Aborted));
    assert_eq!(c.committed("g", &tp("in", 0)), None);

    c.begin(new, 0).unwrap();
    assert_eq!(c.send(new, &t, rec("fresh")).unwrap(), 2);
    c.commit(new).unwrap();
    assert_eq!(committed_view(&c, &t), pairs(&[(2, "fresh")]));
    assert_eq!(c.producer("task-0"), Some(new));
}

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
