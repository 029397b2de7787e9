//! `status`: each task's owner, lag and state, from the cluster and the
//! instances' group.

use super::*;

pub(super) async fn status(registry: &Registry, args: StatusArgs) -> ExitCode {
    let (client, app, assembly) = match assembled(registry, &args.common).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let statuses = match task_status(&client, &app.app, &assembly).await {
        Ok(statuses) => statuses,
        Err(error) => return refuse(error),
    };
    // Who runs what is a second question: without an answer the positions
    // are still worth printing.
    let owners = match task_owners(&client, &app.app, &assembly).await {
        Ok(owners) => Some(owners),
        Err(error) => {
            eprintln!("warning: the owners of the tasks are unknown: {error}");
            None
        }
    };
    let owner_of = |task: &TaskStatus| {
        owners.as_ref().and_then(|owners| {
            owners.iter().find(|owner| {
                owner.task.stage.as_ref() == task.stage.as_str()
                    && owner.task.partition == task.partition
            })
        })
    };
    if args.json {
        let tasks: Vec<serde_json::Value> = statuses
            .iter()
            .map(|task| status_json(task, owners.is_some(), owner_of(task)))
            .collect();
        let document = serde_json::json!({ "app": app.app.id(), "tasks": tasks });
        println!("{document:#}");
        return ExitCode::SUCCESS;
    }
    println!(
        "{:<20} {:<36} {:>10} {:>10} {:>8}  {:<24} state",
        "task", "tp", "committed", "log end", "lag", "owner"
    );
    for task in &statuses {
        let owner = owner_of(task);
        let (owner_name, state) = match (owners.is_some(), owner) {
            (false, _) => ("?", "unknown"),
            (true, Some(owner)) => (owner.owner_name(), owner.state()),
            (true, None) => ("-", "unowned"),
        };
        for tp in &task.tps {
            let committed = tp
                .committed
                .map_or("-".to_string(), |offset| offset.to_string());
            let lag = if tp.exact {
                tp.lag.to_string()
            } else {
                format!("~{}", tp.lag)
            };
            println!(
                "{:<20} {:<36} {:>10} {:>10} {:>8}  {:<24} {}, {}",
                format!("{}/{}", task.stage, task.partition),
                tp.tp.to_string(),
                committed,
                tp.stable_end,
                lag,
                owner_name,
                state,
                task.state()
            );
        }
    }
    ExitCode::SUCCESS
}

/// One task of `status --json`: `known` is false when the group could not
/// be read (owner `?`, state `unknown`).
fn status_json(task: &TaskStatus, known: bool, owner: Option<&TaskOwner>) -> serde_json::Value {
    let (name, state) = match (known, owner) {
        (false, _) => ("?", "unknown"),
        (true, Some(owner)) => (owner.owner_name(), owner.state()),
        (true, None) => ("-", "unowned"),
    };
    let member = owner.and_then(|owner| owner.owner.as_ref());
    serde_json::json!({
        "task": format!("{}/{}", task.stage, task.partition),
        "stage": task.stage,
        "partition": task.partition,
        "owner": name,
        "owner_client_id": member.map(|member| member.client_id.clone()),
        "owner_host": member.map(|member| member.client_host.clone()),
        "state": state,
        "reported_by": owner.and_then(|owner| owner.report.as_ref()).map(|report| report.instance.clone()),
        "since_ms": owner.and_then(|owner| owner.report.as_ref()).map(|report| report.since_ms),
        "lag": task.lag(),
        "caught_up": task.lag() == 0,
        "tps": task.tps.iter().map(|tp| serde_json::json!({
            "tp": tp.tp.to_string(),
            "topic": tp.tp.topic.as_str(),
            "partition": tp.tp.partition,
            "committed": tp.committed,
            "log_end": tp.stable_end,
            "lag": tp.lag,
            "exact": tp.exact,
        })).collect::<Vec<_>>(),
    })
}
