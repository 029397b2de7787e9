//! The pipeline under the simulator: 1,000 seeds with faults on, every
//! rule checked — the operators' own (expiring state I14, joins I13,
//! windows I12) included — plus the application's own properties.

use std::collections::BTreeMap;
use std::time::Duration;

use parsley_shop_app::{app, Order, Profile, Topics, DEDUPE};
use parsley_sim::sim::{Input, Simulation};

/// How far an order's timestamp may lie behind the wall clock.
const LAG: Duration = Duration::from_millis(300);

#[test]
fn a_thousand_seeds_of_the_order_pipeline() {
    let topics = Topics::new("");
    let app = app(
        "",
        &topics,
        Duration::from_secs(1),
        Duration::from_millis(200),
    )
    .unwrap();
    let (orders, unique, enriched) = (
        topics.orders.clone(),
        topics.unique_orders.clone(),
        topics.enriched.clone(),
    );
    Simulation::builder(app)
        // Order ids over few keys, so that they repeat (retries).
        .input(
            Input::new(&topics.orders, |draw| {
                let id = draw.key();
                let order = Order {
                    id: id.clone(),
                    customer: format!("c{}", draw.range(0, 3)),
                    product: format!("p{}", draw.range(0, 2)),
                    cents: draw.range(1, 10_000),
                };
                (Some(id), order)
            })
            .event_time_lag(LAG),
        )
        .input(
            Input::new(&topics.profiles, |draw| {
                let profile = Profile {
                    tier: format!("t{}", draw.range(0, 2)),
                    discount: draw.range(0, 50),
                };
                (Some(format!("c{}", draw.range(0, 3))), profile)
            })
            .tombstones(0.1),
        )
        .partitions(2)
        .instances(2)
        .inputs(60)
        .budget(1_200, 6_000)
        .seeds(0..1_000)
        .property("every unique order is enriched exactly once", move |run| {
            let mut count: BTreeMap<String, i64> = BTreeMap::new();
            for order in run.records(&unique)? {
                *count.entry(order.value().id.clone()).or_default() += 1;
            }
            for sale in run.records(&enriched)? {
                *count.entry(sale.value().order.id.clone()).or_default() -= 1;
            }
            match count.into_iter().find(|(_, left)| *left != 0) {
                None => Ok(()),
                Some((id, left)) => {
                    Err(format!("order {id}: {left} more unique than enriched").into())
                }
            }
        })
        // An id is unique again only once its first sighting has expired:
        // stream time has passed it by DEDUPE, so the repeat is at most the
        // input's event-time lag behind that (same key, same partition, in
        // order). Boundary-seeking time jumps the clock to the expiry, so
        // seeds do reach it.
        .property("no order id is unique twice within the dedupe window", {
            let unique = topics.unique_orders.clone();
            move |run| {
                let mut first: BTreeMap<String, i64> = BTreeMap::new();
                for order in run.records(&unique)? {
                    let id = order.value().id.clone();
                    if let Some(earlier) = first.insert(id.clone(), order.timestamp()) {
                        let gap = order.timestamp() - earlier;
                        if gap < (DEDUPE - LAG).as_millis() as i64 {
                            return Err(format!(
                                "order {id} written to unique-orders at {} and again at {} ({gap} ms later, within the {} s dedupe window)",
                                earlier,
                                order.timestamp(),
                                DEDUPE.as_secs()
                            )
                            .into());
                        }
                    }
                }
                Ok(())
            }
        })
        .sometimes("a duplicate was dropped", move |run| {
            Ok(run.records(&orders)?.len() > run.records(&topics.unique_orders)?.len())
        })
        .sometimes("an instance crashed", |run| Ok(run.stats().crashes > 0))
        .build()
        .unwrap()
        .check();
}
