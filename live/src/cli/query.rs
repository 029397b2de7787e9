//! `query`: a stateful stage's committed state of one key, asked of the
//! instance that owns the key's task (found in the instances' group, where
//! each instance reports its tasks with the address of its endpoints).
//! Stdout gets one JSON document: the answer, or the typed error.

use super::*;
use crate::query::{http_get, key_bytes, owner_of, percent_encode, queryable, task_of};

/// How many redirects `query` follows: an owner that moved as it was asked
/// redirects once more.
const MAX_REDIRECTS: usize = 4;

pub(super) async fn query(registry: &Registry, args: QueryArgs) -> ExitCode {
    let (client, app, assembly) = match assembled(registry, &args.common).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let refused = |error: crate::query::QueryError| {
        println!("{}", error.to_json());
        eprintln!("error: {error}");
        ExitCode::from(EXIT_UNUSABLE)
    };
    let task = match queryable(&app.app, &args.stage)
        .and_then(|plan| key_bytes(plan, &args.key))
        .and_then(|bytes| task_of(&app.app, &assembly, &args.stage, &bytes))
    {
        Ok(task) => task,
        Err(error) => return refused(error),
    };
    let mut endpoint = match args.at {
        Some(at) => at,
        None => match owner_of(&client, &app.app, &assembly, &task).await {
            Ok((_, endpoint)) => endpoint,
            Err(error) => {
                println!("{}", error.to_json());
                eprintln!("error: {error}");
                return ExitCode::from(EXIT_FAILED);
            }
        },
    };
    let mut path = format!(
        "/query/{}/{}",
        percent_encode(&args.stage),
        percent_encode(&args.key)
    );
    let timeout = client.config().timeout;
    for _ in 0..=MAX_REDIRECTS {
        let (at, asked) = (endpoint.clone(), path.clone());
        let answered = tokio::task::spawn_blocking(move || http_get(&at, &asked, timeout)).await;
        let answer = match answered {
            Ok(Ok(answer)) => answer,
            Ok(Err(error)) => {
                eprintln!("error: the instance at {endpoint} did not answer {path}: {error}");
                return ExitCode::from(EXIT_FAILED);
            }
            Err(error) => return fail(format!("asking {endpoint}: {error}")),
        };
        match (answer.status, answer.location) {
            (200, _) => {
                print!("{}", answer.body);
                return ExitCode::SUCCESS;
            }
            (307, Some(location)) => match location
                .strip_prefix("http://")
                .and_then(|rest| rest.split_once('/'))
            {
                Some((host, rest)) => {
                    endpoint = host.to_owned();
                    path = format!("/{rest}");
                }
                None => {
                    eprintln!("error: {endpoint} redirected to {location:?}, no http URL");
                    return ExitCode::from(EXIT_FAILED);
                }
            },
            (status, _) => {
                let body: Option<serde_json::Value> = serde_json::from_str(&answer.body).ok();
                let message = body
                    .as_ref()
                    .and_then(|body| body.get("message")?.as_str().map(str::to_owned))
                    .unwrap_or_else(|| answer.body.trim().to_owned());
                print!("{}", answer.body);
                eprintln!("error: {message} (HTTP {status} from {endpoint})");
                return ExitCode::from(if (400..500).contains(&status) {
                    EXIT_UNUSABLE
                } else {
                    EXIT_FAILED
                });
            }
        }
    }
    eprintln!(
        "error: more than {MAX_REDIRECTS} redirects asking for {path}: the task keeps moving"
    );
    ExitCode::from(EXIT_FAILED)
}
