//! The opt-in dead-letter topic (X5): what a dead-lettered record looks like.
//!
//! A stage declared with [`StageBuilder::dead_letter_queue`] owns the derived
//! topic `<application.id>-<stage>-dlq` (one partition per task). When its
//! logic refuses a record (docs/RULES.md#x5), or the operator skips one
//! ([`crate::Task::skip`]), the task writes, in the delivery's transaction,
//! one record to its own partition of that topic *instead of* the logic's
//! effects: the original key and value bytes, the original record timestamp,
//! a stamp from the stamping site (G5: it claims the refused record and its
//! causes), and the headers below. The refused record counts as delivered —
//! its offset is passed and claims on it resolve — but no slot, no
//! emission and no changelog record comes of it.
//!
//! | header | value (UTF-8 text) |
//! |---|---|
//! | `parsley-stamp` | the dead letter's own stamp (G5) |
//! | [`ERROR`] `parsley.dlq.error` | the kind of refusal: `logic`, `codec`, `state-codec`, `bad-stamp` or `skipped` ([`DeadLetterKind`]) |
//! | [`MESSAGE`] `parsley.dlq.message` | the error as the task would have stopped with it |
//! | [`STAGE`] `parsley.dlq.stage` | the stage that refused it |
//! | [`TOPIC`] `parsley.dlq.topic` | the refused record's topic |
//! | [`PARTITION`] `parsley.dlq.partition` | its partition, in decimal |
//! | [`OFFSET`] `parsley.dlq.offset` | its offset, in decimal |
//! | [`STAMP`] `parsley.dlq.stamp` | the refused record's own `parsley-stamp` header, as it was (absent if it had none) |
//!
//! Any other header of the refused record is copied after these.
//!
//! [`StageBuilder::dead_letter_queue`]: crate::stage::StageBuilder::dead_letter_queue

use std::fmt;

use bytes::Bytes;

use crate::header::STAMP_HEADER;
use crate::record::{Header, RecordData};
use crate::tp::Tp;

/// `parsley.dlq.error`: the kind of refusal ([`DeadLetterKind::name`]).
pub const ERROR: &str = "parsley.dlq.error";
/// `parsley.dlq.message`: the error, in words.
pub const MESSAGE: &str = "parsley.dlq.message";
/// `parsley.dlq.stage`: the stage that dead-lettered the record.
pub const STAGE: &str = "parsley.dlq.stage";
/// `parsley.dlq.topic`: the refused record's topic.
pub const TOPIC: &str = "parsley.dlq.topic";
/// `parsley.dlq.partition`: the refused record's partition, in decimal.
pub const PARTITION: &str = "parsley.dlq.partition";
/// `parsley.dlq.offset`: the refused record's offset, in decimal.
pub const OFFSET: &str = "parsley.dlq.offset";
/// `parsley.dlq.stamp`: the refused record's own stamp header, byte for byte.
pub const STAMP: &str = "parsley.dlq.stamp";

/// `<application.id>-<stage>-dlq`: a stage's dead-letter topic (X5).
pub fn dead_letter_topic_name(app: &str, stage: &str) -> String {
    format!("{app}-{stage}-dlq")
}

/// Why a record was dead-lettered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeadLetterKind {
    /// The logic returned an error or panicked (X5).
    Logic,
    /// The source topic's codec refused the key or the value.
    Codec,
    /// The state codec refused the state the fold returned.
    StateCodec,
    /// The record's stamp header does not decode.
    BadStamp,
    /// The operator skipped it ([`crate::Task::skip`]).
    Skipped,
}

impl DeadLetterKind {
    /// Every kind.
    pub const ALL: [DeadLetterKind; 5] = [
        DeadLetterKind::Logic,
        DeadLetterKind::Codec,
        DeadLetterKind::StateCodec,
        DeadLetterKind::BadStamp,
        DeadLetterKind::Skipped,
    ];

    /// The value of the `parsley.dlq.error` header.
    pub fn name(self) -> &'static str {
        match self {
            DeadLetterKind::Logic => "logic",
            DeadLetterKind::Codec => "codec",
            DeadLetterKind::StateCodec => "state-codec",
            DeadLetterKind::BadStamp => "bad-stamp",
            DeadLetterKind::Skipped => "skipped",
        }
    }

    /// The kind named `name`.
    pub fn from_name(name: &str) -> Option<DeadLetterKind> {
        DeadLetterKind::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
    }
}

