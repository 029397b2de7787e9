//! The operator oracles share no code with what they judge (I12, I13,
//! I14, I17, I18's reference evaluator, and I19's restore oracle): a lint over their sources. Every public function of an
//! operator's declaration, of its kinds and of its module is operator code,
//! except the hooks that run only the user's logic with its codecs
//! ([`USER_LOGIC`]); no oracle may call one.

use std::collections::BTreeSet;
use std::path::Path;

/// The declarations' hooks that run the user's logic and codecs only: an
/// aggregation's initial value, fold, merge and output record; an
/// expiring fold's initial state and fold; a join's joiner; a re-key's
/// key function.
const USER_LOGIC: [&str; 6] = ["initial", "fold", "merge", "output", "joined", "key_of"];

/// Functions that name derived topics: a convention the checker must
/// share to find the topics, not logic it judges.
const NAMING: [&str; 3] = [
    "subscription_topic_name",
    "response_topic_name",
    "repartition_topic_name",
];

/// The core's operator modules, from the repository's root.
const OPERATORS: [&str; 9] = [
    "src/window/mod.rs",
    "src/expiry/mod.rs",
    "src/join/mod.rs",
    "src/join/stream.rs",
    "src/join/table.rs",
    "src/join/foreign_key.rs",
    "src/join/foreign_key_codec.rs",
    "src/join/versioned/mod.rs",
    "src/rekey/mod.rs",
];

/// The operator oracles, from the simulator crate's root.
const ORACLES: [&str; 10] = [
    "src/sim/checker/windows.rs",
    "src/sim/checker/joins.rs",
    "src/sim/checker/stream_joins.rs",
    "src/sim/checker/table_joins.rs",
    "src/sim/checker/fk_joins.rs",
    "src/sim/checker/versioned_joins.rs",
    "src/sim/checker/expiry.rs",
    "src/sim/checker/rekeys.rs",
    "src/sim/checker/consistent.rs",
    "src/sim/checker/region.rs",
];

/// The public functions of `source` that are operator code: those of an
/// `impl` of a declaration or a kind (`…Decl`, `…Kind`, `…Part`) and the
/// module's free ones, but the user's logic and the naming conventions.
fn operator_functions(source: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut depth = 0i32;
    let mut inside: Option<i32> = None;
    for line in source.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let trimmed = code.trim_start();
        if depth == 0 && trimmed.starts_with("impl ") {
            let target = trimmed
                .trim_end_matches('{')
                .split_whitespace()
                .last()
                .unwrap_or_default();
            if !trimmed.contains(" for ")
                && ["Decl", "Kind", "Part"]
                    .iter()
                    .any(|end| target.ends_with(end))
            {
                inside = Some(depth);
            }
        }
        let free = depth == 0 && trimmed.starts_with("pub fn ");
        let method = inside.is_some() && depth == 1 && trimmed.starts_with("pub fn ");
        if free || method {
            let name: String = trimmed["pub fn ".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !USER_LOGIC.contains(&name.as_str()) && !NAMING.contains(&name.as_str()) {
                found.insert(name);
            }
        }
        depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
        if inside.is_some_and(|at| depth <= at) {
            inside = None;
        }
    }
    found
}

/// Each call in `source` (comments left out) of one of `forbidden`: its
/// line and the function.
fn calls_of(source: &str, forbidden: &BTreeSet<String>) -> Vec<(usize, String)> {
    let mut calls = Vec::new();
    for (number, line) in source.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        for name in forbidden {
            if [
                format!(".{name}("),
                format!("::{name}("),
                format!(".{name}::<"),
            ]
            .iter()
            .any(|call| code.contains(call.as_str()))
            {
                calls.push((number + 1, name.clone()));
            }
        }
    }
    calls
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[test]
fn i12_i13_i14_operator_oracles_call_only_the_users_logic() {
    let crate_root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = crate_root
        .parent()
        .expect("the simulator is in the workspace");
    let forbidden: BTreeSet<String> = OPERATORS
        .iter()
        .flat_map(|path| operator_functions(&read(&root.join(path))))
        .collect();
    // The lint sees the operators' own code: J8's rule and the views of
    // their state are among what it forbids.
    for seen in [
        "has_result",
        "live_state_of",
        "open_windows_of",
        "rows_of",
        "grace_ms",
    ] {
        assert!(
            forbidden.contains(seen),
            "the lint does not see `{seen}`: {forbidden:?}"
        );
    }
    let mut found = Vec::new();
    for oracle in ORACLES {
        for (line, name) in calls_of(&read(&crate_root.join(oracle)), &forbidden) {
            found.push(format!("{oracle}:{line}: calls the operator's `{name}`"));
        }
    }
    assert!(
        found.is_empty(),
        "an operator oracle calls operator code (compute it from the committed logs \
         instead, calling only the user's logic):\n{}",
        found.join("\n")
    );
}

/// The lint fails on an oracle that calls operator code.
#[test]
fn i13_the_lint_catches_an_oracle_calling_operator_code() {
    let operator =
        "impl TableJoinKind {\n    pub fn has_result(self) -> bool {\n        true\n    }\n}\n\
                    impl TableJoinDecl {\n    pub fn joined(&self) {}\n}\n";
    let forbidden = operator_functions(operator);
    assert_eq!(forbidden, BTreeSet::from(["has_result".to_string()]));
    let oracle = "let had = decl.kind.has_result(true, false);\nlet joined = decl.joined(&key);\n";
    assert_eq!(
        calls_of(oracle, &forbidden),
        vec![(1, "has_result".to_string())]
    );
}

/// I19's oracle shares no code with the restore it judges: it calls none
/// of the core's local-store functions (S6) and names neither the
/// world's disk model nor the core's ledger; it reads only the slot loads
/// the world recorded and the committed logs.
#[test]
fn i19_the_restore_oracle_shares_no_code_with_the_restore() {
    let crate_root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = crate_root
        .parent()
        .expect("the simulator is in the workspace");
    let forbidden: BTreeSet<String> = [
        "src/local_store/decision.rs",
        "src/local_store/checkpoint.rs",
    ]
    .iter()
    .flat_map(|path| operator_functions(&read(&root.join(path))))
    .collect();
    for seen in ["restore_start", "check_last_applied", "record_fingerprint"] {
        assert!(forbidden.contains(seen), "the lint does not see `{seen}`");
    }
    let oracle = read(&crate_root.join("src/sim/checker/restored.rs"));
    let code: String = oracle
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let mut found: Vec<String> = calls_of(&oracle, &forbidden)
        .into_iter()
        .map(|(line, name)| format!("restored.rs:{line}: calls `{name}`"))
        .collect();
    for name in ["Disks", "StoreLedger", "restore_start", "judge_opened"] {
        if code.contains(name) {
            found.push(format!("restored.rs names `{name}`"));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
