//! `parsley-live`: the example topologies on a real Kafka cluster, through
//! the operator commands of `parsley_live::cli` (`setup`, `produce`, `run`,
//! `status`, `skip`, `audit`). A user's own runner is the same call over a
//! registry of their own applications.
//!
//! `--set tick-ms=N` sets the examples' tick interval (default 1000).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use parsley_examples::live::{plan_inputs, produce_inputs};
use parsley_examples::namespaced;
use parsley_examples::TopologyName;
use parsley_live::cli::{LiveApp, Registry};

fn main() -> ExitCode {
    let registry = TopologyName::ALL
        .into_iter()
        .filter(|name| name.runs_live())
        .fold(Registry::new(), |registry, name| {
            registry.app(name.as_str(), move |settings| {
                let tick = settings.millis("tick-ms", Duration::from_millis(1000))?;
                let topology = Arc::new(namespaced(name, &settings.namespace, tick)?);
                let app = topology.app.clone();
                Ok(LiveApp::new(app).producer(move |request| {
                    let topology = Arc::clone(&topology);
                    Box::pin(async move {
                        let plan =
                            plan_inputs(&topology, request.count, request.keys, request.seed);
                        let landed =
                            produce_inputs(&request.client, &topology, &request.assembly, &plan)
                                .await?;
                        Ok(landed.len())
                    })
                }))
            })
        });
    parsley_live::cli::main(registry)
}
