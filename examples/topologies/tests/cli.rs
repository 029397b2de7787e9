//! The `parsley-sim` command-line runner, run as a process.
//!
//! The binary the tests run is built with the tests' `parsley`, which has
//! planted bugs (`mutations`), so `--mutation` works here; a build without
//! them refuses the flag with exit code 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use parsley_sim::sim::{Marks, Simulation};

const BALANCES: &str = "scenarios/balances.toml";

/// The balances scenario's simulation, as the binary builds it.
fn balances() -> Simulation {
    let registry = parsley_examples::registry();
    let scenario = registry
        .load(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(BALANCES),
        )
        .unwrap();
    registry.simulation(&scenario).unwrap()
}

/// Runs the binary from the workspace root, where the scenario paths of the
/// docs (`scenarios/balances.toml`) work.
fn sim(args: &[&str]) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Command::new(env!("CARGO_BIN_EXE_parsley-sim"))
        .args(args)
        .current_dir(root)
        .output()
        .expect("the parsley-sim binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exited, not killed")
}

/// A file in the temp dir that no other test (or test run) uses.
fn temp_file(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("parsley-sim-cli-{}-{name}", std::process::id()))
}

/// The value of a `label   value` row of the output.
fn row<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|line| {
            line.strip_prefix(label)
                .filter(|rest| rest.starts_with(' '))
        })
        .map(str::trim)
}

#[test]
fn run_prints_a_summary_and_exits_0_when_every_seed_passes() {
    let output = sim(&["run", BALANCES, "--seeds", "10..16", "--jobs", "2"]);
    let out = stdout(&output);
    assert_eq!(code(&output), 0, "{out}\n{}", stderr(&output));
    assert_eq!(
        row(&out, "scenario"),
        Some("balances (scenarios/balances.toml)")
    );
    assert_eq!(row(&out, "seeds"), Some("10..16 (6 seeds)"));
    assert_eq!(row(&out, "violations"), Some("0 failing seeds"));
    for label in [
        "steps",
        "deliveries",
        "commits",
        "aborts",
        "crashes",
        "fences",
        "max held",
    ] {
        let value = row(&out, label).unwrap_or_else(|| panic!("no {label} row in\n{out}"));
        assert!(value.parse::<u64>().is_ok(), "{label}: {value}");
    }
    for (name, _) in Marks::default().named() {
        assert!(
            row(&out, &format!("  {name}")).is_some(),
            "no {name} row in\n{out}"
        );
    }
    let wall = row(&out, "wall time").expect("a wall time row");
    assert!(wall.contains("seeds/s"), "{wall}");

    // The steps are the sum over the seeds, whatever the number of threads.
    let simulation = balances();
    let steps: u64 = (10..16)
        .map(|seed| simulation.run_seed(seed).stats.steps)
        .sum();
    assert_eq!(row(&out, "steps"), Some(steps.to_string().as_str()));
    let one_thread = stdout(&sim(&["run", BALANCES, "--seeds", "10..16", "--jobs", "1"]));
    assert_eq!(row(&one_thread, "steps"), row(&out, "steps"));
}

