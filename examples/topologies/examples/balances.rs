//! Runs the seed's `balances` topology under the test driver and prints what
//! it emitted: four partitions, a few accounts, three minutes of wall clock.
//!
//! `cargo run -p parsley-examples --example balances`

use std::time::Duration;

use parsley_examples::{balances, Order, PaymentsTopics};
use parsley_sim::{TestDriver, TestRecord};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let topics = PaymentsTopics::new();
    let app = balances(&topics)?;
    let start = 1_700_000_000_000;
    let driver = TestDriver::builder(&app)
        .initial_wall_clock(start)
        .partitions("orders", 4)
        .build()?;

    println!("Topics the application needs (TopicContract::list):");
    for contract in driver.topic_contracts() {
        println!("  {contract}");
    }

    let orders = driver.input(&topics.orders)?;
    let accounts = ["alice", "bob", "carol", "dave", "erin"];
    for minute in 0..3u32 {
        let batch = accounts.iter().enumerate().map(|(index, account)| {
            TestRecord::new(
                account.to_string(),
                Order {
                    total: 10 * (index as i64 + 1) + i64::from(minute),
                },
            )
        });
        orders.pipe_all(batch)?;
        driver.advance_wall_clock(Duration::from_secs(60))?;
    }

    println!("\nTicks, as the test driver saw them:");
    print!("{}", driver.tick_report());

    println!("\nCommitted to `audits`:");
    for record in driver.output(&topics.audits)?.read_all()? {
        println!(
            "  {}@{}  {:?}  stamp {}",
            record.tp, record.offset, record.value, record.stamp
        );
    }

    println!("\nBalances (committed key slots):");
    for account in accounts {
        let balance: Option<i64> =
            driver.key_slot("balances", &topics.orders, &account.to_string())?;
        println!("  {account:<6} {}", balance.unwrap_or(0));
    }

    println!("\nMetrics of stage balances:");
    for name in [
        "ticks-emitted-total",
        "records-delivered-total",
        "transactions-committed-total",
    ] {
        println!("  {name:<30} {}", driver.metric("balances", name)?);
    }
    Ok(())
}
