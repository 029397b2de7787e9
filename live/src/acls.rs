//! The ACLs an application needs on a cluster whose authorizer denies
//! what no ACL allows (`allow.everyone.if.no.acl.found=false`), derived from
//! the application alone, without the cluster: `setup APP --print-acls
//! PRINCIPAL` prints them as `kafka-acls.sh` lines.
//!
//! What each command of the runner does on the cluster, and the ACL that
//! allows it (Kafka's `Read`, `Write` and `Create` each grant `Describe`):
//!
//! | who | request | ACL |
//! |---|---|---|
//! | `setup` | creates the application's topics | `Create` on each source and sink; on the derived topics by the prefix `<app>-` |
//! | `run` | fetches a stage's sources | `Read` on each source |
//! | `run` | writes a stage's sinks in its transactions | `Write` on each sink |
//! | `run` | restores, writes and reads back its changelog, tick, dead-letter and repartition topics | `Read` and `Write` on the prefix `<app>-` |
//! | `run` | commits each stage's positions in its transactions (X6), reads them at start | `Read` on each stage's group `<app>-<stage>` |
//! | `run` | initialises each task's transactional producer (X4) | `Write` on the transactional ids by the prefix `<app>-` |
//! | `run` | makes, joins and commits its reports to the instances' topic and group | `Create` and `Read` on topic `<app>.instances`, `Read` on group `<app>.instances` |
//! | `run` | reads the instances' group's members before joining and after each assignment | `Describe` on group `<app>.instances`, which its `Read` grants (the reading client has no group of its own) |
//! | `status`, `skip` | read the same groups and logs | covered by the above |
//! | `query` | reads the instances' topic's partition count, the group's members and their reports (its committed offsets) to find a key's owner, then asks it over HTTP | `Describe` on topic and group `<app>.instances`, which their `Read` grants |
//! | `audit` | reads every committed topic back | `Read` on each sink (the rest is covered); its reader carries the first stage's group id, never joined |
//!
//! Exactly-once needs nothing on the cluster itself: since Kafka 3.0
//! (KIP-679) an idempotent producer's id is authorized by `Write` on a
//! topic or on its transactional id, and `IdempotentWrite` on the cluster
//! is no longer needed.
//!
//! `produce`, which writes the application's inputs from outside it, is
//! not the application's: `setup APP --print-acls PRINCIPAL --producer`
//! prints what it needs ([`producer_acls`]), as `kafka-acls.sh --producer`
//! grants a producer's: `Write` on each input (a source no stage writes),
//! and `Describe` on the application's other topics, whose partition
//! counts it reads to assemble the application (C3).

use std::fmt;

use parsley::App;
use parsley::{Role, TopicContract};

use crate::error::{AclOperation, AclResource};
use crate::membership_topic;

/// How an ACL names its resource (`--resource-pattern-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pattern {
    /// Exactly the name.
    Literal,
    /// Every name starting with it.
    Prefixed,
}

/// One ACL an application needs: allow the principal `operation` on
/// `resource`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acl {
    /// The resource, or the prefix of its names.
    pub resource: AclResource,
    /// Literal or by prefix.
    pub pattern: Pattern,
    /// The operation allowed.
    pub operation: AclOperation,
    /// What needs it.
    pub why: String,
}

impl Acl {
    /// True when this ACL allows `operation` on `resource`, as Kafka's
    /// authorizer would judge it (an ACL's Read, Write or Create also
    /// grants Describe).
    pub fn allows(&self, resource: &AclResource, operation: AclOperation) -> bool {
        let operation_ok = self.operation == operation
            || (operation == AclOperation::Describe
                && matches!(
                    self.operation,
                    AclOperation::Read | AclOperation::Write | AclOperation::Create
                ));
        let name_ok = |mine: &str, theirs: &str| match self.pattern {
            Pattern::Literal => mine == theirs,
            Pattern::Prefixed => theirs.starts_with(mine),
        };
        operation_ok
            && match (&self.resource, resource) {
                (AclResource::Topic(mine), AclResource::Topic(theirs))
                | (AclResource::Group(mine), AclResource::Group(theirs))
                | (AclResource::TransactionalId(mine), AclResource::TransactionalId(theirs)) => {
                    name_ok(mine, theirs)
                }
                (AclResource::Cluster, AclResource::Cluster) => true,
                _ => false,
            }
    }

