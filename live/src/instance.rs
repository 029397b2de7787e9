//! Who an instance is and what it says of itself and its tasks: its name
//! (carried in every client id it makes, so Kafka's own tools tell
//! processes apart), its state, and each owned task's state.
//!
//! With group membership an instance reports each task's state to the
//! cluster as the metadata of its group's committed offset for the task's
//! partition of `<app>.instances` (offset 0, metadata a [`TaskReport`] in
//! JSON), so `status` can say who runs what, and how, from outside.

use std::fmt;
use std::sync::OnceLock;

/// This process's name among the application's instances:
/// `<host>-<pid>`, the host from `HOSTNAME` or `/etc/hostname`.
pub fn instance_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| format!("{}-{}", host_name(), std::process::id()))
}

fn host_name() -> String {
    let named = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty());
    let name = named.unwrap_or_else(|| "localhost".into());
    // Client ids allow only [A-Za-z0-9._-] in some tools' output.
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// An instance's state, as Kafka Streams names a client's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InstanceState {
    /// Started, not yet given its tasks.
    Created,
    /// Its group is moving tasks, or one of its tasks is restoring or
    /// waiting for the cluster.
    Rebalancing,
    /// Every owned task runs.
    Running,
    /// Stopping: tasks commit what is pending and return.
    PendingShutdown,
    /// A task failed for real (the failure policy decides what follows).
    Error,
}

impl InstanceState {
    /// Every state, in the order of their gauge values.
    pub const ALL: [InstanceState; 5] = [
        InstanceState::Created,
        InstanceState::Rebalancing,
        InstanceState::Running,
        InstanceState::PendingShutdown,
        InstanceState::Error,
    ];

    /// `CREATED`, `REBALANCING`, `RUNNING`, `PENDING_SHUTDOWN` or `ERROR`.
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceState::Created => "CREATED",
            InstanceState::Rebalancing => "REBALANCING",
            InstanceState::Running => "RUNNING",
            InstanceState::PendingShutdown => "PENDING_SHUTDOWN",
            InstanceState::Error => "ERROR",
        }
    }
}

impl fmt::Display for InstanceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A task's state, as its owner reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskState {
    /// Starting: fencing the previous owner, reading its checkpoint and
    /// restoring its slots from the changelog.
    Restoring,
    /// Delivering and committing.
    Running,
    /// Waiting for the cluster: a transient failure, retried after a pause.
    Retrying,
    /// A newer owner's producer fenced it (X4).
    Fenced,
    /// Stopped on an error; not restarted by this instance.
    Failed,
    /// Released to another instance, or stopped gracefully.
    Stopped,
}

impl TaskState {
    /// `restoring`, `running`, `retrying`, `fenced`, `failed` or `stopped`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Restoring => "restoring",
            TaskState::Running => "running",
            TaskState::Retrying => "retrying",
            TaskState::Fenced => "fenced",
            TaskState::Failed => "failed",
            TaskState::Stopped => "stopped",
        }
    }

    /// Every state.
    pub const ALL: [TaskState; 6] = [
        TaskState::Restoring,
        TaskState::Running,
        TaskState::Retrying,
        TaskState::Fenced,
        TaskState::Failed,
        TaskState::Stopped,
    ];

    /// The state named `text`, as [`TaskState::as_str`] writes it.
    pub fn parse(text: &str) -> Option<TaskState> {
        TaskState::ALL
            .into_iter()
            .find(|state| state.as_str() == text)
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an owner says of one task: which instance, in what state, since
/// when (Unix milliseconds of the instance's clock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskReport {
    /// The reporting instance's [`instance_name`].
    pub instance: String,
    /// The task's state.
    pub state: TaskState,
    /// When it entered that state.
    pub since_ms: u64,
    /// Where the instance answers interactive queries (`host:port` of its
    /// endpoints, `run --metrics`), when it serves them.
    pub endpoint: Option<String>,
}

