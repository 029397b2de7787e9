//! The operator oracles share no code with what they judge (I12, I13,
//! I14, I17, I18's reference evaluator, I19's restore oracle and I20's query oracle): a lint over their sources. Every public function of an
//! operator's declaration, of its kinds and of its module is operator code,
//! except the hooks that run only the user's logic with its codecs
//! ([`USER_LOGIC`]); no oracle may call one. And those hooks may reach,
//! through the operator's functions of any visibility (private helpers,
//! `pub(crate)` ones, trait methods), only the user's logic and its codecs
//! ([`CODECS`]): a hook that runs the operator's own pairing, result or
//! merge helper would hand the oracle the code it judges.

use std::collections::BTreeSet;
use std::path::Path;

/// The declarations' hooks that run the user's logic and codecs only: an
/// aggregation's initial value, fold, merge and output record; an
/// expiring fold's initial state and fold; a join's joiner; a
/// foreign-key join's extractor; a re-key's key function.
const USER_LOGIC: [&str; 7] = [
    "initial",
    "fold",
    "merge",
    "output",
    "joined",
    "extracted",
    "key_of",
];

/// Functions that name derived topics: a convention the checker must
/// share to find the topics, not logic it judges.
const NAMING: [&str; 3] = [
    "subscription_topic_name",
    "response_topic_name",
    "repartition_topic_name",
];

/// What a user-logic hook may reach in the operator's modules besides
/// other hooks: decoding and encoding with the topics' and the
/// aggregate's codecs, the output topic they are read from, and the
/// standard traits' plumbing (`clone`, `into`, `new`).
const CODECS: [&str; 13] = [
    "decode",
    "encode",
    "decode_key",
    "decode_value",
    "decode_aggregate",
    "encode_aggregate",
    "value_failure",
    "left_key",
    "key",
    "output",
    "clone",
    "into",
    "new",
];

/// The modules a hook's calls are followed through: the operators' and
/// their logic's, from the repository's root.
const OPERATOR_LOGIC: [&str; 21] = [
    "src/window/mod.rs",
    "src/window/logic.rs",
    "src/window/assign.rs",
    "src/window/state.rs",
    "src/expiry/mod.rs",
    "src/expiry/logic.rs",
    "src/expiry/state.rs",
    "src/join/mod.rs",
    "src/join/logic.rs",
    "src/join/row.rs",
    "src/join/stream.rs",
    "src/join/stream_logic.rs",
    "src/join/table.rs",
    "src/join/table_logic.rs",
    "src/join/foreign_key.rs",
    "src/join/foreign_key_logic.rs",
    "src/join/foreign_key_codec.rs",
    "src/join/versioned/mod.rs",
    "src/join/versioned/logic.rs",
    "src/rekey/mod.rs",
    "src/rekey/output.rs",
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

/// Every function of `source`, whatever its visibility and wherever it
/// is (free, inherent, a trait's), with its body; and the user-logic
/// hooks among them (the [`USER_LOGIC`] methods of a declaration's
/// `impl`). A trait's method without a body is left out.
fn functions_of(source: &str) -> (Vec<(String, String)>, BTreeSet<String>) {
    let mut functions = Vec::new();
    let mut hooks = BTreeSet::new();
    let mut depth = 0i32;
    let mut declaration: Option<i32> = None;
    // The function being read: its name, its depth, its body so far and
    // whether its body has opened.
    let mut open: Option<(String, i32, String, bool)> = None;
    for line in source.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let trimmed = code.trim_start();
        if trimmed.starts_with("impl ") || trimmed.starts_with("impl<") {
            let target = trimmed
                .trim_end_matches('{')
                .split_whitespace()
                .last()
                .unwrap_or_default();
            if !trimmed.contains(" for ") && target.ends_with("Decl") {
                declaration = Some(depth);
            }
        }
        if open.is_none() {
            if let Some(at) = code
                .find("fn ")
                .filter(|at| *at == 0 || !code.as_bytes()[at - 1].is_ascii_alphanumeric())
            {
                let name: String = code[at + 3..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    if declaration.is_some_and(|at| depth == at + 1)
                        && USER_LOGIC.contains(&name.as_str())
                    {
                        hooks.insert(name.clone());
                    }
                    open = Some((name, depth, String::new(), false));
                }
            }
        }
        depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
        if let Some((name, at, body, opened)) = &mut open {
            body.push_str(code);
            body.push('\n');
            *opened |= code.contains('{');
            if !*opened && code.trim_end().ends_with(';') {
                open = None;
            } else if *opened && depth <= *at {
                functions.push((name.clone(), std::mem::take(body)));
                open = None;
            }
        }
        if declaration.is_some_and(|at| depth <= at) {
            declaration = None;
        }
    }
    (functions, hooks)
}

/// The names `body` calls: each identifier followed by `(` or `::<`.
fn callees(body: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = body.as_bytes();
    let mut start = None;
    for (at, byte) in bytes.iter().enumerate() {
        let part = byte.is_ascii_alphanumeric() || *byte == b'_';
        match (part, start) {
            (true, None) => start = Some(at),
            (false, Some(from)) => {
                let called = *byte == b'(' || body[at..].starts_with("::<");
                let defined = body[..from].trim_end().ends_with("fn");
                if called && !defined {
                    names.insert(body[from..at].to_string());
                }
                start = None;
            }
            _ => {}
        }
    }
    names
}

