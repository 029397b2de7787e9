//! Topic names and topic-partitions (*tps*), the coordinates every claim names.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

/// A topic's name. Cheap to clone: names are shared, since every claim in every
/// stamp carries one.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicName(Arc<str>);

impl TopicName {
    /// A topic name.
    pub fn new(name: impl AsRef<str>) -> Self {
        TopicName(Arc::from(name.as_ref()))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether both names share one allocation (equal names may not).
    #[inline]
    pub fn ptr_eq(&self, other: &TopicName) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Equality that first tries the pointer: names handed out by one
    /// application share their allocation, so the gate's hot path rarely
    /// compares bytes.
    #[inline]
    pub fn same(&self, other: &TopicName) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl fmt::Debug for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for TopicName {
    fn from(name: &str) -> Self {
        TopicName::new(name)
    }
}

impl From<String> for TopicName {
    fn from(name: String) -> Self {
        TopicName(Arc::from(name))
    }
}

impl Borrow<str> for TopicName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// One partition of one topic.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tp {
    /// The topic.
    pub topic: TopicName,
    /// The partition within it.
    pub partition: u32,
}

impl Tp {
    /// The tp of `partition` of `topic`.
    pub fn new(topic: impl Into<TopicName>, partition: u32) -> Self {
        Tp {
            topic: topic.into(),
            partition,
        }
    }

    /// Whether `other` is the same tp (a cheap comparison for interned names).
    #[inline]
    pub fn same(&self, other: &Tp) -> bool {
        self.partition == other.partition && self.topic.same(&other.topic)
    }
}

impl fmt::Debug for Tp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

impl fmt::Display for Tp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}