    /// The `kafka-acls.sh` arguments after `--add --allow-principal P`.
    pub fn arguments(&self) -> Vec<String> {
        let mut arguments = vec!["--operation".to_string(), self.operation.to_string()];
        match &self.resource {
            AclResource::Topic(name) => arguments.extend(["--topic".into(), name.clone()]),
            AclResource::OneOfTopics(names) => {
                for name in names {
                    arguments.extend(["--topic".into(), name.clone()]);
                }
            }
            AclResource::Group(name) => arguments.extend(["--group".into(), name.clone()]),
            AclResource::TransactionalId(name) => {
                arguments.extend(["--transactional-id".into(), name.clone()])
            }
            AclResource::Cluster => arguments.push("--cluster".into()),
        }
        if self.pattern == Pattern::Prefixed {
            arguments.extend(["--resource-pattern-type".into(), "prefixed".into()]);
        }
        arguments
    }

    /// The `kafka-acls.sh` line that adds this ACL for `principal` on the
    /// cluster at `bootstrap`.
    pub fn command(&self, principal: &str, bootstrap: &str) -> String {
        let mut line = format!(
            "kafka-acls.sh --bootstrap-server {bootstrap} --add --allow-principal {principal}"
        );
        for argument in self.arguments() {
            line.push(' ');
            line.push_str(&argument);
        }
        line
    }
}

impl fmt::Display for Acl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pattern = match self.pattern {
            Pattern::Literal => "",
            Pattern::Prefixed => " (by prefix)",
        };
        write!(f, "{} on {}{pattern}", self.operation, self.resource)
    }
}

/// `User:NAME` for a bare `NAME`; a principal with its type is kept.
pub fn principal(text: &str) -> String {
    if text.contains(':') {
        text.to_string()
    } else {
        format!("User:{text}")
    }
}

/// The ACLs `app` needs, each once, in the order of the [module
/// docs](self)' table: no ACL another one printed covers.
pub fn application_acls(app: &App) -> Vec<Acl> {
    use AclOperation::{Create, Read, Write};
    let derived_prefix = format!("{}-", app.id());
    let mut wanted: Vec<Acl> = Vec::new();
    let mut add = |resource: AclResource, pattern: Pattern, operation, why: String| {
        let covered = pattern == Pattern::Literal
            && wanted.iter().any(|acl| {
                acl.pattern == Pattern::Prefixed
                    && acl.operation == operation
                    && acl.allows(&resource, operation)
            });
        let twice = wanted.iter().any(|acl| {
            acl.resource == resource && acl.pattern == pattern && acl.operation == operation
        });
        if !covered && !twice {
            wanted.push(Acl {
                resource,
                pattern,
                operation,
                why,
            });
        }
    };
    let contracts = TopicContract::list(app);
    let derived = |roles: &[Role]| {
        roles.iter().all(|role| {
            matches!(
                role,
                Role::Ticks { .. }
                    | Role::Changelog { .. }
                    | Role::DeadLetter { .. }
                    | Role::Repartition { .. }
                    | Role::Subscription { .. }
                    | Role::Response { .. }
            )
        })
    };
    let any_derived = contracts.iter().any(|contract| {
        derived(&contract.roles) && contract.name.as_str().starts_with(&derived_prefix)
    });
    // The derived topics by their prefix, first, so the literal lines
    // below leave out what the prefix covers.
    if any_derived {
        let topic = AclResource::Topic(derived_prefix.clone());
        add(topic.clone(), Pattern::Prefixed, Create, "setup: create the derived topics (changelogs, ticks, dead letters, repartition topics)".into());
        add(
            topic.clone(),
            Pattern::Prefixed,
            Read,
            "run: restore and read back the derived topics".into(),
        );
        add(
            topic,
            Pattern::Prefixed,
            Write,
            "run: write the derived topics in the tasks' transactions".into(),
        );
    }
    for contract in &contracts {
        let name = contract.name.as_str();
        let topic = AclResource::Topic(name.to_owned());
        add(
            topic.clone(),
            Pattern::Literal,
            Create,
            format!("setup: create {name}"),
        );
        for role in &contract.roles {
            match role {
                Role::Source { stage } => add(
                    topic.clone(),
                    Pattern::Literal,
                    Read,
                    format!("run: stage {stage} reads {name}"),
                ),
                Role::Sink { stage } => {
                    add(
                        topic.clone(),
                        Pattern::Literal,
                        Write,
                        format!("run: stage {stage} writes {name}"),
                    );
                    add(
                        topic.clone(),
                        Pattern::Literal,
                        Read,
                        format!("audit: read {name} back"),
                    );
                }
                _ => {
                    add(
                        topic.clone(),
                        Pattern::Literal,
                        Read,
                        format!("run: {role} {name}"),
                    );
                    add(
                        topic.clone(),
                        Pattern::Literal,
                        Write,
                        format!("run: {role} {name}"),
                    );
                }
            }
        }
    }
    for plan in app.stages() {
        add(
            AclResource::Group(plan.group.clone()),
            Pattern::Literal,
            Read,
            format!(
                "run: stage {}'s tasks commit their positions in group {} (X6)",
                plan.name(),
                plan.group
            ),
        );
    }
    add(
        AclResource::TransactionalId(derived_prefix),
        Pattern::Prefixed,
        Write,
        "run: each task's transactional producer, <app>-<stage>-<partition> (X4)".into(),
    );
    let instances = membership_topic(app.id());
    add(
        AclResource::Topic(instances.clone()),
        Pattern::Literal,
        Create,
        "run: create the instances' topic".into(),
    );
    add(
        AclResource::Topic(instances.clone()),
        Pattern::Literal,
        Read,
        "run: the instances' group membership".into(),
    );
    add(
        AclResource::Group(instances),
        Pattern::Literal,
        Read,
        "run: join the instances' group and commit its reports".into(),
    );
    wanted
}

