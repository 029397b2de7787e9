//! Interactive queries: a stateful stage's committed state, read by key
//! from outside the application (Kafka Streams' IQv2).
//!
//! A key names one slot of one task: the key's bytes (its text read by
//! the stage's key codec, [`key_bytes`]) hash to the partition Kafka's
//! default partitioner gives it (`partition_for`), and the stage's task of
//! that partition holds the slot. The instance that owns the task answers
//! from the task's local store, which holds committed state only (the
//! runtime applies a transaction's changelog records to it once the
//! transaction has committed), so no answer shows an open transaction's
//! changes. Any other instance answers [`QueryError::NotOwner`], naming
//! the owner and where it answers (its endpoint, from the task reports the
//! instances commit to their group): the HTTP endpoint turns that into a
//! redirect, as Kafka Streams' `queryMetadataForKey` hands back the
//! owner's host for the caller to ask.

mod http;
mod key;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use bytes::Bytes;
use parsley::App;
use parsley::Assembly;
use parsley::Codec;
use parsley::TaskId;

use crate::client::LiveClient;
use crate::instance::TaskState;
use crate::runtime::figures::Figures;

pub use http::{http_get, percent_decode, percent_encode, HttpAnswer};
pub use key::{base64, key_bytes, BASE64_PREFIX};

/// What a query found: the slot's committed value, if it holds one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryAnswer {
    /// The stage queried.
    pub stage: String,
    /// The task holding the key's slot.
    pub task: TaskId,
    /// The instance that answered (its `instance_name`).
    pub instance: String,
    /// The key's bytes.
    pub key: Bytes,
    /// The slot's committed state, as the stage's state codec wrote it;
    /// `None` when the slot holds none (an unseen key, or one deleted),
    /// which the stage reads as its initial state.
    pub value: Option<Bytes>,
}

impl QueryAnswer {
    /// The committed state decoded with `codec` (the stage's state codec).
    pub fn decode<S>(&self, codec: &impl Codec<S>) -> Result<Option<S>, parsley::CodecError> {
        self.value
            .as_ref()
            .map(|value| codec.decode(value))
            .transpose()
    }

    /// The answer as the HTTP endpoint writes it:
    /// `{"stage","task","partition","instance","key_base64","found","encoding","value"}`,
    /// `value` the state itself when its bytes are JSON (the `Json`
    /// codec's), else its bytes in base64, with `encoding` `json` or
    /// `base64` saying which; `null` both when the slot holds none.
    pub fn to_json(&self) -> serde_json::Value {
        let (encoding, value) = match &self.value {
            None => (serde_json::Value::Null, serde_json::Value::Null),
            Some(bytes) => match serde_json::from_slice::<serde_json::Value>(bytes) {
                Ok(json) => ("json".into(), json),
                Err(_) => ("base64".into(), base64(bytes).into()),
            },
        };
        serde_json::json!({
            "stage": self.stage,
            "task": self.task.to_string(),
            "partition": self.task.partition,
            "instance": self.instance,
            "key_base64": base64(&self.key),
            "found": self.value.is_some(),
            "encoding": encoding,
            "value": value,
        })
    }

    /// The answer read back from [`QueryAnswer::to_json`]'s form.
    pub fn from_json(json: &serde_json::Value) -> Option<QueryAnswer> {
        use base64::Engine as _;
        let text = |name: &str| json.get(name)?.as_str().map(str::to_owned);
        let decode = |text: &str| {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .ok()
                .map(Bytes::from)
        };
        let stage = text("stage")?;
        let partition = u32::try_from(json.get("partition")?.as_u64()?).ok()?;
        let value = match (text("encoding").as_deref(), json.get("value")?) {
            (None, serde_json::Value::Null) => None,
            (Some("json"), value) => Some(Bytes::from(serde_json::to_vec(value).ok()?)),
            (Some("base64"), value) => Some(decode(value.as_str()?)?),
            _ => return None,
        };
        Some(QueryAnswer {
            task: TaskId {
                stage: Arc::from(stage.as_str()),
                partition,
            },
            stage,
            instance: text("instance")?,
            key: decode(&text("key_base64")?)?,
            value,
        })
    }
}