impl fmt::Display for DeadLetterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A dead-lettered record, read back from a dead-letter topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetter {
    /// Why it was dead-lettered.
    pub kind: DeadLetterKind,
    /// The error, in words.
    pub message: String,
    /// The stage that dead-lettered it.
    pub stage: String,
    /// Where the refused record was.
    pub tp: Tp,
    /// Its offset.
    pub offset: u64,
    /// Its key bytes, as they were.
    pub key: Option<Bytes>,
    /// Its value bytes, as they were.
    pub value: Option<Bytes>,
}

/// Why a record read from a dead-letter topic is not a dead letter.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a dead letter: header {header:?} {problem}")]
pub struct NotADeadLetter {
    /// The header at fault.
    pub header: &'static str,
    /// What is wrong with it.
    pub problem: &'static str,
}

impl DeadLetter {
    /// Reads the `parsley.dlq.*` headers of a dead-letter record.
    pub fn from_record(data: &RecordData) -> Result<DeadLetter, NotADeadLetter> {
        let text = |header: &'static str| -> Result<&str, NotADeadLetter> {
            let bytes = data.header(header).ok_or(NotADeadLetter {
                header,
                problem: "is missing",
            })?;
            std::str::from_utf8(bytes).map_err(|_| NotADeadLetter {
                header,
                problem: "is not UTF-8",
            })
        };
        let number = |header: &'static str| -> Result<u64, NotADeadLetter> {
            text(header)?.parse().map_err(|_| NotADeadLetter {
                header,
                problem: "is not a decimal number",
            })
        };
        let kind = DeadLetterKind::from_name(text(ERROR)?).ok_or(NotADeadLetter {
            header: ERROR,
            problem: "names no known kind",
        })?;
        let partition = u32::try_from(number(PARTITION)?).map_err(|_| NotADeadLetter {
            header: PARTITION,
            problem: "is out of range",
        })?;
        Ok(DeadLetter {
            kind,
            message: text(MESSAGE)?.to_string(),
            stage: text(STAGE)?.to_string(),
            tp: Tp::new(text(TOPIC)?, partition),
            offset: number(OFFSET)?,
            key: data.key.clone(),
            value: data.value.clone(),
        })
    }
}

/// The headers of a dead letter, the stamp header first.
pub(crate) fn headers(
    stamp: Header,
    kind: DeadLetterKind,
    message: &str,
    stage: &str,
    tp: &Tp,
    offset: u64,
    original: &[Header],
) -> Vec<Header> {
    let text = |name: &'static str, value: String| Header {
        name: name.into(),
        value: Bytes::from(value),
    };
    let mut headers = vec![
        stamp,
        text(ERROR, kind.name().to_string()),
        text(MESSAGE, message.to_string()),
        text(STAGE, stage.to_string()),
        text(TOPIC, tp.topic.to_string()),
        text(PARTITION, tp.partition.to_string()),
        text(OFFSET, offset.to_string()),
    ];
    for header in original {
        if header.name == STAMP_HEADER {
            headers.push(Header {
                name: STAMP.into(),
                value: header.value.clone(),
            });
        } else {
            headers.push(header.clone());
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    /// X5: the headers a dead letter carries read back as they were written.
    #[test]
    fn x5_dead_letter_headers_read_back() {
        let tp = Tp::new("orders", 3);
        let original = vec![
            Header {
                name: STAMP_HEADER.into(),
                value: Bytes::from_static(b"\x01garbage"),
            },
            Header {
                name: "trace-id".into(),
                value: Bytes::from_static(b"abc"),
            },
        ];
        let stamp = crate::header::stamp_header(&crate::Stamp::empty());
        let data = RecordData {
            key: Some(Bytes::from_static(b"k")),
            value: None,
            headers: headers(
                stamp,
                DeadLetterKind::Codec,
                "no",
                "ledger",
                &tp,
                17,
                &original,
            ),
            timestamp: 5,
        };
        let letter = DeadLetter::from_record(&data).unwrap();
        assert_eq!(letter.kind, DeadLetterKind::Codec);
        assert_eq!((letter.tp, letter.offset), (tp, 17));
        assert_eq!(letter.stage, "ledger");
        assert_eq!(
            data.header(STAMP).map(|bytes| &bytes[..]),
            Some(&b"\x01garbage"[..])
        );
        assert_eq!(data.header("trace-id").map(|b| &b[..]), Some(&b"abc"[..]));
        let missing = DeadLetter::from_record(&RecordData {
            key: None,
            value: None,
            headers: Vec::new(),
            timestamp: 0,
        })
        .unwrap_err();
        assert_eq!(missing.header, ERROR);
        for kind in DeadLetterKind::ALL {
            assert_eq!(DeadLetterKind::from_name(kind.name()), Some(kind));
        }
    }
}