/// Each operator helper a user-logic hook reaches, through the operator's
/// functions by name (every function of that name is followed, so a name
/// shared by a helper and a hook is judged by both; a codec is not
/// followed): the hook, and the chain of calls to the helper.
fn helpers_reached(sources: &[String]) -> Vec<String> {
    let mut bodies: Vec<(String, String)> = Vec::new();
    let mut hooks = BTreeSet::new();
    for source in sources {
        let (functions, found) = functions_of(source);
        bodies.extend(functions);
        hooks.extend(found);
    }
    let defined: BTreeSet<&str> = bodies.iter().map(|(name, _)| name.as_str()).collect();
    let mut reached = Vec::new();
    for hook in &hooks {
        let mut seen = BTreeSet::from([hook.clone()]);
        let mut stack = vec![vec![hook.clone()]];
        while let Some(chain) = stack.pop() {
            let last = chain.last().expect("a chain has its hook");
            for (_, body) in bodies.iter().filter(|(name, _)| name == last) {
                for callee in callees(body) {
                    if !defined.contains(callee.as_str()) || !seen.insert(callee.clone()) {
                        continue;
                    }
                    let mut next = chain.clone();
                    next.push(callee.clone());
                    if USER_LOGIC.contains(&callee.as_str()) {
                        stack.push(next);
                    } else if !CODECS.contains(&callee.as_str()) {
                        reached.push(next.join(" → "));
                    }
                }
            }
        }
    }
    reached
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

#[test]
fn i12_i13_i14_the_users_logic_hooks_reach_no_operator_helper() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the simulator is in the workspace");
    let sources: Vec<String> = OPERATOR_LOGIC
        .iter()
        .map(|path| read(&root.join(path)))
        .collect();
    // The lint sees the hooks and the operators' private helpers.
    let (functions, hooks) = functions_of(&sources.concat());
    for hook in ["joined", "extracted", "fold", "merge", "key_of"] {
        assert!(
            hooks.contains(hook),
            "the lint does not see hook `{hook}`: {hooks:?}"
        );
    }
    for helper in ["record", "deliver", "write"] {
        assert!(
            functions.iter().any(|(name, _)| name == helper),
            "the lint does not see the private helper `{helper}`"
        );
    }
    let reached = helpers_reached(&sources);
    assert!(
        reached.is_empty(),
        "a user-logic hook the oracles call runs operator code (run the user's \
         logic with its codecs there, and nothing else):\n{}",
        reached.join("\n")
    );
}

/// The lint fails on a hook that reaches a private or `pub(crate)`
/// helper of the operator, through another function or a trait's method.
#[test]
fn i13_the_lint_catches_a_hook_reaching_a_private_helper() {
    let operator = "impl StreamJoinDecl {\n    pub fn joined(&self, key: &[u8]) -> Out {\n        self.joiner.joined(key)\n    }\n}\n\
        trait Joiner {\n    fn joined(&self, key: &[u8]) -> Out;\n}\n\
        impl Joiner for Logic {\n    fn joined(&self, key: &[u8]) -> Out {\n        let key = self.decode_key(key)?;\n        Logic::pair(self, &key)\n    }\n}\n\
        impl Logic {\n    fn decode_key(&self, key: &[u8]) -> K {\n        decode(key)\n    }\n    pub(crate) fn pair(&self, key: &K) -> Out {\n        (self.joiner)(key)\n    }\n}\n";
    assert_eq!(
        helpers_reached(&[operator.to_string()]),
        vec!["joined → pair".to_string()]
    );
    let clean = operator.replace("Logic::pair(self, &key)", "(self.joiner)(&key)");
    assert!(helpers_reached(&[clean]).is_empty());
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
    assert_oracle_apart(
        "restored.rs",
        &forbidden,
        &["Disks", "StoreLedger", "restore_start", "judge_opened"],
    );
}

/// Asserts that the checker file `file` (in `src/sim/checker/`) calls none
/// of `forbidden` and names none of `names` outside its comments.
fn assert_oracle_apart(file: &str, forbidden: &BTreeSet<String>, names: &[&str]) {
    let crate_root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let oracle = read(&crate_root.join("src/sim/checker").join(file));
    let code: String = oracle
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let mut found: Vec<String> = calls_of(&oracle, forbidden)
        .into_iter()
        .map(|(line, name)| format!("{file}:{line}: calls `{name}`"))
        .collect();
    for name in names {
        if code.contains(name) {
            found.push(format!("{file} names `{name}`"));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// I20's oracle shares no code with the answers it judges: it calls none
/// of the core's query functions (Q1) or slot-key helpers and names
/// neither the world's disk model nor the core's query rule; it reads
/// only the answers the world traced, the commits and the committed logs.
#[test]
fn i20_the_query_oracle_shares_no_code_with_the_answer() {
    let crate_root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = crate_root
        .parent()
        .expect("the simulator is in the workspace");
    let mut forbidden: BTreeSet<String> =
        operator_functions(&read(&root.join("src/local_store/query.rs")));
    for seen in ["answer_query", "query_task", "queryable_stage"] {
        assert!(forbidden.contains(seen), "the lint does not see `{seen}`");
    }
    forbidden.extend(
        [
            "changelog_key",
            "from_changelog_key",
            "from_changelog_bytes",
        ]
        .map(String::from),
    );
    assert_oracle_apart(
        "queries.rs",
        &forbidden,
        &[
            "Disks",
            "QueryStore",
            "QueryStanding",
            "SlotKey",
            "open_changes",
        ],
    );
}