/// Why a query has no answer here. Each names the stage or task, and the
/// HTTP endpoint answers it with [`QueryError::status`] and a JSON body
/// whose `error` is [`QueryError::kind`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// The application has no stage of that name.
    #[error("unknown stage `{stage}`: the application's stages are {known:?}")]
    UnknownStage {
        /// The stage asked for.
        stage: String,
        /// The application's stages.
        known: Vec<String>,
    },
    /// The stage declares no state: there is nothing to read.
    #[error("stage `{stage}` is stateless: it declares no state to query")]
    StatelessStage {
        /// The stage.
        stage: String,
    },
    /// The stage's key codec has no text form Parsley knows.
    #[error("stage `{stage}`'s key codec has no text form here ({codecs}): give the key's bytes as `base64:<bytes>`{}", if *raw { " (its keys are raw bytes)" } else { "" })]
    UnknownKeyCodec {
        /// The stage.
        stage: String,
        /// Its sources' codecs.
        codecs: String,
        /// Whether its keys are raw bytes (`RawBytes`).
        raw: bool,
    },
    /// The key's text is not one the stage's key codec reads.
    #[error("key {key:?} of stage `{stage}` {why}")]
    BadKey {
        /// The stage.
        stage: String,
        /// The key's text.
        key: String,
        /// What is wrong with it.
        why: String,
    },
    /// The owner is restoring the task's state (or restarting it): its
    /// store is not served until the restore ends.
    #[error("task {task} is {state} on this instance ({remaining} changelog records still to restore): ask again once it runs")]
    Restoring {
        /// The task.
        task: TaskId,
        /// Its state here: restoring or retrying.
        state: TaskState,
        /// Changelog offsets still to restore, as last counted.
        remaining: u64,
    },
    /// The task is between owners: the group assigns it to no instance, or
    /// to one that has not reported it yet, or its run here is ending.
    #[error("task {task} is moving: {why}; ask again shortly")]
    Moving {
        /// The task.
        task: TaskId,
        /// What was seen.
        why: String,
    },
    /// Another instance owns the task: ask it, at its endpoint.
    #[error("task {task} is owned by instance {instance}: ask it at {endpoint}")]
    NotOwner {
        /// The task.
        task: TaskId,
        /// The owning instance's name.
        instance: String,
        /// Where it answers queries (`host:port`).
        endpoint: String,
    },
    /// The owner answers no queries: it runs without endpoints.
    #[error("task {task} is owned by instance {instance}, which serves no queries (run it with --metrics ADDR)")]
    NoEndpoint {
        /// The task.
        task: TaskId,
        /// The owning instance's name.
        instance: String,
    },
    /// The owner runs the task with its state in memory only (its local
    /// store was held by another run of the task on the machine).
    #[error("task {task} runs without a local store on this instance (another run of the task holds it): its state cannot be queried until it restarts")]
    NoStore {
        /// The task.
        task: TaskId,
    },
    /// The local store failed as it was read.
    #[error("task {task}'s local store could not be read: {reason}")]
    Store {
        /// The task.
        task: TaskId,
        /// Why.
        reason: String,
    },
    /// The cluster did not say who owns the task.
    #[error("the owner of task {task} could not be read from the cluster: {reason}")]
    Cluster {
        /// The task.
        task: TaskId,
        /// Why.
        reason: String,
    },
}

