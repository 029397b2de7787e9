use parsley_sim::sim::{run_seed, scenario};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let s = scenario::load(std::path::Path::new(&args[1])).unwrap();
    let n: u64 = args.get(2).map(|a| a.parse().unwrap()).unwrap_or(5);
    if let Some(m) = args.get(3) {
        parsley::mutation::set(parsley::mutation::Mutation::from_name(m));
    }
    let start = std::time::Instant::now();
    let mut marks = parsley_sim::sim::world::Marks::default();
    let mut failing = 0;
    let mut first = None;
    for seed in 0..n {
        let o = run_seed(&s, seed);
        marks.add(&o.stats.marks);
        if !o.violations.is_empty() {
            failing += 1;
            if first.is_none() {
                first = Some((seed, o.violations[0].to_string()));
            }
        }
    }
    println!(
        "{n} seeds in {:?}: {failing} failing; first {:?}",
        start.elapsed(),
        first
    );
    println!("{:?}", marks);
}