/// The ACLs `produce` needs to write `app`'s inputs: `Write` on each
/// source no stage writes (its idempotent producer's id comes with it,
/// KIP-679), and `Describe` on every other topic of the application
/// (the derived ones by the prefix `<app>-`), whose partition counts it
/// reads to assemble the application (C3).
pub fn producer_acls(app: &App) -> Vec<Acl> {
    let derived_prefix = format!("{}-", app.id());
    let contracts = TopicContract::list(app);
    let mut acls: Vec<Acl> = Vec::new();
    let mut derived_seen = false;
    for contract in &contracts {
        let name = contract.name.as_str();
        let read = contract
            .roles
            .iter()
            .any(|role| matches!(role, Role::Source { .. }));
        let written = contract
            .roles
            .iter()
            .any(|role| !matches!(role, Role::Source { .. }));
        if read && !written {
            acls.push(Acl {
                resource: AclResource::Topic(name.to_owned()),
                pattern: Pattern::Literal,
                operation: AclOperation::Write,
                why: format!("produce: write the input {name}"),
            });
        } else if name.starts_with(&derived_prefix) {
            derived_seen = true;
        } else {
            acls.push(Acl {
                resource: AclResource::Topic(name.to_owned()),
                pattern: Pattern::Literal,
                operation: AclOperation::Describe,
                why: format!("produce: read the partition count of {name} (C3)"),
            });
        }
    }
    if derived_seen {
        acls.push(Acl {
            resource: AclResource::Topic(derived_prefix),
            pattern: Pattern::Prefixed,
            operation: AclOperation::Describe,
            why: "produce: read the partition counts of the derived topics (C3)".into(),
        });
    }
    acls
}

/// The text `setup APP --print-acls PRINCIPAL --producer` prints: what
/// `produce` needs, as [`print()`] prints the application's.
pub fn print_producer(app: &App, principal: &str, bootstrap: &str) -> String {
    let acls = producer_acls(app);
    let mut text = format!(
        "# The {} ACLs `produce {}` needs for principal {principal}, nothing more\n\
         # (the application's own ACLs, without --producer, do not include them).\n\
         # Add your admin client's --command-config to each line on a secured cluster.\n",
        acls.len(),
        app.id()
    );
    for acl in &acls {
        text.push_str(&format!(
            "# {}\n{}\n",
            acl.why,
            acl.command(principal, bootstrap)
        ));
    }
    text
}