impl QueryError {
    /// The error's name in the endpoint's JSON (`"error"`).
    pub fn kind(&self) -> &'static str {
        match self {
            QueryError::UnknownStage { .. } => "unknown_stage",
            QueryError::StatelessStage { .. } => "stateless_stage",
            QueryError::UnknownKeyCodec { .. } => "unknown_key_codec",
            QueryError::BadKey { .. } => "bad_key",
            QueryError::Restoring { .. } => "restoring",
            QueryError::Moving { .. } => "moving",
            QueryError::NotOwner { .. } => "not_owner",
            QueryError::NoEndpoint { .. } => "no_endpoint",
            QueryError::NoStore { .. } => "no_store",
            QueryError::Store { .. } => "store",
            QueryError::Cluster { .. } => "cluster",
        }
    }

    /// The HTTP status the endpoint answers it with: 404 for an unknown
    /// stage; 400 for a stateless stage or a key it cannot read; 307 (a
    /// redirect to the owner) for another owner's task; 503 for a task
    /// restoring, moving or without a store (ask again); 502 when the
    /// owner or the cluster cannot say; 500 for a failed store.
    pub fn status(&self) -> u16 {
        match self {
            QueryError::UnknownStage { .. } => 404,
            QueryError::StatelessStage { .. }
            | QueryError::UnknownKeyCodec { .. }
            | QueryError::BadKey { .. } => 400,
            QueryError::NotOwner { .. } => 307,
            QueryError::Restoring { .. }
            | QueryError::Moving { .. }
            | QueryError::NoStore { .. } => 503,
            QueryError::NoEndpoint { .. } | QueryError::Cluster { .. } => 502,
            QueryError::Store { .. } => 500,
        }
    }

    /// The endpoint's body: `{"error": kind, "message": …}` with the
    /// task, and the owner's instance and endpoint for `not_owner`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut json = serde_json::json!({
            "error": self.kind(),
            "message": self.to_string(),
        });
        let task = match self {
            QueryError::Restoring { task, .. }
            | QueryError::Moving { task, .. }
            | QueryError::NotOwner { task, .. }
            | QueryError::NoEndpoint { task, .. }
            | QueryError::NoStore { task }
            | QueryError::Store { task, .. }
            | QueryError::Cluster { task, .. } => Some(task),
            _ => None,
        };
        if let Some(task) = task {
            json["task"] = task.to_string().into();
        }
        if let QueryError::NotOwner {
            instance, endpoint, ..
        } = self
        {
            json["owner"] = serde_json::json!({ "instance": instance, "endpoint": endpoint });
        }
        if let QueryError::Restoring {
            state, remaining, ..
        } = self
        {
            json["state"] = state.as_str().into();
            json["remaining"] = (*remaining).into();
        }
        json
    }
}

/// The stage `stage` of `app` if it can be queried, and the task of
/// `assembly` whose slots hold `key` (the core's routing,
/// [`parsley::query_task`]).
pub fn task_of(
    app: &App,
    assembly: &Assembly,
    stage: &str,
    key: &[u8],
) -> Result<TaskId, QueryError> {
    Ok(parsley::query_task(app, assembly, stage, key)?)
}

/// The stage named `stage`, if it exists and is stateful
/// ([`parsley::queryable_stage`]).
pub fn queryable<'a>(app: &'a App, stage: &str) -> Result<&'a parsley::StagePlan, QueryError> {
    Ok(parsley::queryable_stage(app, stage)?)
}

impl From<parsley::QueryTargetError> for QueryError {
    fn from(error: parsley::QueryTargetError) -> QueryError {
        match error {
            parsley::QueryTargetError::UnknownStage { stage, known } => {
                QueryError::UnknownStage { stage, known }
            }
            parsley::QueryTargetError::StatelessStage { stage } => {
                QueryError::StatelessStage { stage }
            }
        }
    }
}

/// The instance the group assigns `task` to, and where it answers
/// queries, read from the cluster (the instances' group and the task
/// reports they commit to it).
pub async fn owner_of(
    client: &LiveClient,
    app: &App,
    assembly: &Assembly,
    task: &TaskId,
) -> Result<(String, String), QueryError> {
    let owners = crate::status::task_owners(client, app, assembly)
        .await
        .map_err(|error| QueryError::Cluster {
            task: task.clone(),
            reason: error.to_string(),
        })?;
    let found = owners.into_iter().find(|owner| owner.task == *task);
    let moving = |why: &str| QueryError::Moving {
        task: task.clone(),
        why: why.to_owned(),
    };
    let Some(owner) = found.and_then(|found| Some((found.owner?, found.report))) else {
        return Err(moving(
            "no instance of the application's group owns it now (a rebalance, or no instance runs with group membership)",
        ));
    };
    let (member, report) = owner;
    match report {
        Some(report) if report.instance == member.instance => match report.endpoint {
            Some(endpoint) => Ok((member.instance, endpoint)),
            None => Err(QueryError::NoEndpoint {
                task: task.clone(),
                instance: member.instance,
            }),
        },
        _ => Err(moving(&format!(
            "the group assigns it to instance {}, which has not reported it yet",
            member.instance
        ))),
    }
}

/// Queries a running instance's tasks, usable from another thread or task
/// ([`Runtime::queries`](crate::Runtime::queries)); cheap to clone.
#[derive(Clone)]
pub struct Queries {
    app: Arc<App>,
    assembly: Arc<Assembly>,
    figures: Arc<Figures>,
    client: Arc<LiveClient>,
}

impl std::fmt::Debug for Queries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queries")
            .field("app", &self.app.id())
            .finish_non_exhaustive()
    }
}

