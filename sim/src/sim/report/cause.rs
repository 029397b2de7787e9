//! The causes a report groups violations by: the checker's and the
//! properties' invariants, and the simulator's own findings (an unexpected
//! stop, a refused start, a panic, impure logic), which share I8 or I9 with
//! the checker and are told apart by their `finding`.

use crate::sim::checker::{Finding, Invariant, Violation};

/// What a violation is about, finer than its invariant: the simulator's own
/// findings that share an invariant with the checker's are told apart, so
/// that shrinking keeps the cause and a report groups by it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Cause {
    /// A violation the checker or a property found.
    Rule(Invariant),
    /// One of the simulator's own findings.
    Harness(Finding),
}

impl Cause {
    /// The cause of `violation`.
    pub fn of(violation: &Violation) -> Cause {
        match violation.finding {
            Some(finding) => Cause::Harness(finding),
            None => Cause::Rule(violation.invariant),
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::Rule(invariant) => write!(f, "{invariant}"),
            Cause::Harness(finding) => write!(f, "{finding}"),
        }
    }
}

/// Whether any violation of `violations` has `cause`.
pub(crate) fn has_cause(violations: &[Violation], cause: &Cause) -> bool {
    violations
        .iter()
        .any(|violation| Cause::of(violation) == *cause)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// I8, I9, S4: every message prefix a report groups violations by is
    /// defined in docs/RULES.md, under the invariant its violations cite.
    #[test]
    fn i8_i9_every_prefix_is_defined_in_the_rules() {
        let rules = include_str!("../../../../docs/RULES.md");
        let section = |id: &str| {
            let start = rules
                .find(&format!("<a id=\"{id}\"></a>"))
                .unwrap_or_else(|| panic!("RULES.md has no {id}"));
            let rest = &rules[start + 1..];
            &rest[..rest.find("<a id=").unwrap_or(rest.len())]
        };
        for finding in Finding::ALL {
            let prefix = finding.prefix();
            let named = match finding {
                Finding::Impure => section("i9").contains(&format!("\"{prefix}\"")),
                _ => section("i8").contains(&format!("`{prefix}`")),
            };
            assert!(
                named,
                "RULES.md does not name {prefix:?} under its invariant"
            );
        }
        assert!(section("s4").contains("pure logic"));
    }
}
