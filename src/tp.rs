//! Topic names and topic-partitions (*tps*), the coordinates every claim names.

use std::borrow::Borrow;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// A topic's name. Cheap to clone: names are shared, since every claim in every
/// stamp carries one.
///
/// A topic Parsley derives for an operator (a re-key's repartition topic,
/// a foreign-key join's subscription and response topics) is named after
/// the application id, which a stage does not know when it is declared:
/// its name is made with the operator and filled in once, by the build of
/// the application its operator's stage goes into, for every clone at
/// once ([`TopicName::derivation`]). Until then it reads as its template,
/// `<application.id>-<name>-<role>`, which no Kafka topic can be named.
#[derive(Clone)]
pub struct TopicName(Repr);

#[derive(Clone)]
enum Repr {
    Fixed(Arc<str>),
    Derived(Arc<Derived>),
}

/// A derived topic's name: the operator it belongs to, and the name the
/// application's build gives it.
struct Derived {
    /// The operator's name (a re-key's, a foreign-key join's).
    owner: String,
    /// "repartition", "subscription" or "response".
    role: &'static str,
    /// `<application.id>-<owner>-<role>`, before the build.
    template: Arc<str>,
    /// The application it was built into, and its name there.
    bound: OnceLock<(String, Arc<str>)>,
}

/// A derived topic's name and where it stands: see [`TopicName::derivation`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedTopic {
    /// The operator's name (a re-key's, a foreign-key join's).
    pub owner: String,
    /// "repartition", "subscription" or "response".
    pub role: &'static str,
    /// The application its operator's stage was built into, if any.
    pub app: Option<String>,
}

impl TopicName {
    /// A topic name.
    pub fn new(name: impl AsRef<str>) -> Self {
        TopicName(Repr::Fixed(Arc::from(name.as_ref())))
    }

    /// The name of the topic Parsley derives in the role `role` for the
    /// operator `owner`: `<application.id>-<owner>-<role>` once the
    /// application is built.
    pub(crate) fn derived(owner: &str, role: &'static str) -> Self {
        TopicName(Repr::Derived(Arc::new(Derived {
            owner: owner.to_string(),
            role,
            template: Arc::from(format!("<application.id>-{owner}-{role}")),
            bound: OnceLock::new(),
        })))
    }

    /// The name as a string.
    #[inline]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Fixed(name) => name,
            Repr::Derived(derived) => derived
                .bound
                .get()
                .map_or(&derived.template, |(_, name)| name),
        }
    }

    /// For a topic Parsley derives for an operator: the operator, the
    /// role, and the application it has been built into (`None` before
    /// the build). `None` for a topic named by the user.
    pub fn derivation(&self) -> Option<DerivedTopic> {
        match &self.0 {
            Repr::Fixed(_) => None,
            Repr::Derived(derived) => Some(DerivedTopic {
                owner: derived.owner.clone(),
                role: derived.role,
                app: derived.bound.get().map(|(app, _)| app.clone()),
            }),
        }
    }

    /// Names a derived topic after application `app`, once: `Ok` when it
    /// is now (or already was) `app`'s, the other application's id when
    /// it was built into another one. A user's topic is left as it is.
    pub(crate) fn bind(&self, app: &str) -> Result<(), String> {
        let Repr::Derived(derived) = &self.0 else {
            return Ok(());
        };
        let (bound, _) = derived.bound.get_or_init(|| {
            let name = format!("{app}-{}-{}", derived.owner, derived.role);
            (app.to_string(), Arc::from(name))
        });
        if bound == app {
            Ok(())
        } else {
            Err(bound.clone())
        }
    }

    /// Whether both names share one allocation (equal names may not).
    #[inline]
    pub fn ptr_eq(&self, other: &TopicName) -> bool {
        match (&self.0, &other.0) {
            (Repr::Fixed(one), Repr::Fixed(other)) => Arc::ptr_eq(one, other),
            (Repr::Derived(one), Repr::Derived(other)) => Arc::ptr_eq(one, other),
            _ => false,
        }
    }

    /// Equality that first tries the pointer: names handed out by one
    /// application share their allocation, so the gate's hot path rarely
    /// compares bytes.
    #[inline]
    pub fn same(&self, other: &TopicName) -> bool {
        self.ptr_eq(other) || self.as_str() == other.as_str()
    }
}

impl PartialEq for TopicName {
    fn eq(&self, other: &Self) -> bool {
        self.same(other)
    }
}

impl Eq for TopicName {}

impl PartialOrd for TopicName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TopicName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for TopicName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for TopicName {
    fn from(name: &str) -> Self {
        TopicName::new(name)
    }
}

impl From<String> for TopicName {
    fn from(name: String) -> Self {
        TopicName(Repr::Fixed(Arc::from(name)))
    }
}

impl Borrow<str> for TopicName {
    fn borrow(&self) -> &str {
        self.as_str()
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