impl Queries {
    pub(crate) fn new(
        app: Arc<App>,
        assembly: Arc<Assembly>,
        figures: Arc<Figures>,
        client: Arc<LiveClient>,
    ) -> Queries {
        Queries {
            app,
            assembly,
            figures,
            client,
        }
    }

    /// The committed state of `key`, given as text ([`key_bytes`]), in
    /// stage `stage`: answered here when this instance owns the key's
    /// task, [`QueryError::NotOwner`] naming the owner otherwise.
    pub async fn query(&self, stage: &str, key: &str) -> Result<QueryAnswer, QueryError> {
        let plan = queryable(&self.app, stage)?;
        let bytes = key_bytes(plan, key)?;
        self.query_bytes(stage, &bytes).await
    }

    /// [`Queries::query`] for a typed key, encoded with `codec` (the
    /// stage's sources' key codec).
    pub async fn query_key<K>(
        &self,
        stage: &str,
        codec: &impl Codec<K>,
        key: &K,
    ) -> Result<QueryAnswer, QueryError> {
        let bytes = codec.encode(key).map_err(|error| QueryError::BadKey {
            stage: stage.to_owned(),
            key: String::new(),
            why: format!("does not encode: {error}"),
        })?;
        self.query_bytes(stage, &bytes).await
    }

    /// [`Queries::query`] for a key given as its bytes.
    pub async fn query_bytes(&self, stage: &str, key: &[u8]) -> Result<QueryAnswer, QueryError> {
        let task = task_of(&self.app, &self.assembly, stage, key)?;
        match answer_here(&self.figures, &task, key) {
            Err(QueryError::NotOwner { .. }) => {
                let (instance, endpoint) =
                    owner_of(&self.client, &self.app, &self.assembly, &task).await?;
                if instance == crate::instance_name() {
                    // The group's view ran ahead of this instance's own.
                    return Err(QueryError::Moving {
                        task,
                        why: "the group assigns it here, and its run has yet to start".into(),
                    });
                }
                Err(QueryError::NotOwner {
                    task,
                    instance,
                    endpoint,
                })
            }
            answered => answered,
        }
    }
}

/// The answer of this instance's own store, or `NotOwner` (with no
/// owner named yet) when it does not own the task: where the task stands
/// here, judged by the core's rule (Q1, [`parsley::answer_query`]).
fn answer_here(figures: &Figures, task: &TaskId, key: &[u8]) -> Result<QueryAnswer, QueryError> {
    use parsley::{QueryRefusal, QueryStanding};
    let (owned, state) = figures.task_view(task);
    figures.with_store(task, |served| {
        let standing = match (owned, served, state) {
            (false, ..) => QueryStanding::NotOwned,
            (true, Some(Some(store)), _) => QueryStanding::Serving(store),
            (true, Some(None), _) => QueryStanding::NoStore,
            (true, None, Some((TaskState::Restoring | TaskState::Retrying, remaining))) => {
                QueryStanding::Restoring { remaining }
            }
            (true, None, Some(_)) => QueryStanding::Ended,
            (true, None, None) => QueryStanding::NotStarted,
        };
        let value = parsley::answer_query(standing, key).map_err(|refusal| match refusal {
            QueryRefusal::NotOwner => QueryError::NotOwner {
                task: task.clone(),
                instance: String::new(),
                endpoint: String::new(),
            },
            QueryRefusal::NotStarted => QueryError::Moving {
                task: task.clone(),
                why: "assigned to this instance, not started yet".into(),
            },
            QueryRefusal::Restoring { remaining } => QueryError::Restoring {
                task: task.clone(),
                state: state.map_or(TaskState::Restoring, |(state, _)| state),
                remaining,
            },
            QueryRefusal::Ended => QueryError::Moving {
                task: task.clone(),
                why: match state {
                    Some((state, _)) => format!("its run on this instance is {state}"),
                    None => "its run on this instance has ended".into(),
                },
            },
            QueryRefusal::NoStore => QueryError::NoStore { task: task.clone() },
            QueryRefusal::Store(error) => QueryError::Store {
                task: task.clone(),
                reason: error.to_string(),
            },
        })?;
        Ok(QueryAnswer {
            stage: task.stage.to_string(),
            task: task.clone(),
            instance: crate::instance_name().to_owned(),
            key: Bytes::copy_from_slice(key),
            value,
        })
    })
}
