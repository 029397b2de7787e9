//! `skip`: an operator's skip of one record a task is stopped on, checked
//! against the cluster before anything is done.

use super::*;

pub(super) async fn skip(registry: &Registry, args: SkipArgs) -> ExitCode {
    let (client, app, assembly) = match assembled(registry, &args.common).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let tp = Tp::new(
        format!("{}{}", args.common.namespace, args.topic),
        args.partition,
    );
    let task = TaskId {
        stage: args.stage.into(),
        partition: args.partition,
    };
    // Everything that can refuse the skip is checked before the task
    // starts: its producer fences the instance that runs it (X4).
    if let Err(error) = check_skip(&client, &app.app, &assembly, &task, &tp, args.offset).await {
        return refuse(error);
    }
    let config = RuntimeConfig::new(client.config().clone());
    match skip_record(
        Arc::new(app.app),
        config,
        task.clone(),
        tp.clone(),
        args.offset,
    )
    .await
    {
        Ok(metrics) => {
            println!(
                "task {task}: {tp}@{} dead-lettered as skipped and committed ({} records delivered)",
                args.offset, metrics.records_delivered_total
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {}", super::said(&error, error.about_task(&task)));
            ExitCode::from(acted_code(&error))
        }
    }
}

/// The checks of an operator's skip that need no task: run before the
/// task starts, whose producer would fence the instance running it (X4).
/// The stage must exist and declare a dead-letter topic, its task
/// `task.partition` must consume `tp`, `offset` must be below the tp's log
/// end (high watermark) and not behind the stage's committed position on
/// it. Each refusal names the task, the tp and the offset; nothing is
/// touched.
async fn check_skip(
    client: &LiveClient,
    app: &App,
    assembly: &Assembly,
    task: &TaskId,
    tp: &Tp,
    offset: u64,
) -> Result<(), RuntimeError> {
    let Some(plan) = app.stage(&task.stage) else {
        return Err(RuntimeError::UnknownStage {
            app: app.id().to_owned(),
            stage: task.stage.to_string(),
            known: app
                .stages()
                .iter()
                .map(|plan| plan.name().to_owned())
                .collect(),
        });
    };
    if plan.dead_letter.is_none() {
        return Err(SkipError::NoDeadLetterTopic { task: task.clone() }.into());
    }
    if let Some(why) = not_consumed(plan, assembly, task, tp) {
        return Err(RuntimeError::SkipNotConsumed {
            task: task.clone(),
            tp: tp.clone(),
            why,
        });
    }
    let marks = client.watermarks(tp).await?;
    if offset >= marks.high_watermark {
        return Err(RuntimeError::SkipBeyondLogEnd {
            task: task.clone(),
            tp: tp.clone(),
            offset,
            log_end: marks.high_watermark,
        });
    }
    let committed = client
        .consumer(&plan.group, Isolation::ReadUncommitted)?
        .committed(std::slice::from_ref(tp))
        .await?;
    if let Some(Some(committed)) = committed.first() {
        if offset < committed.offset {
            return Err(SkipError::Behind {
                task: task.clone(),
                tp: tp.clone(),
                offset,
                next: committed.offset,
            }
            .into());
        }
    }
    Ok(())
}

/// Why `task` of `plan` does not consume `tp`, as an operator needs to
/// hear it: the stage's sources when the topic is none of them, the
/// topic's partition count when the partition is past it, the stage's task
/// count when the task is; `None` when it does consume it.
fn not_consumed(
    plan: &parsley::StagePlan,
    assembly: &Assembly,
    task: &TaskId,
    tp: &Tp,
) -> Option<String> {
    let sources = plan.consumed_topics();
    if !sources.contains(&tp.topic) {
        let names: Vec<&str> = sources.iter().map(|topic| topic.as_str()).collect();
        return Some(format!(
            "`{}` is not a source of stage {:?} (its sources: {})",
            tp.topic,
            plan.name(),
            names.join(", ")
        ));
    }
    let Some(partitions) = assembly.partitions_of(tp.topic.as_str()) else {
        return Some(format!("topic `{}` is not in the assembly", tp.topic));
    };
    if tp.partition >= partitions {
        return Some(format!(
            "topic `{}` has {partitions} partition{} ({}), no partition {}",
            tp.topic,
            if partitions == 1 { "" } else { "s" },
            if partitions == 1 {
                "partition 0".to_string()
            } else {
                format!("partitions 0..={}", partitions - 1)
            },
            tp.partition
        ));
    }
    let tasks = assembly.tasks_of(plan.name()).unwrap_or(0);
    if task.partition >= tasks {
        return Some(format!(
            "stage {:?} has {tasks} task(s), no task {}",
            plan.name(),
            task.partition
        ));
    }
    if tp.partition != task.partition {
        return Some(format!(
            "task {task} consumes partition {} of its sources, not {}",
            task.partition, tp.partition
        ));
    }
    None
}