#[test]
fn a_bad_scenario_file_exits_2_naming_file_line_and_field() {
    let path = temp_file("bad.toml");
    std::fs::write(
        &path,
        "topology = \"balances\"\npartitions = 4\nseeds = { start = 0, count = 2 }\n\n[faults]\nabort = 2.5\n",
    )
    .unwrap();
    let output = sim(&["run", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    assert_eq!(code(&output), 2, "{}", stdout(&output));
    let err = stderr(&output);
    assert!(
        err.contains(&format!("{}:6: faults.abort: ", path.display())),
        "{err}"
    );

    let output = sim(&["replay", "no/such/scenario.toml", "--seed", "1"]);
    assert_eq!(code(&output), 2);
    assert!(stderr(&output).contains("no/such/scenario.toml: cannot read"));
}

#[test]
fn bad_seed_ranges_and_job_counts_exit_2() {
    for (seeds, says) in [
        ("5..2", "5..2 holds no seed"),
        ("3..3", "3..3 holds no seed"),
        ("7", "expected a half-open range A..B"),
        ("x..9", "the start of \"x..9\" is not a seed"),
    ] {
        let output = sim(&["run", BALANCES, "--seeds", seeds]);
        assert_eq!(code(&output), 2, "--seeds {seeds}");
        assert!(
            stderr(&output).contains(says),
            "--seeds {seeds}: {}",
            stderr(&output)
        );
        assert!(stdout(&output).is_empty());
    }
    let output = sim(&["run", BALANCES, "--jobs", "0"]);
    assert_eq!(code(&output), 2);
    assert!(
        stderr(&output).contains("at least one worker thread"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn replay_is_deterministic_and_prints_story_stats_and_trace_hash() {
    let first = sim(&["replay", BALANCES, "--seed", "3"]);
    let second = sim(&["replay", BALANCES, "--seed", "3"]);
    let out = stdout(&first);
    assert_eq!(code(&first), 0, "{out}\n{}", stderr(&first));
    assert!(out.contains("What happened:"), "{out}");
    assert!(out.contains("delivered"), "{out}");
    assert!(row(&out, "steps").is_some(), "{out}");
    assert_eq!(row(&out, "violations"), Some("0"));
    let hash = row(&out, "trace hash").expect("a trace hash row");
    assert_eq!(hash.len(), 16, "{hash}");
    assert_eq!(row(&stdout(&second), "trace hash"), Some(hash));
    assert_eq!(out, stdout(&second));

    let other = stdout(&sim(&["replay", BALANCES, "--seed", "4"]));
    assert_ne!(row(&other, "trace hash"), Some(hash));
}

#[test]
fn replaying_a_seeds_tape_gives_the_seeds_run() {
    let tape = balances().run_seed(3).tape;
    let path = temp_file("seed3.tape");
    let mut text = String::from("# the tape of seed 3\n");
    for line in tape.chunks(32) {
        text.extend(line.iter().map(|byte| format!("{byte:02x}")));
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    let from_tape = sim(&["replay", BALANCES, "--tape", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    let from_seed = sim(&["replay", BALANCES, "--seed", "3"]);
    assert_eq!(code(&from_tape), 0, "{}", stderr(&from_tape));
    assert_eq!(
        row(&stdout(&from_tape), "trace hash"),
        row(&stdout(&from_seed), "trace hash")
    );

    let bad = temp_file("bad.tape");
    std::fs::write(&bad, "00ff0g\n").unwrap();
    let output = sim(&["replay", BALANCES, "--tape", bad.to_str().unwrap()]);
    let _ = std::fs::remove_file(&bad);
    assert_eq!(code(&output), 2);
    assert!(
        stderr(&output).contains("not a hex tape"),
        "{}",
        stderr(&output)
    );

    let output = sim(&["replay", BALANCES]);
    assert_eq!(code(&output), 2, "replay needs --seed or --tape");
}

#[test]
fn replay_writes_a_timeline() {
    let path = temp_file("timeline.html");
    let output = sim(&[
        "replay",
        BALANCES,
        "--seed",
        "3",
        "--timeline",
        path.to_str().unwrap(),
    ]);
    if !output.status.success() && stderr(&output).contains("being written") {
        eprintln!("skipped: timeline::render_html is still being written");
        return;
    }
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let html = std::fs::read_to_string(&path).expect("the timeline file");
    let _ = std::fs::remove_file(&path);
    assert!(
        html.starts_with("<!DOCTYPE html>"),
        "{}",
        &html[..html.len().min(200)]
    );
}

#[test]
fn shrinking_a_passing_seed_says_so_and_exits_0() {
    let output = sim(&["shrink", BALANCES, "--seed", "3"]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert!(
        stdout(&output).contains("passes: nothing to shrink"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_planted_bug_fails_the_run_with_its_invariant() {
    let output = sim(&[
        "run",
        "scenarios/fan-in.toml",
        "--seeds",
        "0..3",
        "--mutation",
        "gate-ignores-claims",
    ]);
    let out = stdout(&output);
    assert_eq!(code(&output), 1, "{out}\n{}", stderr(&output));
    assert!(out.contains("I1"), "{out}");
    assert!(out.contains("FAILED: seed"), "{out}");
    assert_eq!(row(&out, "mutation"), Some("gate-ignores-claims (planted)"));
}

#[test]
fn unknown_mutations_are_listed() {
    let output = sim(&["run", BALANCES, "--mutation", "no-such-bug"]);
    assert_eq!(code(&output), 2);
    let err = stderr(&output);
    for mutation in parsley::mutation::Mutation::ALL {
        assert!(err.contains(mutation.name()), "{err}");
    }
}

/// The commands a report prints (this very binary, then its arguments),
/// each as the binary's arguments.
fn printed_commands(out: &str) -> Vec<Vec<String>> {
    let program = env!("CARGO_BIN_EXE_parsley-sim");
    out.lines()
        .filter_map(|line| {
            let (before, args) = line.split_once(program)?;
            assert!(
                before.ends_with(": ") || before.trim().is_empty(),
                "not a command line: {line}"
            );
            assert!(
                args.ends_with(" --mutation gate-ignores-claims"),
                "a replay of a planted bug needs its --mutation flag: {line}"
            );
            Some(args.split_whitespace().map(str::to_string).collect())
        })
        .collect()
}

#[test]
fn every_command_a_planted_failure_prints_reproduces_it() {
    let output = sim(&[
        "run",
        "scenarios/fan-in.toml",
        "--seeds",
        "0..3",
        "--mutation",
        "gate-ignores-claims",
    ]);
    let out = stdout(&output);
    assert_eq!(code(&output), 1, "{out}\n{}", stderr(&output));
    let commands = printed_commands(&out);
    let subcommands: Vec<&str> = commands.iter().map(|args| args[0].as_str()).collect();
    assert_eq!(subcommands, ["replay", "shrink"], "{out}");
    for mut args in commands {
        if args[0] == "shrink" {
            // The printed budget is the one that made the tape; a smaller
            // one keeps the test short.
            let at = args
                .iter()
                .position(|arg| arg == "--attempts")
                .unwrap_or_else(|| panic!("the shrink command carries its attempts: {args:?}"));
            args[at + 1] = "20".to_string();
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = sim(&args);
        assert_eq!(
            code(&output),
            1,
            "{args:?} does not fail:\n{}",
            stdout(&output)
        );
        assert!(stdout(&output).contains("I1"), "{args:?}");
    }
}

/// A shrink the budget cut short says so, and prints the command that
/// goes on with a larger budget; that command runs as printed.
#[test]
fn a_shrink_cut_short_says_so_and_prints_how_to_continue() {
    let args = [
        "shrink",
        "scenarios/fan-in.toml",
        "--seed",
        "0",
        "--attempts",
        "5",
        "--mutation",
        "gate-ignores-claims",
    ];
    let output = sim(&args);
    let out = stdout(&output);
    assert_eq!(code(&output), 1, "{out}\n{}", stderr(&output));
    assert!(
        out.contains("Shrinking stopped after 5 attempts at "),
        "{out}"
    );
    assert!(out.contains("it had not reached a minimum"), "{out}");
    assert!(out.contains("Continue shrinking: "), "{out}");
    // The budget that made the tape, then four times it.
    assert!(out.contains("Shrink: "), "{out}");
    let commands = printed_commands(&out);
    let shrinks: Vec<&Vec<String>> = commands.iter().filter(|args| args[0] == "shrink").collect();
    assert_eq!(shrinks.len(), 2, "{out}");
    let attempts = |args: &[String]| {
        let at = args.iter().position(|arg| arg == "--attempts").unwrap();
        args[at + 1].clone()
    };
    assert_eq!(attempts(shrinks[0]), "5", "{:?}", shrinks[0]);
    assert!(out.contains("Continue shrinking: "), "{out}");
    let more = shrinks[1];
    assert_eq!(attempts(more), "20", "{more:?}");
    let more: Vec<&str> = more.iter().map(String::as_str).collect();
    let output = sim(&more);
    assert_eq!(code(&output), 1, "{}", stdout(&output));
    assert!(stdout(&output).contains("I1"), "{}", stdout(&output));
}

#[test]
fn a_shrunk_tape_replays_the_failure() {
    let tape = temp_file("shrunk.tape");
    let tape = tape.to_str().unwrap();
    let mutation = ["--mutation", "gate-ignores-claims"];
    let mut args = vec![
        "shrink",
        "scenarios/fan-in.toml",
        "--seed",
        "0",
        "--attempts",
        "300",
        "--tape-out",
        tape,
    ];
    args.extend(mutation);
    let output = sim(&args);
    let out = stdout(&output);
    assert_eq!(code(&output), 1, "{out}\n{}", stderr(&output));
    assert!(out.contains("FAILED: seed 0"), "{out}");

    // The tape's replay command, as printed.
    let commands = printed_commands(&out);
    let replay = commands
        .iter()
        .find(|args| args.contains(&"--tape".to_string()))
        .unwrap_or_else(|| panic!("no tape replay in\n{out}"));
    assert_eq!(
        replay[..4],
        ["replay", "scenarios/fan-in.toml", "--tape", tape]
    );
    let args: Vec<&str> = replay.iter().map(String::as_str).collect();
    let output = sim(&args);
    let _ = std::fs::remove_file(tape);
    assert_eq!(code(&output), 1, "{}\n{}", stdout(&output), stderr(&output));
    assert!(stdout(&output).contains("I1"), "{}", stdout(&output));
}

/// `--partition I/N` slices a range into interleaved, disjoint parts whose
/// summaries `merge` adds up to the whole run's.
#[test]
fn partitions_merge_into_the_whole_run() {
    let whole = stdout(&sim(&["run", BALANCES, "--seeds", "0..9"]));
    let mut files = Vec::new();
    for index in 1..=3 {
        let path = temp_file(&format!("slice-{index}.json"));
        let slice = format!("{index}/3");
        let output = sim(&[
            "run",
            BALANCES,
            "--seeds",
            "0..9",
            "--partition",
            &slice,
            "--summary-out",
            path.to_str().unwrap(),
        ]);
        assert_eq!(code(&output), 0, "{}", stderr(&output));
        assert!(
            row(&stdout(&output), "seeds")
                .unwrap()
                .contains(&format!("3 seeds, slice {slice}")),
            "{}",
            stdout(&output)
        );
        files.push(path);
    }
    let mut args = vec!["merge"];
    args.extend(files.iter().map(|path| path.to_str().unwrap()));
    let merged = sim(&args);
    assert_eq!(code(&merged), 0, "{}", stderr(&merged));
    let merged_out = stdout(&merged);
    assert_eq!(row(&merged_out, "steps"), row(&whole, "steps"));
    assert_eq!(row(&merged_out, "deliveries"), row(&whole, "deliveries"));
    assert!(
        row(&merged_out, "seeds").unwrap().contains("every seed"),
        "{merged_out}"
    );

    // A missing slice is named, not merged quietly.
    let partial = sim(&[
        "merge",
        files[0].to_str().unwrap(),
        files[1].to_str().unwrap(),
    ]);
    assert_eq!(code(&partial), 2);
    assert!(
        stderr(&partial).contains("cover 6 of the 9 seeds"),
        "{}",
        stderr(&partial)
    );
    for path in files {
        let _ = std::fs::remove_file(path);
    }
}

#[test]
fn shrink_writes_the_shrunk_runs_timeline_with_its_violation() {
    let path = temp_file("shrunk-timeline.html");
    let output = sim(&[
        "shrink",
        "scenarios/fan-in.toml",
        "--seed",
        "0",
        "--attempts",
        "100",
        "--timeline",
        path.to_str().unwrap(),
        "--mutation",
        "gate-ignores-claims",
    ]);
    assert_eq!(code(&output), 1, "{}", stderr(&output));
    let html = std::fs::read_to_string(&path).expect("the timeline file");
    let _ = std::fs::remove_file(&path);
    assert!(html.contains("class=\"violation-band\""));
    assert!(html.contains("<ul class=\"violations\">\n<li>I1 causal delivery"));
    assert!(
        html.contains("\nstamp {payments-"),
        "deliveries show their stamps"
    );
}

/// `parsley-sim explore` of the balances scenario with
/// consumer-not-rewound planted, within `bound`, with `more` arguments.
fn explore_planted(bound: &[&str], more: &[&str]) -> Output {
    let mut args = vec!["explore", BALANCES, "--mutation", "consumer-not-rewound"];
    args.extend(bound);
    args.extend(more);
    sim(&args)
}

/// The command line a run's report says replays its tape.
fn replay_line(out: &str) -> &str {
    out.lines()
        .skip_while(|line| !line.contains("replay it with:"))
        .nth(1)
        .unwrap_or_else(|| panic!("no replay line: {out}"))
}

#[test]
fn explore_finds_a_planted_bug_and_replays_its_tape() {
    let dir = std::env::temp_dir().join(format!("parsley-sim-explore-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tape = dir.join("explored.tape");
    let bound = ["--inputs", "2", "--steps", "8"];
    let tape_arg = tape.to_str().unwrap();
    let output = explore_planted(&bound, &["--tape-out", tape_arg]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(
        out.contains("a violation within the bound (2 inputs over 1 partition"),
        "{out}"
    );
    assert!(out.contains("What happened:"), "{out}");
    let replay = replay_line(&out);
    assert!(replay.contains("--replay") && replay.contains("--mutation consumer-not-rewound"));
    let replayed = explore_planted(&bound, &["--replay", tape_arg]);
    assert_eq!(replayed.status.code(), Some(1), "{}", stdout(&replayed));
    assert!(stdout(&replayed).contains("I2"), "{}", stdout(&replayed));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn explore_says_when_no_violation_exists_within_the_bound() {
    let output = sim(&["explore", BALANCES, "--inputs", "1", "--steps", "4"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(
        out.contains("no violation within the bound (1 input over 1 partition (1 instance, 1 key), 1 fault (abort, crash), 4 steps)"),
        "{out}"
    );
}

#[test]
fn explore_shuffled_says_so_and_its_tape_replays() {
    let dir = std::env::temp_dir().join(format!("parsley-sim-shuffled-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tape = dir.join("shuffled.tape");
    let tape_arg = tape.to_str().unwrap();
    let bound = ["--steps", "8", "--shuffle", "3"];
    let output = explore_planted(&bound, &["--tape-out", tape_arg]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.contains("8 steps, shuffled by seed 3)"), "{out}");
    let replay = replay_line(&out);
    assert!(replay.contains("--shuffle 3"), "{replay}");
    let replayed = explore_planted(&bound, &["--replay", tape_arg]);
    assert_eq!(replayed.status.code(), Some(1), "{}", stdout(&replayed));
    std::fs::remove_dir_all(&dir).ok();
}

/// README's install command names a crate, features and a binary that go
/// together: the crate at `--path` declares the `[[bin]]`, and the binary's
/// required features are among those given.
#[test]
fn readmes_install_command_names_a_binary_of_that_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let command = readme
        .split('`')
        .find(|span| span.starts_with("cargo install --path"))
        .expect("README names a `cargo install --path …` command");
    let words: Vec<&str> = command.split_whitespace().collect();
    let after = |flag: &str| {
        words
            .iter()
            .position(|word| *word == flag)
            .map(|at| words[at + 1])
            .unwrap_or_else(|| panic!("{flag} in `{command}`"))
    };
    let (path, features, bin) = (after("--path"), after("--features"), after("--bin"));
    let manifest = std::fs::read_to_string(root.join(path).join("Cargo.toml"))
        .unwrap_or_else(|error| panic!("`{command}`: no {path}/Cargo.toml: {error}"));
    // The `[[bin]]` block naming it (no TOML parser among the dev
    // dependencies: the manifest's blocks are one `key = value` a line).
    let block = manifest
        .split("[[bin]]")
        .skip(1)
        .map(|block| block.split("\n[").next().unwrap_or(block))
        .find(|block| block.contains(&format!("name = \"{bin}\"")))
        .unwrap_or_else(|| panic!("`{command}`: {path} declares no binary {bin}"));
    let given: Vec<&str> = features.split(',').collect();
    let required = block
        .lines()
        .find_map(|line| line.trim().strip_prefix("required-features"))
        .unwrap_or("");
    for needed in required.split('"').skip(1).step_by(2) {
        assert!(
            given.contains(&needed),
            "`{command}`: {bin} needs feature {needed}"
        );
    }
}