impl TaskReport {
    /// The report as committed-offset metadata:
    /// `{"instance":"…","state":"running","since_ms":…}`, with
    /// `"endpoint":"host:port"` when the instance serves queries.
    pub fn to_json(&self) -> String {
        let mut json = serde_json::json!({
            "instance": self.instance,
            "state": self.state.as_str(),
            "since_ms": self.since_ms,
        });
        if let Some(endpoint) = &self.endpoint {
            json["endpoint"] = serde_json::Value::from(endpoint.as_str());
        }
        json.to_string()
    }

    /// The report in `metadata`, or a message naming what is wrong with it.
    pub fn from_json(metadata: &str) -> Result<TaskReport, ReportError> {
        let value: serde_json::Value =
            serde_json::from_str(metadata).map_err(|source| ReportError::NotJson {
                metadata: metadata.to_owned(),
                source,
            })?;
        let field = |name: &'static str| {
            value.get(name).ok_or_else(|| ReportError::Missing {
                metadata: metadata.to_owned(),
                field: name,
            })
        };
        let malformed = |field: &'static str, wrong: &'static str| ReportError::Malformed {
            metadata: metadata.to_owned(),
            field,
            wrong,
        };
        let instance = field("instance")?
            .as_str()
            .ok_or_else(|| malformed("instance", "is not a string"))?
            .to_owned();
        let state = field("state")?
            .as_str()
            .and_then(TaskState::parse)
            .ok_or_else(|| malformed("state", "is no task state"))?;
        let since_ms = field("since_ms")?
            .as_u64()
            .ok_or_else(|| malformed("since_ms", "is not a number"))?;
        // Absent from the reports of instances that serve no queries.
        let endpoint = match value.get("endpoint") {
            None => None,
            Some(endpoint) => Some(
                endpoint
                    .as_str()
                    .ok_or_else(|| malformed("endpoint", "is not a string"))?
                    .to_owned(),
            ),
        };
        Ok(TaskReport {
            instance,
            state,
            since_ms,
            endpoint,
        })
    }
}

/// What is wrong with a task report read back ([`TaskReport::from_json`]).
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The metadata is not JSON.
    #[error("task report {metadata:?} is not JSON: {source}")]
    NotJson {
        /// The metadata read.
        metadata: String,
        /// serde_json's error.
        source: serde_json::Error,
    },
    /// A field is missing.
    #[error("task report {metadata:?} has no {field:?}")]
    Missing {
        /// The metadata read.
        metadata: String,
        /// The missing field.
        field: &'static str,
    },
    /// A field holds the wrong kind of value.
    #[error("task report {metadata:?}: {field:?} {wrong}")]
    Malformed {
        /// The metadata read.
        metadata: String,
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        wrong: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_report_reads_back_what_it_wrote_and_names_what_is_wrong() {
        let report = TaskReport {
            instance: "host-1-42".into(),
            state: TaskState::Restoring,
            since_ms: 1_700_000_000_000,
            endpoint: None,
        };
        assert_eq!(TaskReport::from_json(&report.to_json()).unwrap(), report);
        let serving = TaskReport {
            endpoint: Some("10.0.0.7:9464".into()),
            ..report.clone()
        };
        assert_eq!(TaskReport::from_json(&serving.to_json()).unwrap(), serving);
        let error =
            TaskReport::from_json(r#"{"instance":"a","state":"dozing","since_ms":1}"#).unwrap_err();
        assert!(
            error.to_string().contains("\"state\" is no task state"),
            "{error}"
        );
        assert!(TaskReport::from_json("")
            .unwrap_err()
            .to_string()
            .contains("not JSON"));
    }

    #[test]
    fn an_instance_name_is_host_and_process() {
        let name = instance_name();
        assert!(
            name.ends_with(&format!("-{}", std::process::id())),
            "{name}"
        );
        assert!(name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_'));
    }
}
