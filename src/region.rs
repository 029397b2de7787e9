//! Consistent views' regions (V1, V2): which stages lie on a path from the
//! application's sources to a consistent view, and what each of their
//! tasks needs to deliver in epoch order (the writers of each source, the
//! sinks to write progress to).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::app::{CompositionError, StagePlan};
use crate::tp::TopicName;

/// V2: how a stage on a path to a consistent view takes part in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    /// The epoch length, in milliseconds (V3).
    pub epoch_ms: i64,
    /// The consistent views the stage leads to (itself, if it is one).
    pub views: Vec<String>,
    /// Whether the stage is itself a consistent view (V5).
    pub is_view: bool,
    /// For each declared source, in order, the stages that write it; empty
    /// for a source of the application, whose epochs its timestamps give
    /// (V3).
    pub writers: Vec<Vec<String>>,
    /// The stage's sinks that stages of a region consume: where its tasks
    /// write progress records (V4).
    pub progress_sinks: Vec<TopicName>,
}

/// Plans every consistent view's region into `plans`, or refuses what no
/// cut can decide (V2).
pub(crate) fn plan(plans: &mut [StagePlan]) -> Result<(), CompositionError> {
    let writers = writers_of(plans);
    let index: BTreeMap<String, usize> = plans
        .iter()
        .enumerate()
        .map(|(at, plan)| (plan.name().to_string(), at))
        .collect();
    let mut regions: Vec<Option<(Duration, Vec<String>)>> = vec![None; plans.len()];
    for view in 0..plans.len() {
        let Some(epoch) = plans[view].stage.consistent_epoch() else {
            continue;
        };
        let name = plans[view].name().to_string();
        if epoch.is_zero() || epoch.subsec_nanos() % 1_000_000 != 0 {
            return Err(CompositionError::ConsistentEpoch { view: name, epoch });
        }
        for member in upstream(plans, &writers, &index, view)? {
            let plan = &plans[member];
            let refuse = |reason: &str| CompositionError::ConsistentRegion {
                view: name.clone(),
                stage: plan.name().to_string(),
                reason: reason.to_string(),
            };
            if plan.stage.ticks().is_some() {
                return Err(refuse(
                    "ticks on the wall clock (T1; a timer, a window's or an expiry's close)",
                ));
            }
            if plan.stage.timestamp_sync().is_some() {
                return Err(refuse(
                    "synchronises its sources by timestamp (G9), waiting on the wall clock",
                ));
            }
            match &mut regions[member] {
                Some((first, views)) if *first != epoch => {
                    return Err(CompositionError::ConsistentEpochsDiffer {
                        stage: plan.name().to_string(),
                        first: views[0].clone(),
                        first_epoch: *first,
                        second: name,
                        second_epoch: epoch,
                    })
                }
                Some((_, views)) => views.push(name.clone()),
                slot => *slot = Some((epoch, vec![name.clone()])),
            }
        }
        check_related(plans, &writers, view)?;
    }
    let consumed_in_regions: BTreeSet<TopicName> = plans
        .iter()
        .zip(&regions)
        .filter(|(_, region)| region.is_some())
        .flat_map(|(plan, _)| {
            plan.stage
                .sources()
                .iter()
                .map(|source| source.name.clone())
        })
        .collect();
    for (plan, region) in plans.iter_mut().zip(regions) {
        let Some((epoch, views)) = region else {
            continue;
        };
        let writers = plan
            .stage
            .sources()
            .iter()
            .map(|source| writers.get(&source.name).cloned().unwrap_or_default())
            .collect();
        let progress_sinks = plan
            .stage
            .sinks()
            .iter()
            .map(|sink| sink.name.clone())
            .filter(|sink| consumed_in_regions.contains(sink))
            .collect();
        plan.region = Some(Region {
            epoch_ms: i64::try_from(epoch.as_millis()).unwrap_or(i64::MAX),
            is_view: plan.stage.consistent_epoch().is_some(),
            views,
            writers,
            progress_sinks,
        });
    }
    Ok(())
}