/// The text `setup APP --print-acls PRINCIPAL` prints: a comment naming
/// the application and principal, then each ACL's `kafka-acls.sh` line
/// after a comment saying what needs it.
pub fn print(app: &App, principal: &str, bootstrap: &str) -> String {
    let acls = application_acls(app);
    let mut text = format!(
        "# The {} ACLs application `{}` needs for principal {principal}, nothing more:\n\
         # for setup, run, status, skip, audit and query; `produce` needs its own (--producer).\n\
         # Add your admin client's --command-config to each line on a secured cluster.\n",
        acls.len(),
        app.id()
    );
    for acl in &acls {
        text.push_str(&format!(
            "# {}\n{}\n",
            acl.why,
            acl.command(principal, bootstrap)
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use parsley::{Parsley, Stage, Topic};

    fn copy_app() -> App {
        let orders: Topic<String, i64> = Topic::new("orders");
        let copies: Topic<String, i64> = Topic::new("copies");
        let out = copies.clone();
        let copy = Stage::named("copy")
            .on(&orders, move |order| {
                vec![out.send(order.key().cloned(), *order.value())]
            })
            .into(&copies)
            .build();
        Parsley::named("shop").stage(copy).build().unwrap()
    }

    /// A stateless stage: its source read, its sink written (and read back
    /// by audit), its group, its transactional ids by prefix and the
    /// instances' topic and group; nothing on the cluster, no derived
    /// prefix (it derives no topic).
    #[test]
    fn a_stateless_app_needs_its_topics_group_and_transactional_ids() {
        let lines: Vec<String> = application_acls(&copy_app())
            .iter()
            .map(|acl| acl.arguments().join(" "))
            .collect();
        assert_eq!(
            lines,
            [
                "--operation Create --topic copies",
                "--operation Write --topic copies",
                "--operation Read --topic copies",
                "--operation Create --topic orders",
                "--operation Read --topic orders",
                "--operation Read --group shop-copy",
                "--operation Write --transactional-id shop- --resource-pattern-type prefixed",
                "--operation Create --topic shop.instances",
                "--operation Read --topic shop.instances",
                "--operation Read --group shop.instances",
            ]
        );
        let text = print(&copy_app(), &principal("alice"), "127.0.0.1:9093");
        assert!(text.contains(
            "kafka-acls.sh --bootstrap-server 127.0.0.1:9093 --add --allow-principal User:alice --operation Read --topic orders\n"
        ), "{text}");
        assert!(!text.contains("--cluster"), "{text}");
    }

    /// `produce` writes the inputs and describes the other topics; the
    /// application's own list grants no write on an input.
    #[test]
    fn produce_needs_write_on_the_inputs_and_describe_on_the_rest() {
        let app = copy_app();
        let lines: Vec<String> = producer_acls(&app)
            .iter()
            .map(|acl| acl.arguments().join(" "))
            .collect();
        assert_eq!(
            lines,
            [
                "--operation Describe --topic copies",
                "--operation Write --topic orders",
            ]
        );
        assert!(!application_acls(&app)
            .iter()
            .any(|acl| acl.allows(&AclResource::Topic("orders".into()), AclOperation::Write)));
        let text = print_producer(&app, &principal("alice"), "b:1");
        assert!(
            text.contains("--allow-principal User:alice --operation Write --topic orders\n"),
            "{text}"
        );
        assert!(print(&app, "User:alice", "b:1").contains("--producer"));
    }

    #[test]
    fn an_acl_allows_what_kafka_would() {
        let acl = Acl {
            resource: AclResource::TransactionalId("shop-".into()),
            pattern: Pattern::Prefixed,
            operation: AclOperation::Write,
            why: String::new(),
        };
        assert!(acl.allows(
            &AclResource::TransactionalId("shop-copy-3".into()),
            AclOperation::Write
        ));
        assert!(acl.allows(
            &AclResource::TransactionalId("shop-copy-3".into()),
            AclOperation::Describe
        ));
        assert!(!acl.allows(
            &AclResource::TransactionalId("shopping-1".into()),
            AclOperation::Write
        ));
        assert!(!acl.allows(
            &AclResource::Topic("shop-copy-3".into()),
            AclOperation::Write
        ));
        assert_eq!(principal("User:bob"), "User:bob");
    }
}