/// Each topic some stage writes, with the stages that write it.
fn writers_of(plans: &[StagePlan]) -> BTreeMap<TopicName, Vec<String>> {
    let mut writers: BTreeMap<TopicName, Vec<String>> = BTreeMap::new();
    for plan in plans {
        for sink in plan.stage.sinks() {
            writers
                .entry(sink.name.clone())
                .or_default()
                .push(plan.name().to_string());
        }
    }
    writers
}

/// The stages on a path from the sources to `view`, `view` included, in
/// no particular order; a cycle through them is refused.
fn upstream(
    plans: &[StagePlan],
    writers: &BTreeMap<TopicName, Vec<String>>,
    index: &BTreeMap<String, usize>,
    view: usize,
) -> Result<Vec<usize>, CompositionError> {
    // Depth first, with the path kept to tell a cycle from a diamond.
    let mut done = vec![false; plans.len()];
    let mut on_path = vec![false; plans.len()];
    let mut members = Vec::new();
    let mut stack: Vec<(usize, bool)> = vec![(view, false)];
    while let Some((stage, leaving)) = stack.pop() {
        if leaving {
            on_path[stage] = false;
            done[stage] = true;
            members.push(stage);
            continue;
        }
        if done[stage] {
            continue;
        }
        on_path[stage] = true;
        stack.push((stage, true));
        for source in plans[stage].stage.sources() {
            for writer in writers.get(&source.name).into_iter().flatten() {
                let writer = index[writer];
                if on_path[writer] {
                    return Err(CompositionError::ConsistentRegion {
                        view: plans[view].name().to_string(),
                        stage: plans[writer].name().to_string(),
                        reason: format!(
                            "reads back what it leads to, through {:?} (a cycle)",
                            source.name.as_str()
                        ),
                    });
                }
                if !done[writer] {
                    stack.push((writer, false));
                }
            }
        }
    }
    Ok(members)
}

/// A view over two or more inputs needs a source they all derive from.
fn check_related(
    plans: &[StagePlan],
    writers: &BTreeMap<TopicName, Vec<String>>,
    view: usize,
) -> Result<(), CompositionError> {
    let inputs = plans[view].stage.sources();
    if inputs.len() < 2 {
        return Ok(());
    }
    let origins: Vec<BTreeSet<TopicName>> = inputs
        .iter()
        .map(|input| origins_of(plans, writers, &input.name))
        .collect();
    let shared = origins
        .iter()
        .skip(1)
        .fold(origins[0].clone(), |shared, next| {
            shared.intersection(next).cloned().collect()
        });
    if !shared.is_empty() {
        return Ok(());
    }
    let inputs = inputs
        .iter()
        .zip(&origins)
        .map(|(input, origins)| {
            let origins: Vec<&str> = origins.iter().map(TopicName::as_str).collect();
            format!("{:?} from {origins:?}", input.name.as_str())
        })
        .collect::<Vec<_>>()
        .join(", ");
    Err(CompositionError::ConsistentInputsUnrelated {
        view: plans[view].name().to_string(),
        inputs,
    })
}

/// The application's sources (topics no stage writes) `topic` derives from.
fn origins_of(
    plans: &[StagePlan],
    writers: &BTreeMap<TopicName, Vec<String>>,
    topic: &TopicName,
) -> BTreeSet<TopicName> {
    let mut origins = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut pending = vec![topic.clone()];
    while let Some(topic) = pending.pop() {
        if !seen.insert(topic.clone()) {
            continue;
        }
        match writers.get(&topic) {
            None => {
                origins.insert(topic);
            }
            Some(stages) => {
                for stage in stages {
                    let plan = plans
                        .iter()
                        .find(|plan| plan.name() == stage)
                        .expect("a writer is a stage of the application");
                    pending.extend(
                        plan.stage
                            .sources()
                            .iter()
                            .map(|source| source.name.clone()),
                    );
                }
            }
        }
    }
    origins
}
